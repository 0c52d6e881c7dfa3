#!/usr/bin/env bash
# session-43 call B, ~6 min: order = priority.
#   1. issue 12: Qwen3-8B FP8-block (as `atlas models quantize` writes it, LM head FP8) at batch 1
#      with and without ATLAS_GEMV_ROWS=8, both orders: the convert GEMV's 8-row twins (32 KiB
#      blocks at k 4,096, the bf16 GEMV's block size; checked 77/77 on the device in gpu143) were
#      never timed in a step. FP8's GEMVs stream at ~82% of copy on the step's critical path
#      where bf16's reach ~96% (gpu142): at 96% the step is ~2.37 ms, 1.76x bf16.
#   2. issues 10 / 11: Qwen3.5-35B-A3B and Qwen3-30B-A3B at batch 1 with and without the switch
#      (their dense projections are k = 2,048 GEMVs, 16 KiB blocks in bf16)
#   3. (H200 only) the four gate records at this HEAD (gpu142's are OPEN: the kernels moved)
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh (or keep .device
#   when kernels/py/tools did not move); git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit; bash tools/gpu/prep_git.sh.
#   Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
R8=ATLAS_GEMV_ROWS=8
F=$G/q-fp8-block-head/qwen3-8b
b1 fp8_def X=1 $F; b1 fp8_r8 $R8 $F; b1 fp8_r8_2 $R8 $F; b1 fp8_def2 X=1 $F
PL=120 b1 q35_def X=1 $G/qwen3_5-35b-a3b; PL=120 b1 q35_r8 $R8 $G/qwen3_5-35b-a3b
PL=120 b1 q35_r8_2 $R8 $G/qwen3_5-35b-a3b; PL=120 b1 q35_def2 X=1 $G/qwen3_5-35b-a3b
PL=120 b1 q30_def X=1 $G/qwen3-30b-a3b; PL=120 b1 q30_r8 $R8 $G/qwen3-30b-a3b
b1 q8_def X=1 $G/qwen3-8b
h200_gates
echo "== batch 1 x 512: GPU replay / async wall ms a step (default, 8-row GEMV blocks, ...)"
for m in fp8 q35 q30; do
  printf "%-5s def %s| r8 %s| r8 %s| def %s\n" $m "$(aw ${m}_def)" "$(aw ${m}_r8)" "$(aw ${m}_r8_2)" "$(aw ${m}_def2)"; done
echo "q8 bf16 (the FP8 ratio's base) $(aw q8_def)"
for n in fp8_def fp8_r8; do echo "$n:"; grep -A 5 "^critical path" $L/$n.log | tail -4 | cut -c1-110; done
echo "ALL DONE"
