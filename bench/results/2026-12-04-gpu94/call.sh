#!/usr/bin/env bash
# session-25 call E: the long attention's merge rule (batch 1 merges in-kernel only where the group's merge is one
# item a thread; else the combine launch): Qwen3-30B-A3B (group 8, D 128: now the combine; its early-late rope
# entry) default / ATLAS_DECODE_ATTN_LONG_MERGE=1 / =1 / default; Qwen3.5-35B-A3B bf16 and NVFP4 default / =1.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
M30=$G/qwen3-30b-a3b; M=$G/qwen3_5-35b-a3b; N=$G/q-nvfp4/qwen3_5-35b-a3b
b1 m30_def1 "X=1" $M30
b1 m30_merge1 "ATLAS_DECODE_ATTN_LONG_MERGE=1" $M30
b1 m30_merge2 "ATLAS_DECODE_ATTN_LONG_MERGE=1" $M30
b1 m30_def2 "X=1" $M30
b1 m35_def "X=1" $M
b1 m35_merge "ATLAS_DECODE_ATTN_LONG_MERGE=1" $M
b1 n35_def "X=1" $N
b1 n35_merge "ATLAS_DECODE_ATTN_LONG_MERGE=1" $N
for f in m30_def1 m30_merge1; do
  echo "-- $f"; grep -A30 "^critical path" $L/$f.log | grep -E "attn|combine|gemv_bf16_single   " | cut -c1-120
done
echo "== batch 1 x 512, GPU ms a step"
echo "Qwen3-30B-A3B   default (combine) $(step m30_def1) / $(step m30_def2)   MERGE=1 $(step m30_merge1) / $(step m30_merge2)"
echo "Qwen3.5-35B-A3B default (combine) $(step m35_def)   MERGE=1 $(step m35_merge)   NVFP4 $(step n35_def) vs MERGE=1 $(step n35_merge)"
echo "ALL DONE"
