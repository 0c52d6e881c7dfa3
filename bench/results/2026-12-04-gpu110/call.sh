#!/usr/bin/env bash
# session-29 call B. gpu109 measured the warp-merge change (rows D + 8 floats apart, each row's weights once)
# slower in the batch-1 step (30B 2.714 vs 2.680, 0.6B 0.753 vs 0.725) while its phase trace looked faster.
# Three attention_long PTX sets: old (7c7bb587, kernels_old), this tree (pitch + weights once), pad (7c7bb587 with
# only the padded pitch and 8-byte stores, kernels_pad). (1) checks of this tree's attention_long; (2) the phase
# trace of the 30B's batch-1 early entry on each set; (3) batch 1 x 512 steps old / new / pad (both orders for
# 30B and 0.6B); (4) ATLAS_BATCHED_GEMV_MIN_M=2 vs the default 8 at batches 3 and 6 (gpu109: a win at 4, a loss
# at 2). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
OLD="ATLAS_KERNELS_DIR=$PWD/.device/kernels_old"
PAD="ATLAS_KERNELS_DIR=$PWD/.device/kernels_pad"
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -m attention_long -x " leaf " --out $R/checks.json
grep -E "FAIL|Traceback|rror|passed" $L/checks.log | head -8 | cut -c1-200
for s in "old $OLD" "new X=1" "pad $PAD"; do
  set -- $s
  TAILN=5 t 90 trace_$1 env $2 python3 tools/gpu/trace_decode_attn.py --long --heads qwen3-30b-a3b --keys 512 --trace-only
done
M30=$G/qwen3-30b-a3b; D06=$G/qwen3-0.6b
bn m30_old "$OLD" $M30 1; bn m30_new "X=1" $M30 1; bn m30_pad "$PAD" $M30 1
bn m30_pad2 "$PAD" $M30 1; bn m30_new2 "X=1" $M30 1; bn m30_old2 "$OLD" $M30 1
bn d06_old "$OLD" $D06 1; bn d06_new "X=1" $D06 1; bn d06_pad "$PAD" $D06 1
bn d06_pad2 "$PAD" $D06 1; bn d06_new2 "X=1" $D06 1; bn d06_old2 "$OLD" $D06 1
bn d8_old "$OLD" $G/qwen3-8b 1; bn d8_new "X=1" $G/qwen3-8b 1; bn d8_pad "$PAD" $G/qwen3-8b 1
GM="ATLAS_BATCHED_GEMV_MIN_M=2"
for m in "d8 $G/qwen3-8b" "d06 $D06"; do
  set -- $m
  bn ${1}b3 "X=1" $2 3; bn ${1}b3_g "$GM" $2 3; bn ${1}b6 "X=1" $2 6; bn ${1}b6_g "$GM" $2 6
done
echo "== GPU ms a step (graph replay), PDL on, batch 1 x 512: attention_long old / new / pad"
for n in m30 d06; do echo "$n old $(step ${n}_old) / $(step ${n}_old2)  new $(step ${n}_new) / $(step ${n}_new2)  pad $(step ${n}_pad) / $(step ${n}_pad2)"; done
echo "d8 old $(step d8_old)  new $(step d8_new)  pad $(step d8_pad)"
echo "== batched GEMV from 2 rows: default (8) / MIN_M=2"
for n in d8b3 d8b6 d06b3 d06b6; do echo "$n $(step $n) / $(step ${n}_g)"; done
echo "ALL DONE"
