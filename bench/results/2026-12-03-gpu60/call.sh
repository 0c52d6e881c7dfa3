#!/usr/bin/env bash
# session-19 call D (lead): the final tree's kernels and defaults (the persistent TMA decode GEMM, the router doing the
# add + norm before MoE blocks; the gated attention and GDN late entries removed): the changed modules' checks, the GPU
# tests, and the batch-1 / batch-64 steps for the issues' notes. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 240 checks python3 tools/gpu/check_kernels.py -k long -k moe_add_rmsnorm -k moe_gate_topk -k gemm_decode_tma -k gdn_decode --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
TAILN=3 t 100 pytest_gpu python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu
b1() { prof "$1" "$2" --model "$3" --batch ${4:-1} --context ${5:-512}; }
b1 q30 "X=1" $G/qwen3-30b-a3b
b1 q35 "X=1" $G/qwen3_5-35b-a3b
b1 q35n "X=1" $G/q-nvfp4/qwen3_5-35b-a3b
b1 q8 "X=1" $G/qwen3-8b
b1 q06 "X=1" $G/qwen3-0.6b
PLIM=150 b1 q8b64 "X=1" $G/qwen3-8b 64 1536
for f in q30 q35; do echo "-- $f"; grep -A10 "^critical path" $L/$f.log | cut -c1-110; done
echo "ALL DONE"
