#!/usr/bin/env bash
# session-44 call D: the prefill TMA GEMM's gated entries (ATLAS_GEMM_SWIGLU): device checks
# (every gemm_sm90_tma case, the decode GEMMs' gated ones: glu.cuh moved under them), then
# 2,048-token prefill steps (tools/gpu/profile_prefill.py, eager, PDL on) with / without, both
# orders on Qwen3-8B, once each on Qwen3-4B and Llama-3.1-8B.
# Prepare as gpu148. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 200 chk python3 tools/gpu/check_kernels.py -m gemm_sm90_tma -m gemm_decode_tma \
  -m gemm_decode_sm90 -k gemm_sm90_tma -k swiglu -k geglu
grep -cE " PASS$" $L/chk.log; grep -E " FAIL" $L/chk.log | head -20 | cut -c1-160
pf() { TAILN=0 t 120 "$1" env "$2" python3 tools/gpu/profile_prefill.py --synthetic-seed 0 \
  --model "$3" --tokens 2048 --out "$R/$1.json"; }
pf pf_q8_on ATLAS_GEMM_SWIGLU=1 $G/qwen3-8b; pf pf_q8_off ATLAS_GEMM_SWIGLU=0 $G/qwen3-8b
pf pf_q8_off2 ATLAS_GEMM_SWIGLU=0 $G/qwen3-8b; pf pf_q8_on2 ATLAS_GEMM_SWIGLU=1 $G/qwen3-8b
pf pf_q4_on ATLAS_GEMM_SWIGLU=1 $G/qwen3-4b; pf pf_q4_off ATLAS_GEMM_SWIGLU=0 $G/qwen3-4b
pf pf_l8_off ATLAS_GEMM_SWIGLU=0 $G/llama-3.1-8b; pf pf_l8_on ATLAS_GEMM_SWIGLU=1 $G/llama-3.1-8b
echo "== 2,048-token prefill steps"
for n in pf_q8_on pf_q8_off pf_q8_off2 pf_q8_on2 pf_q4_on pf_q4_off pf_l8_off pf_l8_on; do
  printf "%-11s %s\n" $n "$(grep -iE 'tok/s|wall' $L/$n.log | head -2 | tr '\n' ' ' | cut -c1-170)"; done
for n in pf_q8_on pf_q8_off; do echo "-- $n"; grep -E "gemm_sm90_tma|silu_mul" $L/$n.log | head -4 | cut -c1-110; done
echo "ALL DONE"
