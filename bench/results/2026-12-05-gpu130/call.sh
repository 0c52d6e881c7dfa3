#!/usr/bin/env bash
# session-38 call E: batch 1's general early entries (padded heads, sinks) compiled for one
# head dim (the default since gpu129 measured the exact ones: decode_attn_long_rope_early[_late]_d128
# / _d64) against both dims' code (ATLAS_DECODE_ATTN_LONG_ONE_DIM=0), on the models that run
# them: Phi-3.5-mini (head 96 padded to 128) and gpt-oss-20b (D 64, sinks); the checks of every
# early entry. Expected: Phi-3.5-mini as the exact D-128 models (-1..-8%), gpt-oss as Llama-3.2-1B
# (D 64: no change).
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
TAILN=2 t 150 checks python3 tools/gpu/check_kernels.py -k "early" -m attention_long --out $R/checks.json
grep FAIL $L/checks.log | cut -c1-200 | head
b1() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch 1 --context 512; }
for m in phi-3.5-mini:phi35 gpt-oss-20b:goss; do
  n=${m%%:*}; s=${m##*:}
  b1 ${s}_one "X=1" $n; b1 ${s}_both "ATLAS_DECODE_ATTN_LONG_ONE_DIM=0" $n
  b1 ${s}_one2 "X=1" $n; b1 ${s}_both2 "ATLAS_DECODE_ATTN_LONG_ONE_DIM=0" $n
done
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay), batch 1 x 512: one dim / both dims / one dim / both dims"
for s in phi35 goss; do echo "$s $(step ${s}_one) $(step ${s}_both) $(step ${s}_one2) $(step ${s}_both2)"; done
echo "ALL DONE"
