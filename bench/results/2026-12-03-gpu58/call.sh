#!/usr/bin/env bash
# session-19 call B (lead): ATLAS_MOE_ROUTER_NORM=1 (the decode router does the residual add + RMSNorm before each MoE
# block: one launch fewer a layer) on Qwen3-30B-A3B and Qwen3.5-35B-A3B batch 1, both orders; the gated D-256 attention
# with the entry trigger (gpu57 measured its late twin); ATLAS_DECODE_GEMM_PERSISTENT=1 (the TMA decode GEMM looping
# over tiles on resident clusters) on Qwen3-8B batch 64 x 1,536, both orders; the new kernels' checks.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 240 checks python3 tools/gpu/check_kernels.py -k moe_add_rmsnorm -k moe_gate_topk -k persistent -k gemm_decode_tma --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b1() { prof "$1" "$2" --model "$3" --batch ${4:-1} --context ${5:-512}; }
RN=ATLAS_MOE_ROUTER_NORM=1; PG=ATLAS_DECODE_GEMM_PERSISTENT=1
b1 d30 "X=1" $G/qwen3-30b-a3b
b1 r30 "$RN" $G/qwen3-30b-a3b
b1 r30_2 "$RN" $G/qwen3-30b-a3b
b1 d30_2 "X=1" $G/qwen3-30b-a3b
b1 r35 "$RN" $G/qwen3_5-35b-a3b
b1 d35 "X=1" $G/qwen3_5-35b-a3b
b1 ge35 "ATLAS_DECODE_ATTN_LONG_GATE=1 ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=0" $G/qwen3_5-35b-a3b
b1 rn35 "$RN" $G/q-nvfp4/qwen3_5-35b-a3b
b1 dn35 "X=1" $G/q-nvfp4/qwen3_5-35b-a3b
PLIM=150 b1 d8b64 "X=1" $G/qwen3-8b 64 1536
PLIM=150 b1 p8b64 "$PG" $G/qwen3-8b 64 1536
PLIM=150 b1 p8b64_2 "$PG" $G/qwen3-8b 64 1536
PLIM=150 b1 d8b64_2 "X=1" $G/qwen3-8b 64 1536
for f in d30 r30; do echo "-- $f"; grep -A12 "^critical path" $L/$f.log | cut -c1-110; done
for f in d8b64 p8b64; do echo "-- $f"; grep -E "^gemm_decode" $L/$f.log | head -8 | cut -c1-110; done
echo "ALL DONE"
