#!/usr/bin/env bash
# session-23 call F (diagnosis through existing switches, no code change): the batch-1 MoE down launch's time,
# Qwen3.5-35B-A3B batch 1 x 512, on .device/kernels_actt (gpu83's per-tile set: main's moe_decode since 32283e5a):
# default, ATLAS_MOE_DOWN_NORM=0 (no ticket + last-block RMSNorm tail: an add_rmsnorm launch instead),
# ATLAS_MOE_DOWN_GEMV_TILES=1 / 4 (512 blocks of a tile / 128 of four), ATLAS_MOE_DOWN_GEMV=0 (the row-group kernel),
# each with PDL off (the launch's own time) and the step with PDL on. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
export ATLAS_KERNELS_DIR=$PWD/.device/kernels_actt
M=$G/qwen3_5-35b-a3b
b1() { PLIM=60 prof "$1" "$2" --model $M --batch 1 --context 512; }
for v in "def:X=1" "nonorm:ATLAS_MOE_DOWN_NORM=0" "t1:ATLAS_MOE_DOWN_GEMV_TILES=1" "t4:ATLAS_MOE_DOWN_GEMV_TILES=4" \
         "rowgrp:ATLAS_MOE_DOWN_GEMV=0"; do
  n=${v%%:*}; e=${v#*:}
  b1 "${n}_off" "$e ATLAS_PDL=0"
  b1 "${n}_on" "$e"
done
echo "== Qwen3.5-35B-A3B batch 1 x 512: GPU ms a step (PDL off / on), and the PDL-off us a call of the MoE-block launches"
for v in def nonorm t1 t4 rowgrp; do
  printf "%-7s %s / %s\n" $v "$(hdr ${v}_off | head -1 | grep -oE 'replay\) [0-9.]+')" "$(hdr ${v}_on | head -1 | grep -oE 'replay\) [0-9.]+')"
  sed -n '/^kernel  /,/^critical/p' $L/${v}_off.log | grep -E "^moe_|^add_rmsnorm" | awk '{printf "    %-42s %s calls %s us\n", $1, $2, $4}'
done
echo "ALL DONE"
