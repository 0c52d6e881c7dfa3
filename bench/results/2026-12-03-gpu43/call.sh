#!/usr/bin/env bash
# session-15 call B: the decode GEMM autotuner (helper tune): checks, per-shape model vs tuned picks (cold re-timed),
# batch-64 steps tuned vs model; ATLAS_GEMV_RING_SINGLE=1 A/B at batch 1
cd "$(dirname "$0")"; source ./head.sh
TAILN=3 t 90 checks python3 tools/gpu/check_kernels.py -k "gemm_decode_tma tuned" --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
TAILN=60 t 170 tune_dgemm python3 tools/gpu/tune_decode_gemm.py --plain --out $R/tune_dgemm.json
prof() { local name=$1 envs=$2; shift 2; TAILN=0 t 90 $name env $envs python3 tools/gpu/profile_decode.py --synthetic-seed 0 "$@" --out $R/$name.json; echo "  $name: $(hdr $name | tr '\n' ' ' | cut -c1-230)"; }
prof b64_8b_model "ATLAS_DECODE_GEMM_TUNE=0" --model $G/qwen3-8b --batch 64 --context 1536
prof b64_8b_tuned "ATLAS_TUNE_CACHE=/tmp/t8.json" --model $G/qwen3-8b --batch 64 --context 1536
prof b64_4b_model "ATLAS_DECODE_GEMM_TUNE=0" --model $G/qwen3-4b --batch 64 --context 1536
prof b64_4b_tuned "ATLAS_TUNE_CACHE=/tmp/t4.json" --model $G/qwen3-4b --batch 64 --context 1536
cp /tmp/t8.json $R/tune_table_8b.json; cp /tmp/t4.json $R/tune_table_4b.json; pack
grep -E "gemm_decode|gemv|decode_attn" $L/b64_8b_model.log | head -6; grep -E "gemm_decode|gemv|decode_attn" $L/b64_8b_tuned.log | head -6
prof b1_06_ring "ATLAS_GEMV_RING_SINGLE=1" --model $G/qwen3-0.6b --batch 1 --context 512
prof b1_17_ring "ATLAS_GEMV_RING_SINGLE=1" --model $G/qwen3-1.7b --batch 1 --context 512
prof b1_35_ring "ATLAS_GEMV_RING_SINGLE=1" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
echo "ALL DONE"
