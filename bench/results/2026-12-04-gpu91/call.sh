#!/usr/bin/env bash
# session-25 call B: gpu90 measured the cp.async split merge (e60fffb9) slower (Qwen3.5-35B-A3B attention 14.19 ->
# 18.24 us a layer, Qwen3-30B-A3B's early entry 13.35 -> 16.92), the down prefetch slower still (reverted).
# (1) device checks of attention_long (the merge by bulk copies); (2) the phase trace of the 30B's batch-1 attention
# (early entry, 512 keys) on the old PTX (8b49f78b), the cp.async merge (kernels_A) and this tree's bulk merge:
# block_merged -> merged -> end is the merge; (3) batch 1 x 512, old (8b49f78b, kernels_old + its tree) vs new,
# Qwen3.5-35B-A3B also with the D-256 entry on the old 32-key split rule (kernels_t32: ATLAS_LONG_MERGE_TILES=0),
# old / new / t32 / t32 / new / old; Qwen3-30B-A3B old / new / new / old; Qwen3-8B, Qwen3-0.6B old / new.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -m attention_long --out $R/checks.json
grep -E "FAIL|Traceback|rror|passed" $L/checks.log | head -8 | cut -c1-200
tr30() {
  TAILN=0 t 90 "$1" env ATLAS_KERNELS_DIR=$2 python3 tools/gpu/trace_decode_attn.py --long --heads qwen3-30b-a3b \
    --keys 512 --trace-only
  grep -E "^shape|qwen3-30b" $L/$1.log | cut -c1-220
}
tr30 trace_old $PWD/.device/kernels_old
tr30 trace_A $PWD/.device/kernels_A
tr30 trace_new $PWD/.device/kernels
mkdir -p /tmp/old && tar xJf .device/old_tree.tar.xz -C /tmp/old
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
oldb1() {
  TAILN=0 t 60 "$1" env PYTHONPATH=/tmp/old/py:/tmp/old/tools:/tmp/old/tools/gpu:/tmp/site \
    ATLAS_KERNELS_DIR=$PWD/.device/kernels_old python3 /tmp/old/tools/gpu/profile_decode.py --synthetic-seed 0 \
    --model $2 --batch 1 --context 512 --out "$R/$1.json"
  echo "  $1: $(hdr "$1" | head -1 | cut -c1-150)"
}
M=$G/qwen3_5-35b-a3b; M30=$G/qwen3-30b-a3b
oldb1 m35_old1 $M
b1 m35_new1 "X=1" $M
b1 m35_t32_1 "ATLAS_KERNELS_DIR=$PWD/.device/kernels_t32" $M
b1 m35_t32_2 "ATLAS_KERNELS_DIR=$PWD/.device/kernels_t32" $M
b1 m35_new2 "X=1" $M
oldb1 m35_old2 $M
oldb1 m30_old1 $M30
b1 m30_new1 "X=1" $M30
b1 m30_new2 "X=1" $M30
oldb1 m30_old2 $M30
oldb1 d8_old $G/qwen3-8b
b1 d8_new "X=1" $G/qwen3-8b
oldb1 d06_old $G/qwen3-0.6b
b1 d06_new "X=1" $G/qwen3-0.6b
echo "== batch 1 x 512, GPU ms a step (graph replay), PDL on"
echo "Qwen3.5-35B-A3B  old $(step m35_old1) / $(step m35_old2)   new $(step m35_new1) / $(step m35_new2)   t32 $(step m35_t32_1) / $(step m35_t32_2)"
echo "Qwen3-30B-A3B    old $(step m30_old1) / $(step m30_old2)   new $(step m30_new1) / $(step m30_new2)"
echo "Qwen3-8B         old $(step d8_old)   new $(step d8_new)"
echo "Qwen3-0.6B       old $(step d06_old)   new $(step d06_new)"
echo "ALL DONE"
