#!/usr/bin/env bash
# session-29 call A. (1) device checks of attention_long / attention_verify (the warp merge's padded rows and
# once-a-row weights, the shared stash, the early entries' L2 prefetch cases); (2) the phase trace of the 30B's
# batch-1 early entry (512 keys): keys_done -> block_merged is the warp merge (gpu91: 1.66 us);
# (3) batch 1 x 512: the old attention_long PTX (7c7bb587, kernels_old) vs this tree, and this tree with
# ATLAS_L2_PREFETCH_NEXT=1 (the next layer's qkv asked into L2 by the attention), 30B in both orders (the
# 35B's D-256 entry shares the merge; its attention takes no prefetch);
# (4) ATLAS_BATCHED_GEMV_MIN_M=2 (the tensor-core batched GEMV from 2 rows) vs the default 8 at batches 2 / 4.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
OLD="ATLAS_KERNELS_DIR=$PWD/.device/kernels_old"
L2="ATLAS_L2_PREFETCH_NEXT=1"
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -m attention_long -m attention_verify -x " leaf " --out $R/checks.json
grep -E "FAIL|Traceback|rror|passed" $L/checks.log | head -8 | cut -c1-200
TAILN=6 t 90 trace python3 tools/gpu/trace_decode_attn.py --long --heads qwen3-30b-a3b --keys 512 --trace-only
M30=$G/qwen3-30b-a3b
bn m30_new "X=1" $M30 1; bn m30_l2 "$L2" $M30 1; bn m30_old "$OLD" $M30 1
bn m30_old2 "$OLD" $M30 1; bn m30_l2b "$L2" $M30 1; bn m30_new2 "X=1" $M30 1
for m in "m35 $G/qwen3_5-35b-a3b" "d8 $G/qwen3-8b" "d06 $G/qwen3-0.6b"; do
  set -- $m
  bn ${1}_new "X=1" $2 1; bn ${1}_l2 "$L2" $2 1; bn ${1}_old "$OLD" $2 1
done
GM="ATLAS_BATCHED_GEMV_MIN_M=2"
bn d8b4 "X=1" $G/qwen3-8b 4; bn d8b4_g "$GM" $G/qwen3-8b 4; bn d8b2 "X=1" $G/qwen3-8b 2; bn d8b2_g "$GM" $G/qwen3-8b 2
bn d06b4 "X=1" $G/qwen3-0.6b 4; bn d06b4_g "$GM" $G/qwen3-0.6b 4
bn m30b4 "X=1" $M30 4; bn m30b4_g "$GM" $M30 4
echo "== GPU ms a step (graph replay), PDL on, batch 1 x 512: new / L2 prefetch / old attention_long PTX"
echo "m30 new $(step m30_new) / $(step m30_new2)  l2 $(step m30_l2) / $(step m30_l2b)  old $(step m30_old) / $(step m30_old2)"
for n in m35 d8 d06; do echo "$n new $(step ${n}_new)  l2 $(step ${n}_l2)  old $(step ${n}_old)"; done
echo "== batched GEMV from 2 rows: default (8) / MIN_M=2"
for n in d8b4 d8b2 d06b4 m30b4; do echo "$n $(step $n) / $(step ${n}_g)"; done
echo "ALL DONE"
