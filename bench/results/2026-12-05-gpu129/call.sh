#!/usr/bin/env bash
# session-38 call D: the exact early attention twins compiled for one head dim
# (ATLAS_DECODE_ATTN_LONG_ONE_DIM=1: decode_attn_long_rope_early[_late]_exact_d128 / _d64,
# ~5,200 / ~3,600 SASS instructions against both dims' 8,648; the path a launch runs is the
# same code) against the both-dims twins (the default), in one call, and batch-1 steps with
# session 38's defaults (the exact twins, the bias GEMV) for issue 15's table.
# Expected if only the code a launch runs matters: no change; gpu128's -0.9 us a layer from
# 456 fewer instructions (0.6B) says the code's size may matter too.
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
TAILN=2 t 150 checks python3 tools/gpu/check_kernels.py -k "early" -m attention_long --out $R/checks.json
grep FAIL $L/checks.log | cut -c1-200 | head
b1() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch 1 --context 512; }
for m in qwen3-0.6b:q06 llama-3.2-1b:l1 qwen3-30b-a3b:q30 qwen3-8b:q8; do
  n=${m%%:*}; s=${m##*:}
  b1 ${s}_both "X=1" $n; b1 ${s}_one "ATLAS_DECODE_ATTN_LONG_ONE_DIM=1" $n
  b1 ${s}_both2 "X=1" $n; b1 ${s}_one2 "ATLAS_DECODE_ATTN_LONG_ONE_DIM=1" $n
done
b1 q15 "X=1" qwen2.5-1.5b
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay), batch 1 x 512: both dims / one dim / both dims / one dim"
for s in q06 l1 q30 q8; do echo "$s $(step ${s}_both) $(step ${s}_one) $(step ${s}_both2) $(step ${s}_one2)"; done
echo "q15 (defaults) $(step q15)"
echo "ALL DONE"
