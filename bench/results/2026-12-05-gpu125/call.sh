#!/usr/bin/env bash
# session-37 call C: the long decode kernel's rope rows with a constant head length (bef7df0d) against the
# runtime length they had since proj_dim (95dc77fc), a compile-time A/B in one call: the default sets vs
# .device/kernels_rt (prep_device.sh ATLAS_PREP_VARIANT="rt:ATLAS_LONG_ROPE_RUNTIME_LEN=1").
# gpu124's trace had q_ready 0.45 us later after waited than gpu114's (45fffd44), and gpu122's steps showed
# the attention kernels 0.6-1.3 us a layer slower than at gpu114 (Qwen3-0.6B 0.717 -> 0.732 ms, 30B-A3B 2.674 ->
# 2.746, 8B 4.246 -> 4.283).
# 1. checks: attention_long (every entry, padded heads included), the MoE cases with the act slack (moe_grouped,
#    moe_grouped_sm90, moe_decode).
# 2. phase trace, both sets.  3. batch-1 GPU ms a step at 512 keys, default / rt / default.
# Repo root, carry [".device", ".whl"]; .device/head_src.tgz is `git archive HEAD py tools kernels` of the call.
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
RT=$PWD/.device/kernels_rt
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -m attention_long -m moe_grouped -m moe_grouped_sm90 \
  -m moe_decode --out $R/checks.json
grep FAIL $L/checks.log | cut -c1-200 | head -20
trc() { TAILN=14 t 60 "trace_$1" env ATLAS_KERNELS_DIR=$2 python3 tools/gpu/trace_decode_attn.py --long --trace-only \
  --keys 512 --heads qwen3-0.6b,qwen2.5-1.5b,qwen3-30b-a3b; }
trc new $PWD/.device/kernels; trc rt $RT
b1() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch 1 --context 512; }
for m in qwen3-0.6b:q06 qwen3-30b-a3b:q30 qwen3-8b:q8 qwen2.5-1.5b:q15; do
  n=${m%%:*}; s=${m##*:}
  b1 ${s}_new "X=1" $n; b1 ${s}_rt "ATLAS_KERNELS_DIR=$RT" $n; b1 ${s}_new2 "X=1" $n
done
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay), batch 1 x 512: constant length / runtime length / constant length"
for s in q06 q30 q8 q15; do echo "$s $(step ${s}_new) $(step ${s}_rt) $(step ${s}_new2)"; done
echo "ALL DONE"
