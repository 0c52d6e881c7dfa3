#!/usr/bin/env bash
# session-21 call B: the staged entry's table-window twin (ATLAS_DECODE_ATTN_LONG_TAB=1): checks, the gap tool's
# variants (launches between events; cold / hot) with and without it, the batch-64 x 1,536 and batch-8 x 4,096 steps
# A/B in both orders, the kernel-table row. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -m attention_long -k tab -k "long_rope D128 gqa4 splits1" --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
T=ATLAS_DECODE_ATTN_LONG_TAB
TAILN=11 t 150 gap_d python3 tools/gpu/attn_step_gap.py
TAILN=11 t 150 gap_t env $T=1 python3 tools/gpu/attn_step_gap.py
kt rope_t "$T=1" -k "qwen3-8b b64 hist1536 +rope"
kt rope_d "" -k "qwen3-8b b64 hist1536 +rope"
b() { PLIM=150 prof "$1" "$2" --model $G/qwen3-8b --batch $3 --context $4; }
b b64_d "$T=0" 64 1536; b b64_t "$T=1" 64 1536; b b64_t2 "$T=1" 64 1536; b b64_d2 "$T=0" 64 1536
b b8_d "$T=0" 8 4096; b b8_t "$T=1" 8 4096
echo "== attention rows (us a call) and the critical path"
for n in b64_d b64_t b64_t2 b64_d2 b8_d b8_t; do
  echo "$n $(grep -E "^decode_attn\w+ +[0-9]" $L/$n.log | head -1 | cut -c1-90) | $(grep -E "^decode_attn\w* +gemm" $L/$n.log | head -1 | cut -c40-120)"; done
echo "ALL DONE"
