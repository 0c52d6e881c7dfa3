#!/usr/bin/env bash
# Session 56, after gpu195 / gpu196 (H100): the FP8 tensor-core decode GEMM loses on the
# projections, whose grids are one wave of short blocks placed unevenly (qkv: 96 tiles x split
# 2 = 192 blocks on 132 SMs, so 60 SMs stream two blocks' k-tiles and 72 one: 32 k-tiles on
# the busiest SM against 23.3 on average). Splits that even the k-tiles out (qkv / o_proj /
# down at 4 or 8: 24 on the busiest) should take most of the loss back if placement is the
# cause. Here its Qwen3-8B b1 rows at every split that fits (ATLAS_DECODE_GEMM_SPLIT; a split
# that does not fit the x tiles falls back to the rule), against the GEMV rows.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
SEL=(-k "qwen3-8b qkv b1 fp8-block" -k "qwen3-8b o_proj b1 fp8-block"
     -k "qwen3-8b down b1 fp8-block" -k "qwen3-8b gate_up+swiglu b1 fp8-block")
for s in 2 3 4 6 8; do echo "== split $s"; KLIM=60 kt s$s ATLAS_DECODE_GEMM_SPLIT=$s "${SEL[@]}" | grep " wg " | sort -u; done
echo "ALL DONE"
