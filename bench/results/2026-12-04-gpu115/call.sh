#!/usr/bin/env bash
# session-30 call B: batch 1's early attention entry with its PDL trigger after the block's partial is stored
# (ATLAS_DECODE_ATTN_LONG_TRIGGER_MERGED=1, decode_attn_long_rope_early_merged_bf16) against the late trigger (the
# default where the model takes it: Qwen3-30B-A3B both orders, Qwen3-8B, Qwen3-4B); its graph trace; checks of
# attention_long. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
MG="ATLAS_DECODE_ATTN_LONG_TRIGGER_MERGED=1"
TAILN=3 t 120 checks python3 tools/gpu/check_kernels.py -m attention_long -x " leaf " --out $R/checks.json
grep -E "FAIL|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
TAILN=0 t 60 trace env $MG python3 tools/gpu/trace_decode_attn.py --long --heads qwen3-30b-a3b,qwen3-8b --keys 512 --trace-only
grep -E "graph|alone" $L/trace.log | cut -c1-250 | head -12
M30=$G/qwen3-30b-a3b
bn m30 "X=1" $M30 1; bn m30_mg "$MG" $M30 1; bn m30_mg2 "$MG" $M30 1; bn m30b "X=1" $M30 1
bn d8 "X=1" $G/qwen3-8b 1; bn d8_mg "$MG" $G/qwen3-8b 1
bn q4 "X=1" $G/qwen3-4b 1; bn q4_mg "$MG" $G/qwen3-4b 1
echo "== GPU ms a step (graph replay), PDL on, batch 1 x 512: late trigger (default) / trigger after the block merge"
echo "m30 $(step m30) / $(step m30b)  merged $(step m30_mg) / $(step m30_mg2)"
for n in d8 q4; do echo "$n $(step $n)  merged $(step ${n}_mg)"; done
echo "ALL DONE"
