#!/usr/bin/env bash
# session-47: on an H200, the standings (gpu171's call, whose H200 branch is gpu166's). On any
# other card: gemv_bf16_single (the batch-1 4-row GEMV: qkv, o_proj, down, the GDN in / out
# projections) capped at 48 registers against its free 56 (variant set g48, -D
# ATLAS_GEMV_SINGLE_MAXNREG=48: no spills; a block more an SM at every width: 128 threads 9 -> 10,
# 160 7 -> 8, 192 6 -> 7, 256 4 -> 5), so more of each projection's first tiles are requested
# before its PDL wait. Expect: a little on the narrow-k configs (Qwen3-1.7B, the MoE models' k
# 2,048 projections), level or a little on k >= 4,096 (gpu170: the x8 cap at 256 threads lost
# 0.3-0.9 us).
# Prepare: ATLAS_PREP_VARIANT="g48:ATLAS_GEMV_SINGLE_MAXNREG=48" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz; git rev-parse --short HEAD
#   > .device/commit; bash tools/gpu/prep_git.sh. Carry [".device", ".whl"].
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-06-gpu171/call.sh
fi
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
V="ATLAS_KERNELS_DIR=$PWD/.device/kernels_g48"
TAILN=2 t 150 chk env $V python3 tools/gpu/check_kernels.py -m gemv -k "gemv m1 " -k "gemv_silu m1"
MS="qwen3-1.7b qwen3-4b llama-3.2-3b llama-3.2-1b qwen3-8b qwen3-30b-a3b qwen3_5-35b-a3b"
for m in $MS; do PL=90 b1 ${m}_def X=1 $G/$m; PL=90 b1 ${m}_g48 "$V" $G/$m; done
for m in qwen3-1.7b qwen3-30b-a3b qwen3_5-35b-a3b; do PL=90 b1 ${m}_g48b "$V" $G/$m; PL=90 b1 ${m}_defb X=1 $G/$m; done
echo "== batch 1 x 512: GPU replay / async wall ms a step (def: 56 registers | g48: capped at 48)"
for m in $MS; do printf "%-16s def %s| g48 %s| g48b %s| defb %s\n" $m "$(aw ${m}_def)" "$(aw ${m}_g48)" \
  "$(aw ${m}_g48b)" "$(aw ${m}_defb)"; done
echo "== gemv_bf16_single on the critical path (us a call, by predecessor): def | g48"
for m in $MS; do echo "-- $m"; for v in def g48; do sed -n '/^critical path/,/^between/p' $L/${m}_$v.log \
  | grep -E "^gemv_bf16_single " | cut -c1-110 | sed "s/^/$v /"; done; done
echo "ALL DONE"
