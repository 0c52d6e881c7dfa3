#!/usr/bin/env bash
# Prepared in session 50 (rename the folder to its date-gpuNN). On an H200: the standings at
# this HEAD through gpu171's call (the gate records are open since sessions 49-50's kernel
# commits; the add + norm's late trigger is new to the defaults: ops/norm.norm_late_pays).
# On any other card: the late trigger's rule on configs it was not set from, both orders,
# ATLAS_NORM_LATE=0 against the default (late where the smallest projection after a norm is
# 24 MiB or more: Llama-3.2-3B's qkv 30 MiB, Llama-3.1-8B / Mistral-7B 48, Qwen2.5-7B 32,
# Qwen3-8B FP8-block 24; Qwen2.5-1.5B 6 stays off, so equal), then NVFP4's h2 rows 4 vs 8
# (gpu179 did not reach it). batch 1 x 512, GPU replay / async wall ms a step.
# Prepare: CUOBJDUMP=.. bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-06-gpu171/call.sh
fi
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
OFF=ATLAS_NORM_LATE=0
for m in llama-3.2-3b llama-3.1-8b qwen2.5-7b mistral-7b-v0.3 q-fp8-block-head/qwen3-8b \
    qwen2.5-1.5b; do
  n=${m//\//_}
  PL=50 b1 ${n}_on X=1 $G/$m; PL=50 b1 ${n}_off $OFF $G/$m; PL=50 b1 ${n}_offb $OFF $G/$m
  PL=50 b1 ${n}_onb X=1 $G/$m
  echo "== $m late $(aw ${n}_on)| off $(aw ${n}_off)| off $(aw ${n}_offb)| late $(aw ${n}_onb)"
done
N=$G/q-nvfp4-head/qwen3-8b; H4=ATLAS_QUANT_H2_ROWS=4
PL=60 b1 nv_r4 $H4 $N; PL=60 b1 nv_r8 X=1 $N; PL=60 b1 nv_r4b $H4 $N
echo "== nvfp4 8B rows4 $(aw nv_r4)| rows8 $(aw nv_r8)| rows4 $(aw nv_r4b)"
echo "ALL DONE"
