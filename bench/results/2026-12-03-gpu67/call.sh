#!/usr/bin/env bash
# session-20 call F (short: the session's last device time): the cluster twins with the output shares fixed
# (gpu66: the idle ranks' shares were never written), checks and batch-1 steps with and without them.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=2 t 120 checks python3 tools/gpu/check_kernels.py -m attention_long -k cluster -k early --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
E=ATLAS_DECODE_ATTN_LONG_CLUSTER
b1() { prof "$1" "$2" --model "$3" --batch 1 --context ${4:-512}; }
b1 q30_c "$E=1" $G/qwen3-30b-a3b; b1 q30_e "$E=0" $G/qwen3-30b-a3b; b1 q30_e2 "$E=0" $G/qwen3-30b-a3b; b1 q30_c2 "$E=1" $G/qwen3-30b-a3b
b1 q06_c "$E=1" $G/qwen3-0.6b; b1 q06_e "$E=0" $G/qwen3-0.6b
b1 q8_c "$E=1" $G/qwen3-8b; b1 q8_e "$E=0" $G/qwen3-8b
echo "== attention rows on the critical path"
for n in q30_c q30_e q30_e2 q30_c2 q06_c q06_e q8_c q8_e; do
  echo "$n $(grep -E "^decode_attn\w* +gemv" $L/$n.log | head -1 | cut -c1-120)"; done
echo "ALL DONE"
