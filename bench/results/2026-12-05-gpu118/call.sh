#!/usr/bin/env bash
# session-32 call A: (1) checks of the session's and session 30's untested entries: bias_add (session 31),
# rmsnorm (the pitched entry, MiniMax-M2's whole-projection q/k norm), gemv and gemv_fp8 (the 8-row blocks);
# (2) tiny-fixture parity with transformers' goldens on CUDA for every family (tiny-minimax-m2, tiny-qwen2,
# -mistral, -mixtral, -phi3, -smollm3, -qwen3-yarn new on the device); (3) prompt logprobs on CUDA
# and embeddings (tests/gpu/test_prompt_logprobs_cuda.py, test_embeddings_cuda.py); (4) the 8-row GEMV A/B (ATLAS_GEMV_ROWS=8) on the small dense shapes
# of issue 15 and Qwen3-8B bf16 / FP8-block, both orders on the 0.6B. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -m bias_add -m rmsnorm -m gemv -m gemv_fp8 -x " leaf " --out $R/checks.json
grep -E "FAIL|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
TINY=""; for n in tiny-llama tiny-qwen3 tiny-llama3-rope tiny-qwen3-yarn tiny-qwen2 tiny-mistral tiny-phi3 tiny-smollm3 \
  tiny-mixtral tiny-minimax-m2 tiny-qwen3_5 tiny-qwen3_5_moe tiny-qwen3_next; do TINY="$TINY --model tests/fixtures/$n"; done
TAILN=16 t 240 tiny python3 tools/gpu/model_parity.py --backend cuda $TINY --out $R/parity_tiny.json
TAILN=6 t 120 plp python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_prompt_logprobs_cuda.py tests/gpu/test_embeddings_cuda.py
R8="ATLAS_GEMV_ROWS=8"
bn d06 "X=1" $G/qwen3-0.6b 1; bn d06_r8 "$R8" $G/qwen3-0.6b 1; bn d06_r8b "$R8" $G/qwen3-0.6b 1; bn d06b "X=1" $G/qwen3-0.6b 1
for m in llama-3.2-1b qwen3-1.7b qwen3-4b qwen3-8b; do bn $m "X=1" $G/$m 1; bn ${m}_r8 "$R8" $G/$m 1; done
bn d8f "X=1" $G/q-fp8-block/qwen3-8b 1; bn d8f_r8 "$R8" $G/q-fp8-block/qwen3-8b 1
echo "== GPU ms a step (graph replay), PDL on, batch 1 x 512: 4-row GEMV blocks (default) / ATLAS_GEMV_ROWS=8"
echo "qwen3-0.6b $(step d06) / $(step d06_r8)  again $(step d06b) / $(step d06_r8b)"
for m in llama-3.2-1b qwen3-1.7b qwen3-4b qwen3-8b d8f; do echo "$m $(step $m) / $(step ${m}_r8)"; done
echo "ALL DONE"
