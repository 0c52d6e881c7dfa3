#!/usr/bin/env bash
# session-16 call D (lead, final tree): end-to-end numerics of the defaults (tiny fixtures on CUDA against transformers'
# goldens), the GPU-marked tests, and the gemv / MoE / attention check families. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=8 t 120 parity python3 tools/gpu/model_parity.py --backend cuda --model tests/fixtures/tiny-llama --model tests/fixtures/tiny-qwen3 --model tests/fixtures/tiny-llama3-rope --model tests/fixtures/tiny-qwen3_5 --model tests/fixtures/tiny-qwen3_5_moe --model tests/fixtures/tiny-qwen3_next --out $R/parity_tiny.json
TAILN=3 t 90 pytest_gpu python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu
TAILN=3 t 130 checks python3 tools/gpu/check_kernels.py -k "gemv " -k moe_down -k moe_gate -k decode_attn_long --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
echo "ALL DONE"
