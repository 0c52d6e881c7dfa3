#!/usr/bin/env bash
# session-38 call G (prepared for session 39; not run: session 38's device time was spent):
# the batch-1 MoE down GEMV's twins holding one chunk-step count's code
# (ATLAS_MOE_DOWN_ONE_STEP=1: moe_down_gemv_sum_s1 .. _s4_bf16, 1,104 .. 2,280 SASS
# instructions against the four counts' 6,728) against the default, in one call, after the
# checks. Expected if the attention's one-head-dim gain (gpu129: up to 2.4 us a layer) carries
# over: the down's ~10 us fixed chain shorter, ~0.5-2 us a layer on Qwen3-30B-A3B (48 layers)
# and Qwen3.5-35B-A3B (40).
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
TAILN=2 t 150 checks python3 tools/gpu/check_kernels.py -k "moe_down_gemv" -m moe_decode --out $R/checks.json
grep FAIL $L/checks.log | cut -c1-200 | head
b1() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch 1 --context 512; }
for m in qwen3-30b-a3b:q30 qwen3_5-35b-a3b:q35 minimax-m2-8l:mm2; do
  n=${m%%:*}; s=${m##*:}
  b1 ${s}_def "X=1" $n; b1 ${s}_one "ATLAS_MOE_DOWN_ONE_STEP=1" $n
  b1 ${s}_def2 "X=1" $n; b1 ${s}_one2 "ATLAS_MOE_DOWN_ONE_STEP=1" $n
done
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay), batch 1 x 512: default / one step / default / one step"
for s in q30 q35 mm2; do echo "$s $(step ${s}_def) $(step ${s}_one) $(step ${s}_def2) $(step ${s}_one2)"; done
echo "ALL DONE"
