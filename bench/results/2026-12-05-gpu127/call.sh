#!/usr/bin/env bash
# session-37 call E (prepared, not run): is the long decode kernel's regression since 45fffd44 the code that proj_dim
# and sinks added? The rope entries compiled with both as constants (ATLAS_LONG_ROPE_LEAN=1: the head length D, no
# sinks; the early entry's SASS 9,104 -> 8,648 instructions, 45fffd44 had 8,632; wrong for padded heads and sinks,
# so only models without them run on it here) against the default sets, in one call.
# Expected if the code is the cause: gpu122's attention deltas back (0.56 us a layer on Qwen3-0.6B, 1.27 on
# 30B-A3B, 0.95 on 8B; ~16 / 61 / 34 us a step on the H200).
# Prepare: ATLAS_PREP_SETS="hopper__common__*" ATLAS_PREP_VARIANT="lean:ATLAS_LONG_ROPE_LEAN=1"
#   bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
# 1. phase trace, both sets.  2. batch-1 GPU ms a step at 512 keys, default / lean / default.
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
LEAN=$PWD/.device/kernels_lean
trc() { TAILN=14 t 60 "trace_$1" env ATLAS_KERNELS_DIR=$2 python3 tools/gpu/trace_decode_attn.py --long --trace-only \
  --keys 512 --heads qwen3-0.6b,qwen2.5-1.5b,qwen3-30b-a3b; }
trc default $PWD/.device/kernels; trc lean $LEAN
b1() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch 1 --context 512; }
for m in qwen3-0.6b:q06 qwen3-30b-a3b:q30 qwen3-8b:q8 qwen2.5-1.5b:q15; do
  n=${m%%:*}; s=${m##*:}
  b1 ${s}_def "X=1" $n; b1 ${s}_lean "ATLAS_KERNELS_DIR=$LEAN" $n; b1 ${s}_def2 "X=1" $n
done
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay), batch 1 x 512: default / lean rope entries / default"
for s in q06 q30 q8 q15; do echo "$s $(step ${s}_def) $(step ${s}_lean) $(step ${s}_def2)"; done
echo "ALL DONE"
