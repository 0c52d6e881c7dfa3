#!/usr/bin/env bash
# session-12 call 4 (lead, final tree): checks, speculation b1, throughput 1-8 and 64 with default flags, gate records
cd "$(dirname "$0")"; source ./head.sh
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
TAILN=1 t 40 warm python3 tools/gpu/warm_jit.py
TAILN=3 t 110 checks python3 tools/gpu/check_kernels.py -k decode_rope -k "decode D" -k moe_down -k moe_gate -k moe_topk -k long_rope -k "verify cluster" --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback" $L/checks.log | head -8 | cut -c1-200
TAILN=0 t 120 spec python3 tools/gpu/bench_spec.py --model $G/qwen3-8b --synthetic-seed 0 --batches 1 --max-k 4 --k 3 --accept 0.7 --new 512 --prompts 4 --steps 20 --out $R/spec_b1.json
grep -E "^ +1 |^plain tok/s" $L/spec.log | cut -c1-170
for i in $(seq 90); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
(python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/server.log 2>&1 &) ; for i in $(seq 240); do grep -q "Listening on" $L/server.log && break; sleep 0.5; done
s=$(date +%s); timeout 110 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=1,2,4,8 --param weights=1,1,2,2 --param requests_per_level=6 --format json --no-fail-on-verdict > $R/tp_low.json 2> $L/tp_low.err; echo "tp_low rc=$? $(( $(date +%s)-s ))s"; pack
s=$(date +%s); timeout 60 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=64 --param weights=8 --format json --no-fail-on-verdict > $R/tp_64.json 2> $L/tp_64.err; echo "tp_64 rc=$? $(( $(date +%s)-s ))s"; pack
python3 - $R/tp_low.json $R/tp_64.json <<'PY' 2>&1 | tail -8
import json, sys
m = {}
for f in sys.argv[1:]:
    try: m.update(json.load(open(f))["metrics"])
    except Exception as e: print("bad", f, e)
for c in [1, 2, 4, 8, 64]:
    k = f"c{c}."
    if k + "aggregate_total_tok_s" in m:
        print(f"c{c:<3} total {m[k+'aggregate_total_tok_s']:9.1f} out {m[k+'aggregate_output_tok_s']:8.1f} ttft p50/p99 {m[k+'ttft_p50_ms']:7.1f}/{m[k+'ttft_p99_ms']:7.1f} itl p50/p99 {m[k+'itl_p50_ms']:5.2f}/{m[k+'itl_p99_ms']:6.2f}")
PY
[ -d .git ] || cp -r .device/git .git
for g in decode-floor concurrency-sweep ttft-cold ttft-warm; do TAILN=2 t 80 gate_$g python3 -m atlas_cli.main gate record $g --url http://127.0.0.1:8897 --model qwen3-8b --checkpoint Qwen/Qwen3-8B; done
mkdir -p $R/benchmarks && cp -r .benchmarks/. $R/benchmarks/; pack
pkill -f "atlas_cli.main serve"
