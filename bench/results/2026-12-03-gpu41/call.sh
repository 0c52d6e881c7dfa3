#!/usr/bin/env bash
# session-14 call D (lead): speculation A/B (verification entry / batch-1 routing), clean throughput levels (fresh
# server, a seed of their own each run so that no level's prompts are in the prefix cache from an earlier run)
cd "$(dirname "$0")"; source ./head.sh
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
spec() { local name=$1 envs=$2; TAILN=0 t 60 $name env $envs python3 tools/gpu/bench_spec.py --model $G/qwen3-8b --synthetic-seed 0 --batches 1 --max-k 4 --k 3 --accept 0.7 --new 512 --prompts 2 --steps 20 --out $R/$name.json; echo "$name"; grep -E "^ +1 |^plain tok/s" $L/$name.log | cut -c1-170; }
spec spec_vl0 "ATLAS_DECODE_ATTN_VERIFY_LONG=0"
spec spec_mb2 "ATLAS_DECODE_ATTN_LONG_MIN_BATCH=2"
for i in $(seq 90); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
(python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/server.log 2>&1 &) ; for i in $(seq 240); do grep -q "Listening on" $L/server.log && break; sleep 0.5; done
tp() { local name=$1 levels=$2 weights=$3 n=$4 seed=$5; local s=$(date +%s); timeout 100 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=$levels --param weights=$weights --param requests_per_level=$n --param seed=$seed --format json --no-fail-on-verdict > $R/tp_$name.json 2> $L/tp_$name.err; echo "tp_$name rc=$? $(( $(date +%s)-s ))s"; pack; }
show() { python3 - "$@" <<'PY' 2>&1 | tail -9
import json, sys
m = {}
for f in sys.argv[1:]:
    try: m.update(json.load(open(f))["metrics"])
    except Exception as e: print("bad", f, e)
for c in [1, 2, 4, 8, 16, 32, 64]:
    k = f"c{c}."
    if k + "aggregate_total_tok_s" in m:
        print(f"c{c:<3} total {m[k+'aggregate_total_tok_s']:9.1f} out {m[k+'aggregate_output_tok_s']:8.1f} ttft p50/p99 {m[k+'ttft_p50_ms']:7.1f}/{m[k+'ttft_p99_ms']:7.1f} itl p50/p99 {m[k+'itl_p50_ms']:5.2f}/{m[k+'itl_p99_ms']:6.2f}")
PY
}
tp d 64 8 64 1101; show $R/tp_d.json
tp c 16,32 4,4 64 1102; show $R/tp_c.json
tp b 4,8 2,2 16 1103; show $R/tp_b.json
pkill -f "atlas_cli.main serve"
echo "ALL DONE"
