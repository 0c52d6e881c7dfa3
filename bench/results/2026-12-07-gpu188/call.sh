#!/usr/bin/env bash
# Session 54's A/B (any card): how many tiles an early merging split of batch-1 decode
# attention takes. The early entries cut kv_len into whole 64-key tiles a split over the
# grid's 30-64 splits, so 512 keys make 9 one-tile splits a kv head whose partials meet in
# a ticket merge (D 128: the last block; the gated D 256: every split a share after all have
# arrived). gpu160/161's trace of the 35B's gated launch: ~11 of its ~17 us after the wait
# are partial stores, the arrival and the merge, under o_proj's weight stream. `t2` / `t3`
# (-D ATLAS_EARLY_MIN_TILES=N, attention_long.cu): splits of at least 2 / 3 tiles (5 / 3
# splits at 538 keys; a 3-tile split's tiles are all in its ring's flight at once), so fewer
# blocks arrive and each merges a larger share of fewer partials. Expected: the 35B's gated
# attention shorter on the critical path (21 us a layer on the H100, gpu183) if the merge's
# trips cost more than a block's 2 extra tiles (~0.5 us each); the D-128 models unclear
# (gpu50, before the merge in the launch: 32-key splits beat 128 / 256).
# batch 1 x 512 (the 35B also x 2,048), GPU replay ms a step: off / t2 / t3 / t3 / t2 / off.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
T2="ATLAS_KERNELS_DIR=$PWD/.device/kernels_t2"; T3="ATLAS_KERNELS_DIR=$PWD/.device/kernels_t3"
TAILN=2 t 150 chk2 env $T2 python3 tools/gpu/check_kernels.py -m attention_long
TAILN=2 t 150 chk3 env $T3 python3 tools/gpu/check_kernels.py -m attention_long
crit() {  # the attention's and o_proj's critical-path rows of run $1
  sed -n '/^critical path/,/^between/p' $L/$1.log \
    | grep -E "^decode_attn|^gemv[a-z0-9_]* +decode_attn" | cut -c1-110 | sed "s/^/$1 /"
}
ab() {  # ab NAME DIR [CONTEXT]
  local n=$1 d=$2 c=${3:-512}
  for v in off:X=1 t2:$T2 t3:$T3 t3b:$T3 t2b:$T2 offb:X=1; do
    PLIM=${PL:-75} prof ${n}_${v%%:*} "${v#*:}" --model $d --batch 1 --context $c; done
  echo "== $n x $c off $(aw ${n}_off)| t2 $(aw ${n}_t2)| t3 $(aw ${n}_t3)| t3 $(aw ${n}_t3b)|" \
    "t2 $(aw ${n}_t2b)| off $(aw ${n}_offb)"
  for v in off t2 t3; do crit ${n}_$v; done
}
PL=30 ab q35 $G/qwen3_5-35b-a3b
PL=30 ab q8 $G/qwen3-8b
PL=30 ab q06 $G/qwen3-0.6b
PL=30 ab q30 $G/qwen3-30b-a3b
PL=30 ab q35l $G/qwen3_5-35b-a3b 2048
echo "ALL DONE"
