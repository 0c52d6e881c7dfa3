#!/usr/bin/env bash
# session-45 call A: pdl_fence (session 44, unverified on a device) and the quantized prefill
# gate_up on the bf16 GEMM's gated entry behind it (re-applied in 6534b00f). The gemv_fp8
# module's checks (pdl_fence lives there); greedy digests (8 x 300-token prompts, 48 tokens,
# synthetic Qwen3-8B FP8-block / NVFP4) gated on twice and off once: all three must be equal;
# the 2,048-token prefill on / off.
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 150 chk python3 tools/gpu/check_kernels.py -m gemv_fp8 -m gemm_sm90_tma
grep -cE " PASS$" $L/chk.log; grep -E " FAIL" $L/chk.log | head -20 | cut -c1-160
dg() { TAILN=1 t 120 "dg_$1" env $2 python3 tools/gpu/greedy_digest.py --synthetic-seed 0 \
  --model $G/$3 --batch 8 --prompt 300 --tokens 48; }
pf() { TAILN=0 t 120 "$1" env "$2" python3 tools/gpu/profile_prefill.py --synthetic-seed 0 \
  --model "$3" --tokens 2048 --out "$R/$1.json"; }
for q in fp8-block nvfp4; do
  dg ${q}_on ATLAS_GEMM_SWIGLU=1 q-$q/qwen3-8b; dg ${q}_off ATLAS_GEMM_SWIGLU=0 q-$q/qwen3-8b
  dg ${q}_on2 ATLAS_GEMM_SWIGLU=1 q-$q/qwen3-8b
  pf pf_${q}_on ATLAS_GEMM_SWIGLU=1 $G/q-$q/qwen3-8b; pf pf_${q}_off ATLAS_GEMM_SWIGLU=0 $G/q-$q/qwen3-8b
done
echo "== digests (on, off, on again: all equal)"
for n in fp8-block_on fp8-block_off fp8-block_on2 nvfp4_on nvfp4_off nvfp4_on2; do
  printf "%-14s %s\n" $n "$(grep -o 'digest [0-9a-f]*' $L/dg_$n.log)"; done
echo "== Qwen3-8B quantized, 2,048-token prefill"
for n in pf_fp8-block_on pf_fp8-block_off pf_nvfp4_on pf_nvfp4_off; do
  printf "%-17s %s\n" $n "$(grep -E 'wall per step' $L/$n.log | cut -c1-100)"; done
echo "ALL DONE"
