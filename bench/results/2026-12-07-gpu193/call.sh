#!/usr/bin/env bash
# gpu193 (session 55): what ran, as `AB_SHORT=probe timeout 190 bash
# bench/results/next-gpu-call/short.sh` from main at 24e0a04a with .device (kernels, py,
# tools) prepared at e4bffde4, the same kernel and py trees: on a card other than an H200,
# short.sh execs next-gpu-call/ab.sh, which with AB_SHORT=probe stops after these steps.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
TAILN=2 t 90 chk python3 tools/gpu/check_kernels.py -m sampler
for v in dflt:X=1 dg1:ATLAS_DECODE_GEMM_MIN_M=1; do
  PLIM=40 prof q8_${v%%:*} "${v#*:}" --model $G/qwen3-8b --batch 1 --context 512 > /dev/null; done
for n in q8_dflt q8_dg1; do echo "== $n $(aw $n)"
  sed -n '/^critical path/,/^between/p' $L/$n.log | sed -n 3,9p | cut -c1-110; done
echo "ALL DONE"
