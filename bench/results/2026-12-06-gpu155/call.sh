#!/usr/bin/env bash
# session-44 call H: a quantized prefill gate_up through its dequantized scratch and the bf16
# GEMM's gated entry (ATLAS_GEMM_SWIGLU): greedy digests (8 x 300-token prompts) on / off must
# be equal on Qwen3-8B FP8-block and NVFP4 (synthetic), and their 2,048-token prefill on / off.
# Prepare as gpu148 (kernels unchanged since 65ef42ea). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
dg() { TAILN=1 t 120 "dg_$1" env $2 python3 tools/gpu/greedy_digest.py --synthetic-seed 0 \
  --model $G/$3 --batch 8 --prompt 300 --tokens 48; }
pf() { TAILN=0 t 120 "$1" env "$2" python3 tools/gpu/profile_prefill.py --synthetic-seed 0 \
  --model "$3" --tokens 2048 --out "$R/$1.json"; }
for q in fp8-block nvfp4; do
  dg ${q}_on ATLAS_GEMM_SWIGLU=1 q-$q/qwen3-8b; dg ${q}_off ATLAS_GEMM_SWIGLU=0 q-$q/qwen3-8b
  pf pf_${q}_on ATLAS_GEMM_SWIGLU=1 $G/q-$q/qwen3-8b; pf pf_${q}_off ATLAS_GEMM_SWIGLU=0 $G/q-$q/qwen3-8b
done
echo "== digests"
for n in fp8-block_on fp8-block_off nvfp4_on nvfp4_off; do printf "%-14s %s\n" $n "$(grep -o 'digest [0-9a-f]*' $L/dg_$n.log)"; done
echo "== Qwen3-8B quantized, 2,048-token prefill"
for n in pf_fp8-block_on pf_fp8-block_off pf_nvfp4_on pf_nvfp4_off; do printf "%-17s %s\n" $n "$(grep -E 'wall per step' $L/$n.log | cut -c1-100)"; done
echo "ALL DONE"
