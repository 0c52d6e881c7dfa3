#!/usr/bin/env bash
# Session 56: first light of the FP8 tensor-core decode GEMM (gemm_decode_fp8.cu,
# ATLAS_QUANT_FP8_WGMMA=1) on any card: its 22 check cases, then Qwen3-8B FP8-block batch 1 x
# 512 (synthetic weights seed 0, GPU ms a step) default / wgmma / wgmma / default, bf16 for the
# ratio, and the LM-head-quantized checkpoint both ways. Prediction (docs/quantization.md
# "Session 55", from gpu177's H200 step 2.611 ms): ~190 us less a step on an H200 (~1.74x
# bf16) if the mould streams at ~90% of copy there; on an H100 about even (its convert GEMV
# already streams gate_up at ~2.68 TB/s). Then, on an H200, the four gate records.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
TAILN=3 t 240 chk_fp8 python3 tools/gpu/check_kernels.py -m gemm_decode_fp8
grep -cE "^FAIL|FAIL " $L/chk_fp8.log | sed 's/^/check FAIL lines: /'
F8=$G/q-fp8-block/qwen3-8b; F8H=$G/q-fp8-block-head/qwen3-8b; WG=ATLAS_QUANT_FP8_WGMMA=1
for v in def:X=1 wg:$WG wgb:$WG defb:X=1; do
  PLIM=60 prof f8_${v%%:*} "${v#*:}" --model $F8 --batch 1 --context 512 > /dev/null; done
PLIM=60 prof bf16 X=1 --model $G/qwen3-8b --batch 1 --context 512 > /dev/null
for v in def:X=1 wg:$WG; do
  PLIM=60 prof f8h_${v%%:*} "${v#*:}" --model $F8H --batch 1 --context 512 > /dev/null; done
KLIM=150 kt f8 X=1 -k "b1 fp8-block"
echo "== Qwen3-8B batch 1 x 512: GPU replay / async wall ms a step"
for n in f8_def f8_wg f8_wgb f8_defb bf16 f8h_def f8h_wg; do printf "%-8s %s\n" $n "$(aw $n)"; done
for n in f8_def f8_wg; do echo "== $n critical path"
  sed -n '/^critical path/,/^between/p' $L/$n.log | sed -n 3,10p | cut -c1-110; done
h200_gates
echo "== gates"; grep -h -E "PASS|FAIL|recorded" $L/gate_*.log 2>/dev/null | head -8
echo "ALL DONE"
