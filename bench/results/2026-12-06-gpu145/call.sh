#!/usr/bin/env bash
# session-43 call C, ~4 min (+ ~5 on an H200): order = priority.
#   1. ATLAS_GEMV_SWIGLU_ROWS=8 (8-row blocks for batch 1's gate_up + SwiGLU alone: gpu144 put
#      all of ATLAS_GEMV_ROWS=8's FP8 gain there, its losses in down and qkv) on Qwen3-8B
#      FP8-block (LM head FP8) and bf16 Qwen3-1.7B (both orders), Qwen3-8B, Qwen3-4B,
#      Llama-3.2-1B (one each)
#   2. (H200 only) the four gate records at this HEAD
# Prepare: as gpu144's (kernels as bbac9c6b: .device's PTX and cubins stand; refresh
#   head_src.tgz, commit and git.tar). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
S8=ATLAS_GEMV_SWIGLU_ROWS=8
F=$G/q-fp8-block-head/qwen3-8b
b1 fp8_def X=1 $F; b1 fp8_s8 $S8 $F; b1 fp8_s8_2 $S8 $F; b1 fp8_def2 X=1 $F
b1 q17_def X=1 $G/qwen3-1.7b; b1 q17_s8 $S8 $G/qwen3-1.7b; b1 q17_s8_2 $S8 $G/qwen3-1.7b
b1 q17_def2 X=1 $G/qwen3-1.7b
b1 q8_def X=1 $G/qwen3-8b; b1 q8_s8 $S8 $G/qwen3-8b
b1 q4_def X=1 $G/qwen3-4b; b1 q4_s8 $S8 $G/qwen3-4b
b1 l1_def X=1 $G/llama-3.2-1b; b1 l1_s8 $S8 $G/llama-3.2-1b
show() {
  echo "== batch 1 x 512: GPU replay / async wall ms a step (default | SwiGLU 8-row | ...)"
  for m in fp8 q17 q8 q4 l1; do
    printf "%-5s def %s| s8 %s| s8 %s| def %s\n" $m "$(aw ${m}_def)" "$(aw ${m}_s8)" "$(aw ${m}_s8_2)" "$(aw ${m}_def2)"; done
  for n in fp8_def fp8_s8; do echo "$n:"; grep -A 8 "^critical path" $L/$n.log | tail -7 | cut -c1-110; done
}
show
h200_gates
echo "ALL DONE"
