#!/usr/bin/env bash
# session-44 call G: the prefill GEMM's gated entries end to end: greedy digests (8 prompts of
# 300 tokens prefilled on the TMA twin, 48 tokens each) with ATLAS_GEMM_SWIGLU=1 / 0 must be
# equal (the same bits as gate_up then silu_mul / gelu_tanh_mul): Qwen3-0.6B (SwiGLU), Gemma 3
# 1B (GeGLU); and Gemma 3 4B's 2,048-token prefill step on / off.
# Prepare as gpu148. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
dg() { TAILN=1 t 90 "dg_$1" env $2 python3 tools/gpu/greedy_digest.py --synthetic-seed 0 \
  --model $G/$3 --batch 8 --prompt 300 --tokens 48; }
dg q06_on ATLAS_GEMM_SWIGLU=1 qwen3-0.6b; dg q06_off ATLAS_GEMM_SWIGLU=0 qwen3-0.6b
dg g1_on ATLAS_GEMM_SWIGLU=1 gemma-3-1b; dg g1_off ATLAS_GEMM_SWIGLU=0 gemma-3-1b
pf() { TAILN=0 t 120 "$1" env "$2" python3 tools/gpu/profile_prefill.py --synthetic-seed 0 \
  --model "$3" --tokens 2048 --out "$R/$1.json"; }
pf pf_g4_on ATLAS_GEMM_SWIGLU=1 $G/gemma-3-4b; pf pf_g4_off ATLAS_GEMM_SWIGLU=0 $G/gemma-3-4b
echo "== digests"
for n in q06_on q06_off g1_on g1_off; do printf "%-8s %s\n" $n "$(grep -o 'digest [0-9a-f]*' $L/dg_$n.log)"; done
echo "== Gemma 3 4B 2,048-token prefill"
for n in pf_g4_on pf_g4_off; do printf "%-9s %s\n" $n "$(grep -E 'wall per step' $L/$n.log | cut -c1-100)"; done
grep -E "gemm_sm90_tma_geglu|gelu_tanh_mul" $L/pf_g4_on.log $L/pf_g4_off.log | cut -c1-140 | head -4
echo "ALL DONE"
