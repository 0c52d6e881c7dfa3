#!/usr/bin/env bash
# session-17 call B (lead): A/B of this tree's kernels (B: the MoE down GEMV's later tiles requested into L2 before its
# PDL wait; the rope-fused long decode attention's prologue before its wait at <= 4 sequences) against the session-16
# kernels (A: .device/kernels_a.tar.xz, built from 68e9e1b), by ATLAS_KERNELS_DIR; the checks of the changed kernels;
# second samples of ATLAS_MOE_QUANT_DOWN_EARLY in the other order. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
mkdir -p .device/kernels_a && tar xJf .device/kernels_a.tar.xz -C .device/kernels_a
KA="ATLAS_KERNELS_DIR=$PWD/.device/kernels_a"
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -k moe_down -k decode_attn_long --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b1() { prof "$1" "$2" --model "$3" --batch ${4:-1} --context 512; }
b1 a30 "$KA" $G/qwen3-30b-a3b
b1 b30 "X=1" $G/qwen3-30b-a3b
b1 b30t4 "ATLAS_MOE_DOWN_GEMV_TILES=4" $G/qwen3-30b-a3b
b1 b30_2 "X=1" $G/qwen3-30b-a3b
b1 a30_2 "$KA" $G/qwen3-30b-a3b
b1 a35 "$KA" $G/qwen3_5-35b-a3b
b1 b35 "X=1" $G/qwen3_5-35b-a3b
b1 b35t4 "ATLAS_MOE_DOWN_GEMV_TILES=4" $G/qwen3_5-35b-a3b
b1 a8 "$KA" $G/qwen3-8b
b1 b8 "X=1" $G/qwen3-8b
b1 b8x4 "X=1" $G/qwen3-8b 4
b1 a8x4 "$KA" $G/qwen3-8b 4
b1 n35e1 "ATLAS_MOE_QUANT_DOWN_EARLY=1" $G/q-nvfp4/qwen3_5-35b-a3b
b1 n35e0 "X=1" $G/q-nvfp4/qwen3_5-35b-a3b
b1 f35e0 "X=1" $G/q-fp8-block/qwen3_5-35b-a3b
b1 f35e1 "ATLAS_MOE_QUANT_DOWN_EARLY=1" $G/q-fp8-block/qwen3_5-35b-a3b
TAILN=0 t 120 km_b30 python3 tools/gpu/kernel_marginal.py --synthetic-seed 0 --batch 1 --context 512 --rounds 5 --out $R/km_b30.json --model $G/qwen3-30b-a3b --family decode_attn --family moe_down --family moe_gate_up
grep -E "^==|^[a-z_0-9]+ +(double|skip)" $L/km_b30.log | cut -c1-100
for f in a30 b30 b30t4 a35 b35 b35t4 a8 b8; do echo "-- $f"; grep -E "^(moe_down|decode_attn)" $L/$f.log | head -3 | cut -c1-100; done
echo "ALL DONE"
