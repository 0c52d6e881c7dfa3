#!/usr/bin/env bash
# session-17 call A (lead): marginal cost of each kernel family in the served (PDL-on) batch-1 steps of Qwen3-30B-A3B
# and Qwen3.5-35B-A3B (tools/gpu/kernel_marginal.py: each family's launches doubled / left out), and the unmeasured
# ATLAS_MOE_QUANT_DOWN_EARLY switch on Qwen3.5-35B-A3B NVFP4 and FP8 batch 1. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
km() { local name=$1; shift; TAILN=0 t 150 km_$name python3 tools/gpu/kernel_marginal.py --synthetic-seed 0 --batch 1 --context 512 --rounds 5 --out $R/km_$name.json "$@"; grep -E "^==|^[a-z_0-9]+ +(double|skip)" $L/km_$name.log | cut -c1-100; }
km 30 --model $G/qwen3-30b-a3b --family moe_gate_topk --family moe_gate_up --family moe_down --family decode_attn --family gemv_bf16_single --family add_rmsnorm
km 35 --model $G/qwen3_5-35b-a3b --family moe_gate_topk --family moe_gate_up --family moe_down --family decode_attn --family gemv_bf16_single --family gated_deltanet --family add_rmsnorm
prof b1_35n_e0 "X=1" --model $G/q-nvfp4/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_35n_e1 "ATLAS_MOE_QUANT_DOWN_EARLY=1" --model $G/q-nvfp4/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_35f_e1 "ATLAS_MOE_QUANT_DOWN_EARLY=1" --model $G/q-fp8-block/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_35f_e0 "X=1" --model $G/q-fp8-block/qwen3_5-35b-a3b --batch 1 --context 512
TAILN=3 t 90 checks python3 tools/gpu/check_kernels.py -k "down early" --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
for f in b1_35n_e0 b1_35n_e1 b1_35f_e0 b1_35f_e1; do echo "-- $f"; grep -E "^moe_" $L/$f.log | head -4 | cut -c1-100; done
echo "ALL DONE"
