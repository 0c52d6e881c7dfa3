#!/usr/bin/env bash
# session-25 call A: (1) device checks of attention_long (the split merge in one L2 trip through the ring, whole-tile
# splits for every merging launch, new cases: Qwen3.5's batch-1 19-split grid, 40 D-256 splits in three ring chunks)
# and moe_decode (the batch-1 down's later tiles bulk-prefetched into L2 before its wait); (2) batch 1 x 512, three
# trees: old (8b49f78b, its PTX as kernels_old), A (e60fffb9: the merge; its PTX as kernels_A) and AB (this tree: + the
# down prefetch), Qwen3.5-35B-A3B old / A / AB / AB / A / old, Qwen3-30B-A3B old / AB / AB / old, Qwen3-8B and
# Qwen3-0.6B old / AB; (3) Qwen3-30B-A3B ATLAS_MOE_GATE_UP_TILED=1 vs default, both orders (gpu89's lead).
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
TAILN=3 t 240 checks python3 tools/gpu/check_kernels.py -m attention_long -m moe_decode --out $R/checks.json
grep -E "FAIL|Traceback|rror|passed" $L/checks.log | head -8 | cut -c1-200
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
b1 m35_A1 "ATLAS_KERNELS_DIR=$PWD/.device/kernels_A" $M
b1 m35_AB1 "X=1" $M
b1 m35_AB2 "X=1" $M
b1 m35_A2 "ATLAS_KERNELS_DIR=$PWD/.device/kernels_A" $M
oldb1 m35_old2 $M
oldb1 m30_old1 $M30
b1 m30_AB1 "X=1" $M30
b1 m30_tiled1 "ATLAS_MOE_GATE_UP_TILED=1" $M30
b1 m30_tiled2 "ATLAS_MOE_GATE_UP_TILED=1" $M30
b1 m30_AB2 "X=1" $M30
oldb1 m30_old2 $M30
oldb1 d8_old $G/qwen3-8b
b1 d8_AB "X=1" $G/qwen3-8b
oldb1 d06_old $G/qwen3-0.6b
b1 d06_AB "X=1" $G/qwen3-0.6b
echo "== batch 1 x 512, GPU ms a step (graph replay), PDL on"
echo "Qwen3.5-35B-A3B  old $(step m35_old1) / $(step m35_old2)   A $(step m35_A1) / $(step m35_A2)   AB $(step m35_AB1) / $(step m35_AB2)"
echo "Qwen3-30B-A3B    old $(step m30_old1) / $(step m30_old2)   AB $(step m30_AB1) / $(step m30_AB2)   AB+tiled $(step m30_tiled1) / $(step m30_tiled2)"
echo "Qwen3-8B         old $(step d8_old)   AB $(step d8_AB)"
echo "Qwen3-0.6B       old $(step d06_old)   AB $(step d06_AB)"
echo "ALL DONE"
