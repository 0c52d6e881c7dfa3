#!/usr/bin/env bash
# session-12 call 1 (lead): per-kernel profiles at batch 1 (35B hybrid, 30B MoE, 8B, 0.6B, FP8 8B), batch 4, spec steadiness
cd "$(dirname "$0")"; source ./head.sh
TAILN=2 t 60 warm python3 tools/gpu/warm_jit.py
prof() { local name=$1 pdl=$2; shift 2; TAILN=${TN:-30} t 120 $name env ATLAS_PDL=$pdl python3 tools/gpu/profile_decode.py --synthetic-seed 0 "$@" --out $R/$name.json; }
TN=40 prof p35_b1_pdl0 0 --model $G/qwen3_5-35b-a3b --batch 1 --context 512
TN=3 prof p35_b1_pdl1 1 --model $G/qwen3_5-35b-a3b --batch 1 --context 512
TN=30 prof p30_b1_pdl0 0 --model $G/qwen3-30b-a3b --batch 1 --context 512
TN=25 prof p8_b1_pdl0 0 --model $G/qwen3-8b --batch 1 --context 512
TN=25 prof p06_b1_pdl0 0 --model $G/qwen3-0.6b --batch 1 --context 512
TN=3 prof p06_b1_pdl1 1 --model $G/qwen3-0.6b --batch 1 --context 512
TN=25 prof pfp8_b1_pdl0 0 --model $G/q-fp8-block/qwen3-8b --batch 1 --context 512
TN=3 prof pfp8_b1_pdl1 1 --model $G/q-fp8-block/qwen3-8b --batch 1 --context 512
TN=25 prof p8_b4_pdl0 0 --model $G/qwen3-8b --batch 4 --context 1536
TN=12 t 200 spec python3 tools/gpu/bench_spec.py --model $G/qwen3-8b --synthetic-seed 0 --batches 1 --max-k 3 --k 3 --accept 0.7 --new 1536 --steps 20 --no-fused-baseline --out $R/spec_b1_1536.json
