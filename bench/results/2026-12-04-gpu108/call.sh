#!/usr/bin/env bash
# session-28 call C: the split merge in the attention kernel at batches of 2..8 (the default since 6740eace) against the
# combine launch (ATLAS_DECODE_ATTN_LONG_MERGE=0), both orders at batch 8, one at batch 4, Qwen3-8B and Qwen3-0.6B.
# Repo root, carry [".device", ".whl"] (the PTX sets of gpu107: the attention kernels are unchanged since).
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-45} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
C="ATLAS_DECODE_ATTN_LONG_MERGE=0"
for m in "d8 $G/qwen3-8b" "d06 $G/qwen3-0.6b"; do
  set -- $m
  bn ${1}b8_a "X=1" $2 8; bn ${1}b8_ca "$C" $2 8; bn ${1}b8_cb "$C" $2 8; bn ${1}b8_b "X=1" $2 8
  bn ${1}b4 "X=1" $2 4; bn ${1}b4_c "$C" $2 4
done
echo "== GPU ms a step (graph replay), PDL on; merge in the kernel (default) / combine launch"
for n in d8 d06; do echo "$n b8 merge $(step ${n}b8_a) / $(step ${n}b8_b)  combine $(step ${n}b8_ca) / $(step ${n}b8_cb)   b4 merge $(step ${n}b4)  combine $(step ${n}b4_c)"; done
echo "ALL DONE"
