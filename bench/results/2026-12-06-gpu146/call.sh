#!/usr/bin/env bash
# session-43 call D, ~4 min (+ ~5 on an H200): order = priority.
#   1. the new default (8-row blocks for batch 1's gate_up + SwiGLU) against
#      ATLAS_GEMV_SWIGLU_ROWS=4 on published dense configs gpu145 did not run: Llama-3.1-8B,
#      Llama-3.2-3B, Qwen2.5-7B, Mistral-7B-v0.3, Qwen2.5-1.5B, Phi-4-mini, and Qwen3-0.6B
#   2. (H200 only) the four gate records at this HEAD
# Prepare: as gpu145's. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
S4=ATLAS_GEMV_SWIGLU_ROWS=4
MS="llama-3.1-8b llama-3.2-3b qwen2.5-7b mistral-7b-v0.3 qwen2.5-1.5b phi-4-mini qwen3-0.6b"
for m in $MS; do b1 ${m}_s8 X=1 $G/$m; b1 ${m}_s4 $S4 $G/$m; done
echo "== batch 1 x 512: GPU replay / async wall ms a step (default: SwiGLU 8-row | SwiGLU 4-row)"
for m in $MS; do printf "%-16s s8 %s| s4 %s\n" $m "$(aw ${m}_s8)" "$(aw ${m}_s4)"; done
h200_gates
echo "ALL DONE"
