#!/usr/bin/env bash
# session-18 call D (lead, short): more samples of ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER (gpu54: 30B -2.0%, 8B -0.2%,
# 0.6B +1.2% in one sample) on the other full-attention models at batch 1, both orders on 0.6B, and the 30B at batch 8,
# to decide a default. Kernels: the a43cac3 set (= gpu54's). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
b1() { prof "$1" "$2" --model "$3" --batch ${4:-1} --context 512; }
LT=ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1
b1 o06 "X=1" $G/qwen3-0.6b; b1 l06 "$LT" $G/qwen3-0.6b; b1 l06_2 "$LT" $G/qwen3-0.6b; b1 o06_2 "X=1" $G/qwen3-0.6b
b1 l17 "$LT" $G/qwen3-1.7b; b1 o17 "X=1" $G/qwen3-1.7b
b1 o4 "X=1" $G/qwen3-4b; b1 l4 "$LT" $G/qwen3-4b
b1 lL1 "$LT" $G/llama-3.2-1b; b1 oL1 "X=1" $G/llama-3.2-1b
b1 oL8 "X=1" $G/llama-3.1-8b; b1 lL8 "$LT" $G/llama-3.1-8b
b1 l30b8 "$LT" $G/qwen3-30b-a3b 8; b1 o30b8 "X=1" $G/qwen3-30b-a3b 8
for f in o06 l06 o17 l17; do echo "-- $f"; grep -A8 "^critical path" $L/$f.log | grep -E "decode_attn|^gemv_bf16_single +decode" | cut -c1-110; done
echo "ALL DONE"
