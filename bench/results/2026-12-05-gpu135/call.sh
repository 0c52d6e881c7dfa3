#!/usr/bin/env bash
# session-39 call E (prepared, not run: new device loans were paused): batches on the staged
# attention entry's exact twins holding one head dim's code (ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM=1:
# decode_attn_long_rope_staged_exact_d128 / _d64_bf16, 5,208 / 3,560 SASS instructions against
# 9,072) against the staged entry, after the checks. Expected: the batch-1 early twins' gain
# (gpu129: 2.4 us a layer on Qwen3-0.6B) where a batch runs a block or two a SM (batch 8),
# little at 64 sequences. 16 profiles: ~5 min. Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
source tools/gpu/call_head.sh
ON=ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM=1
TAILN=2 t 150 checks python3 tools/gpu/check_kernels.py -k "one-dim" -m attention_long --out $R/checks.json
grep FAIL $L/checks.log | cut -c1-200 | head
bb() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch $4 --context 1024; }
for m in qwen3-0.6b:q06 qwen3-8b:q8; do
  n=${m%%:*}; s=${m##*:}
  for b in 8 64; do
    bb ${s}_b${b}_def X=1 $n $b; bb ${s}_b${b}_one $ON $n $b
    bb ${s}_b${b}_def2 X=1 $n $b; bb ${s}_b${b}_one2 $ON $n $b
  done
done
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay), batch x 1,024 keys: staged / one dim / staged / one dim"
for s in q06 q8; do for b in 8 64; do
  echo "$s b$b $(step ${s}_b${b}_def) $(step ${s}_b${b}_one) $(step ${s}_b${b}_def2) $(step ${s}_b${b}_one2)"
done; done
echo "ALL DONE"
