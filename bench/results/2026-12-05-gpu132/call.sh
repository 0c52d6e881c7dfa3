#!/usr/bin/env bash
# session-39 call B: batch 1 through the server, timed by the official `openai` SDK
# (tools/gpu/stream_rate.py: one stream at a time, 1,024 tokens with ignore_eos, decode rate
# between the first and last chunk), on the default servers (no flags) of generated Qwen3-0.6B
# and Qwen3-8B bf16 checkpoints; then the contest-shaped c64 level on the 8B (issue 15).
# Expected: the 0.6B near the engine profile's 0.656 ms async wall (1,524 tok/s on the H200)
# less the server's per-token cost. Repo root, carry [".device", ".whl"] (openai + deps there).
source tools/gpu/call_head.sh
serve() {  # serve MODEL NAME: the default server, no flags
  (python3 -m atlas_cli.main serve $C/$1 --backend cuda --port 8897 > $L/server_$2.log 2>&1 &)
  for i in $(seq 360); do grep -q "Listening on" $L/server_$2.log && break; sleep 0.5; done
  grep -E "KV pool|Listening" $L/server_$2.log | cut -c1-160
}
for m in qwen3-0.6b qwen3-8b; do
  python3 tools/make_fixtures.py --config $m --device cuda --out $C/$m --no-golden > $L/ckpt_$m.log 2>&1
  tail -1 $L/ckpt_$m.log | cut -c1-160; cp .device/qwen3-tok/tokenizer*.json $C/$m/
  serve $m $m
  t 120 sr_$m python3 tools/gpu/stream_rate.py --url http://127.0.0.1:8897/v1 --model $m \
    --tokens 1024 --requests 5 --out $R/sr_$m.json
  if [ $m = qwen3-8b ]; then
    s=$(date +%s); timeout 110 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 \
      --model qwen3-8b --param concurrencies=64 --param weights=8 --param requests_per_level=64 \
      --param seed=2001 --format json --no-fail-on-verdict > $R/tp_c64.json 2> $L/tp_c64.err
    echo "tp_c64 rc=$? $(( $(date +%s)-s ))s"; pack
  fi
  pkill -f "atlas_cli.main serve"; sleep 3
done
echo "== batch 1 through the server (openai SDK stream, 1,024 tokens, 5 requests)"
for m in qwen3-0.6b qwen3-8b; do echo "$m: $(grep median $L/sr_$m.log)"; done
python3 - $R/tp_c64.json <<'PY' 2>&1 | tail -2
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]; k = "c64."
print(f"c64 total {m[k+'aggregate_total_tok_s']:9.1f} out {m[k+'aggregate_output_tok_s']:8.1f} ttft p50/p99 {m[k+'ttft_p50_ms']:7.1f}/{m[k+'ttft_p99_ms']:7.1f} itl p50/p99 {m[k+'itl_p50_ms']:5.2f}/{m[k+'itl_p99_ms']:6.2f}")
PY
echo "ALL DONE"
