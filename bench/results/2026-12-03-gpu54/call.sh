#!/usr/bin/env bash
# session-18 call C (lead): ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER A/B (the rope-fused long attention lets o_proj launch
# once its K/V tiles landed, not on entry) at batch 1 on the models whose layers run it, with its checks; the
# critical-path rows of the attention and of o_proj after it. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -k late --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b1() { prof "$1" "$2" --model "$3" --batch ${4:-1} --context 512; }
LT=ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1
b1 o30 "X=1" $G/qwen3-30b-a3b
b1 l30 "$LT" $G/qwen3-30b-a3b
b1 l30_2 "$LT" $G/qwen3-30b-a3b
b1 o30_2 "X=1" $G/qwen3-30b-a3b
b1 l8 "$LT" $G/qwen3-8b
b1 o8 "X=1" $G/qwen3-8b
b1 o06 "X=1" $G/qwen3-0.6b
b1 l06 "$LT" $G/qwen3-0.6b
b1 l8b8 "$LT" $G/qwen3-8b 8
b1 o8b8 "X=1" $G/qwen3-8b 8
for f in o30 l30 o8 l8; do echo "-- $f"; grep -A8 "^critical path" $L/$f.log | grep -E "decode_attn|^gemv_bf16_single +decode" | cut -c1-110; done
echo "ALL DONE"
