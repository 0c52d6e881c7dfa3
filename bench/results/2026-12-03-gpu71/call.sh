#!/usr/bin/env bash
# session-21 call D: the staged entry's deep-ring twin (ATLAS_DECODE_ATTN_LONG_DEEP=1: six 32 KiB tiles, one block an
# SM): checks, the gap tool's cold variants, the batch-64 x 1,536 step both orders, batch 8 x 4,096.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -m attention_long -k deep --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
T=ATLAS_DECODE_ATTN_LONG_DEEP
TAILN=13 t 150 gap_x env $T=1 python3 tools/gpu/attn_step_gap.py
TAILN=13 t 150 gap_d python3 tools/gpu/attn_step_gap.py
b() { PLIM=150 prof "$1" "$2" --model $G/qwen3-8b --batch $3 --context $4; }
b b64_x "$T=1" 64 1536; b b64_d "$T=0" 64 1536; b b64_d2 "$T=0" 64 1536; b b64_x2 "$T=1" 64 1536
b b8_x "$T=1" 8 4096; b b8_d "$T=0" 8 4096
echo "== attention rows (us a call) and the critical path"
for n in b64_x b64_d b64_d2 b64_x2 b8_x b8_d; do
  echo "$n $(grep -E "^decode_attn\w+ +[0-9]" $L/$n.log | head -1 | cut -c1-90) | $(grep -E "^decode_attn\w* +gemm" $L/$n.log | head -1 | cut -c40-120)"; done
echo "ALL DONE"
