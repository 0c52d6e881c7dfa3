#!/usr/bin/env bash
# session-20 call A: the early-prologue twins of the batch-1 rope-fused long attention (4c3c7a9b,
# ATLAS_DECODE_ATTN_LONG_EARLY=1) against their references, and batch-1 steps with and without them
# (both orders). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -m attention_long --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
E=ATLAS_DECODE_ATTN_LONG_EARLY
b1() { prof "$1" "$2" --model "$3" --batch 1 --context ${4:-512}; }
b1 q06_d "$E=0" $G/qwen3-0.6b; b1 q06_e "$E=1" $G/qwen3-0.6b
b1 q06_e2 "$E=1" $G/qwen3-0.6b; b1 q06_d2 "$E=0" $G/qwen3-0.6b
b1 q06_clu "ATLAS_DECODE_ATTN_LONG_MIN_KEYS=100000000" $G/qwen3-0.6b
b1 q30_d "$E=0" $G/qwen3-30b-a3b; b1 q30_e "$E=1" $G/qwen3-30b-a3b
b1 q30_e2 "$E=1" $G/qwen3-30b-a3b; b1 q30_d2 "$E=0" $G/qwen3-30b-a3b
b1 q8_d "$E=0" $G/qwen3-8b; b1 q8_e "$E=1" $G/qwen3-8b
b1 l1_e "$E=1" $G/llama-3.2-1b; b1 l1_d "$E=0" $G/llama-3.2-1b
b1 q8k4_d "$E=0" $G/qwen3-8b 4096; b1 q8k4_e "$E=1" $G/qwen3-8b 4096
echo "== attention rows on the critical path"
for n in q06_d q06_e q06_e2 q06_d2 q06_clu q30_d q30_e q30_e2 q30_d2 q8_d q8_e l1_e l1_d q8k4_d q8k4_e; do
  echo "$n $(grep -E "^decode_attn\w* +gemv" $L/$n.log | head -1 | cut -c1-120)"; done
echo "ALL DONE"
