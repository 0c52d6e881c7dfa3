#!/usr/bin/env bash
# Prepared in session 48 for the next device call (its starts were refused; rename the folder to
# its date-gpuNN): on an H200, the standings at this HEAD (gpu171's call; NVFP4's split decode, the
# per-SM occupancy count, the narrow SwiGLU twin and the lean GEMV twin all new to one). On any
# other card: the Qwen3-8B ratios at this HEAD (bf16, FP8-block and NVFP4 as the tool writes
# them, LM heads quantized; gpu137's H100 ratios were 1.728x / 2.278x before the split decode),
# then two re-checks of defaults set before this session's changes, both orders:
# NVFP4's h2 GEMV in 4- vs 8-row blocks (ATLAS_QUANT_H2_ROWS; gpu100 put 8 ahead by 6.3% with
# the own-order decode: the split decode makes a row's products cheaper, which favours 4-row
# blocks' two chunks a thread less than it favours 8-row blocks' shared x), and Qwen3-1.7B's
# gate_up + SwiGLU in 4-row blocks vs the narrow 8-row twin (ATLAS_GEMV_SWIGLU_ROWS=4: 3,072
# blocks, 2.6 waves of 1,188, against 1,536 blocks, 2.3 waves of 660).
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit; bash tools/gpu/prep_git.sh;
#   xz -t .device/*.tar.xz. Carry [".device", ".whl"].
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-06-gpu171/call.sh
fi
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
N=$G/q-nvfp4-head/qwen3-8b; F=$G/q-fp8-block-head/qwen3-8b
PL=75 b1 bf16 X=1 $G/qwen3-8b; PL=75 b1 fp8 X=1 $F; PL=75 b1 nvfp4 X=1 $N
R4=ATLAS_QUANT_H2_ROWS=4
PL=75 b1 nv_r4 $R4 $N; PL=75 b1 nv_r8 X=1 $N; PL=75 b1 nv_r8b X=1 $N; PL=75 b1 nv_r4b $R4 $N
S4=ATLAS_GEMV_SWIGLU_ROWS=4; Q=$G/qwen3-1.7b
PL=60 b1 q17_def X=1 $Q; PL=60 b1 q17_s4 $S4 $Q; PL=60 b1 q17_s4b $S4 $Q; PL=60 b1 q17_defb X=1 $Q
echo "== Qwen3-8B batch 1 x 512, GPU replay / async wall ms | weights GB/s over GPU time"
for n in bf16 fp8 nvfp4; do printf "%-6s %s| %s\n" $n "$(aw $n)" \
  "$(grep -oE 'weights [0-9.]+ GB -> [0-9]+ GB/s over GPU' $L/$n.log)"; done
echo "== NVFP4 h2 rows and Qwen3-1.7B SwiGLU rows, both orders"
printf "nvfp4 rows 4 %s| 8 %s| 8 %s| 4 %s\n" "$(aw nv_r4)" "$(aw nv_r8)" "$(aw nv_r8b)" "$(aw nv_r4b)"
printf "qwen3-1.7b swiglu def %s| 4-row %s| 4-row %s| def %s\n" "$(aw q17_def)" "$(aw q17_s4)" \
  "$(aw q17_s4b)" "$(aw q17_defb)"
for v in def s4; do sed -n '/^critical path/,/^between/p' $L/q17_$v.log | grep -m1 swiglu \
  | cut -c1-110 | sed "s/^/$v /"; done
echo "ALL DONE"
