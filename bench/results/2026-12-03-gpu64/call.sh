#!/usr/bin/env bash
# session-20 call C: the early entry with its first table entries guessed and requested with kv_len (one trip less
# before its first tile): checks, the phase trace (all rope-fused geometries), and batch-1 steps against the
# staged / late entries (ATLAS_DECODE_ATTN_LONG_EARLY=0), both orders. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=2 t 120 checks python3 tools/gpu/check_kernels.py -m attention_long --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
TAILN=0 t 300 trace python3 tools/gpu/trace_decode_attn.py --long
grep -E "gemv|fit|keys +(1|512|4096) " $L/trace.log | cut -c1-330
E=ATLAS_DECODE_ATTN_LONG_EARLY
b1() { prof "$1" "$2" --model "$3" --batch 1 --context ${4:-512}; }
b1 q06_e "$E=1" $G/qwen3-0.6b; b1 q06_d "$E=0" $G/qwen3-0.6b; b1 q06_d2 "$E=0" $G/qwen3-0.6b; b1 q06_e2 "$E=1" $G/qwen3-0.6b
b1 q8_e "$E=1" $G/qwen3-8b; b1 q8_d "$E=0" $G/qwen3-8b
b1 q30_e "$E=1" $G/qwen3-30b-a3b; b1 q30_d "$E=0" $G/qwen3-30b-a3b
b1 l1_e "$E=1" $G/llama-3.2-1b
echo "== attention rows on the critical path"
for n in q06_e q06_d q06_d2 q06_e2 q8_e q8_d q30_e q30_d l1_e; do
  echo "$n $(grep -E "^decode_attn\w* +gemv" $L/$n.log | head -1 | cut -c1-120)"; done
echo "ALL DONE"
