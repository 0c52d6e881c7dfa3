#!/usr/bin/env bash
# session-38 call A: batch 1's early rope entries' _exact twins (heads of head_dim elements,
# no sinks: proj_dim and sinks as constants, 8,648 SASS instructions against the general
# code's 9,104; ATLAS_DECODE_ATTN_LONG_EXACT=0 the general code) against the general entries,
# in one call. Expected if the code size is the cause of gpu122's regression: the attention
# deltas back (0.56 us a layer on Qwen3-0.6B, 1.27 on 30B-A3B, 0.95 on 8B; ~16 / 61 / 34 us a
# step). session 37's gpu127 (the same question as a compile-time kernel-set variant) never ran.
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
# 1. checks: every long_rope case (the exact twins at batch 1, the general ones on the same
#    heads, padded heads and sinks on the general code).  2. phase trace (the exact twins).
# 3. batch-1 GPU ms a step at 512 keys: exact / general / exact.
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
TAILN=2 t 150 checks python3 tools/gpu/check_kernels.py -k long_rope --out $R/checks.json
grep FAIL $L/checks.log | cut -c1-200 | head
TAILN=14 t 60 trace python3 tools/gpu/trace_decode_attn.py --long --trace-only --keys 512 \
  --heads qwen3-0.6b,qwen2.5-1.5b,qwen3-30b-a3b
b1() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch 1 --context 512; }
for m in qwen3-0.6b:q06 qwen3-30b-a3b:q30 qwen3-8b:q8 qwen2.5-1.5b:q15; do
  n=${m%%:*}; s=${m##*:}
  b1 ${s}_ex "X=1" $n; b1 ${s}_gen "ATLAS_DECODE_ATTN_LONG_EXACT=0" $n; b1 ${s}_ex2 "X=1" $n
done
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay), batch 1 x 512: exact / general / exact"
for s in q06 q30 q8 q15; do echo "$s $(step ${s}_ex) $(step ${s}_gen) $(step ${s}_ex2)"; done
echo "ALL DONE"
