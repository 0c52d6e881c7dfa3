#!/usr/bin/env bash
# session-25 call D (existing switches, no code change): where the Qwen3.5-35B-A3B batch-1 D-256 attention's 14 us a
# layer (19.7 in the NVFP4 step) goes: the long kernel with its in-kernel split merge (default) against the combine
# launch after it (ATLAS_DECODE_ATTN_LONG_MERGE=0) and against the CUDA-core clustered decode kernels
# (ATLAS_DECODE_ATTN_LONG=0: DSMEM merge), bf16 default / long=0 / merge=0 / merge=0 / long=0 / default; NVFP4
# default / long=0. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
M=$G/qwen3_5-35b-a3b; N=$G/q-nvfp4/qwen3_5-35b-a3b
b1 def1 "X=1" $M
b1 short1 "ATLAS_DECODE_ATTN_LONG=0" $M
b1 comb1 "ATLAS_DECODE_ATTN_LONG_MERGE=0" $M
b1 comb2 "ATLAS_DECODE_ATTN_LONG_MERGE=0" $M
b1 short2 "ATLAS_DECODE_ATTN_LONG=0" $M
b1 def2 "X=1" $M
b1 n_def "X=1" $N
b1 n_short "ATLAS_DECODE_ATTN_LONG=0" $N
for f in def1 short1 comb1 n_def n_short; do
  echo "-- $f"; grep -A30 "^critical path" $L/$f.log | grep -E "attn|combine|sigmoid|qk_norm" | cut -c1-120
done
echo "== Qwen3.5-35B-A3B batch 1 x 512, GPU ms a step: default $(step def1) / $(step def2)   LONG=0 $(step short1) / $(step short2)   LONG_MERGE=0 $(step comb1) / $(step comb2)   NVFP4 default $(step n_def)   NVFP4 LONG=0 $(step n_short)"
echo "ALL DONE"
