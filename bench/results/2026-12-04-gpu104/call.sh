#!/usr/bin/env bash
# session-27 call D: the contest-shaped throughput level c64 (1,024-token random prompts, 1,024 new tokens, 64
# requests, `atlas benchmark run throughput`) against the default Qwen3-8B server (a generated bf16 checkpoint, no
# flags) with the norms' early trigger for batched steps (the default since 7f4c9fdc) and with
# ATLAS_NORM_EARLY_TRIGGER=0, then the default once more. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1
tail -1 $L/ckpt8b.log; cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
serve() {
  (env $1 python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/server_$2.log 2>&1 &)
  for i in $(seq 240); do grep -q "Listening on" $L/server_$2.log && break; sleep 0.5; done
}
tp() { local name=$1 seed=$2; local s=$(date +%s); timeout 100 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=64 --param weights=8 --param requests_per_level=64 --param seed=$seed --format json --no-fail-on-verdict > $R/tp_$name.json 2> $L/tp_$name.err; echo "tp_$name rc=$? $(( $(date +%s)-s ))s"; pack; }
show() { python3 - "$1" <<'PY' 2>&1 | tail -2
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
k = "c64."
print(f"c64 total {m[k+'aggregate_total_tok_s']:9.1f} out {m[k+'aggregate_output_tok_s']:8.1f} ttft p50/p99 {m[k+'ttft_p50_ms']:7.1f}/{m[k+'ttft_p99_ms']:7.1f} itl p50/p99 {m[k+'itl_p50_ms']:5.2f}/{m[k+'itl_p99_ms']:6.2f}")
PY
}
serve "X=1" a; grep -E "Listening|KV|kv" $L/server_a.log | head -2 | cut -c1-200
tp a 2001; pkill -f "atlas_cli.main serve"; sleep 3
serve "ATLAS_NORM_EARLY_TRIGGER=0" off; tp off 2001; pkill -f "atlas_cli.main serve"; sleep 3
serve "X=1" b; tp b 2001; pkill -f "atlas_cli.main serve"
echo "== c64, Qwen3-8B bf16 default server: early rule / ATLAS_NORM_EARLY_TRIGGER=0 / early rule"
show $R/tp_a.json; show $R/tp_off.json; show $R/tp_b.json
echo "ALL DONE"
