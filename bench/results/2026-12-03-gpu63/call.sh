#!/usr/bin/env bash
# session-20 call B: where batch 1's tensor-core decode attention spends its time (the early entry's phase trace,
# trace_decode_attn.py --long --quick: Qwen3-0.6B and Qwen3-8B heads, alone / behind itself / behind the qkv GEMV,
# and the time-vs-keys curve), the traced twin's check case, and batch-1 steps of the other dense published
# configs with the early entry (bandwidth over GPU time). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=2 t 120 checks python3 tools/gpu/check_kernels.py -m attention_long -k early --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
TAILN=0 t 300 trace python3 tools/gpu/trace_decode_attn.py --long --quick
grep -vE "^\s*$" $L/trace.log | cut -c1-330
b1() { prof "$1" "$2" --model "$3" --batch 1 --context ${4:-512}; }
b1 q17 "X=1" $G/qwen3-1.7b; b1 q4 "X=1" $G/qwen3-4b; b1 l3 "X=1" $G/llama-3.2-3b; b1 l8 "X=1" $G/llama-3.1-8b
for n in q17 q4 l3 l8; do echo "$n $(grep -E "^weights" $L/$n.log | cut -c1-100)"; done
echo "ALL DONE"
