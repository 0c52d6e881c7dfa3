#!/usr/bin/env bash
# session-18 call B (lead): the long attention's split merge in one L2 trip (B: this tree's kernels) against the
# two-trip merge (A: .device/kernels_a.tar.xz, the ff1b93ea set) by ATLAS_KERNELS_DIR, with the changed kernels'
# checks; and profile_decode's new critical-path table (each kernel's end past the latest end, by predecessor) for the
# 30B and 35B batch-1 steps. The carveout follows this tree's model rule. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
mkdir -p .device/kernels_a && tar xJf .device/kernels_a.tar.xz -C .device/kernels_a
KA="ATLAS_KERNELS_DIR=$PWD/.device/kernels_a"
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -k long --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b1() { prof "$1" "$2" --model "$3" --batch ${4:-1} --context 512; }
b1 a30 "$KA" $G/qwen3-30b-a3b
b1 b30 "X=1" $G/qwen3-30b-a3b
b1 b30_2 "X=1" $G/qwen3-30b-a3b
b1 a30_2 "$KA" $G/qwen3-30b-a3b
b1 b8 "X=1" $G/qwen3-8b
b1 a8 "$KA" $G/qwen3-8b
b1 a35 "$KA" $G/qwen3_5-35b-a3b
b1 b35 "X=1" $G/qwen3_5-35b-a3b
for f in b30 b35; do echo "-- $f"; grep -A22 "^critical path" $L/$f.log | cut -c1-110; done
echo "ALL DONE"
