#!/usr/bin/env bash
# session-18 call A (lead): the ATLAS_MAX_SHARED_CARVEOUT decision (same-call A/B, both orders, every model kind), and
# where the 30B's batch-1 attention cost comes from (its marginal cost at 64 / 512 / 2,048 keys: fixed vs per key).
# Kernels: the ff1b93ea set (= this tree's). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
b() { prof "$1" "$2" --model "$3" --batch "${4:-1}" --context 512; }
C=ATLAS_MAX_SHARED_CARVEOUT=1
b c30_0 "X=1" $G/qwen3-30b-a3b; b c30_1 "$C" $G/qwen3-30b-a3b
b c35_1 "$C" $G/qwen3_5-35b-a3b; b c35_0 "X=1" $G/qwen3_5-35b-a3b
b c35_0b "X=1" $G/qwen3_5-35b-a3b; b c35_1b "$C" $G/qwen3_5-35b-a3b
b c30_1b "$C" $G/qwen3-30b-a3b; b c30_0b "X=1" $G/qwen3-30b-a3b
b c8_0 "X=1" $G/qwen3-8b; b c8_1 "$C" $G/qwen3-8b
b c06_1 "$C" $G/qwen3-0.6b; b c06_0 "X=1" $G/qwen3-0.6b
b n35_0 "X=1" $G/q-nvfp4/qwen3_5-35b-a3b; b n35_1 "$C" $G/q-nvfp4/qwen3_5-35b-a3b
b c8b64_0 "X=1" $G/qwen3-8b 64; b c8b64_1 "$C" $G/qwen3-8b 64
km() { local name=$1; shift; TAILN=0 t 150 km_$name env $C python3 tools/gpu/kernel_marginal.py --synthetic-seed 0 --batch 1 --rounds 5 --modes skip --out $R/km_$name.json "$@"; grep -E "^==|^[a-z_0-9]+ +(double|skip)" $L/km_$name.log | cut -c1-100; }
km a64 --model $G/qwen3-30b-a3b --context 64 --family decode_attn --family gemv_bf16_single
km a512 --model $G/qwen3-30b-a3b --context 512 --family decode_attn --family gemv_bf16_single
km a2048 --model $G/qwen3-30b-a3b --context 2048 --family decode_attn
for f in c30_0 c30_1 c35_0 c35_1; do echo "-- $f"; grep -E "^(decode_attn|gated|gemv|moe_)" $L/$f.log | head -6 | cut -c1-100; done
echo "ALL DONE"
