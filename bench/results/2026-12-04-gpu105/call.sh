#!/usr/bin/env bash
# session-27 call E: issue 15's long contexts on Qwen3-8B bf16 at this tree (the norms' early trigger for batched
# steps): batch-8 decode at 16,384 and 32,768 keys as fractions of the weights + K/V bytes' copy bandwidth
# (tools/gpu/bench_long_context.py), then one 32,000-token prefill as a fraction of the bf16 matmul peak. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=14 t 400 long python3 tools/gpu/bench_long_context.py --config qwen3-8b --prefill 0 --out $R/long.json
TAILN=8 t 200 pf32k python3 tools/gpu/bench_long_context.py --config qwen3-8b --contexts "" --out $R/pf32k.json
echo "ALL DONE"
