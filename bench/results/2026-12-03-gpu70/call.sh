#!/usr/bin/env bash
# session-21 call C: what turns the staged entry's 108 us (back to back) into 122 (after an L2 sweep): the gap tool's
# l2 / tlb / power variants and the cold read / copy ceilings; the page-touching twin (ATLAS_DECODE_ATTN_LONG_TOUCH=1)
# in the tool and in the batch-64 x 1,536 step, both orders. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -m attention_long -k touch --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
T=ATLAS_DECODE_ATTN_LONG_TOUCH
TAILN=15 t 150 gap_d python3 tools/gpu/attn_step_gap.py
TAILN=13 t 150 gap_t env $T=1 python3 tools/gpu/attn_step_gap.py
b() { PLIM=150 prof "$1" "$2" --model $G/qwen3-8b --batch $3 --context $4; }
b b64_d "$T=0" 64 1536; b b64_t "$T=1" 64 1536; b b64_t2 "$T=1" 64 1536; b b64_d2 "$T=0" 64 1536
echo "== attention rows (us a call) and the critical path"
for n in b64_d b64_t b64_t2 b64_d2; do
  echo "$n $(grep -E "^decode_attn\w+ +[0-9]" $L/$n.log | head -1 | cut -c1-90) | $(grep -E "^decode_attn\w* +gemm" $L/$n.log | head -1 | cut -c40-120)"; done
echo "ALL DONE"
