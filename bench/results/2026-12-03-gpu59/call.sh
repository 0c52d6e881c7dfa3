#!/usr/bin/env bash
# session-19 call C (lead): second samples of ATLAS_MOE_ROUTER_NORM=1 on Qwen3.5-35B-A3B batch 1 (bf16, NVFP4; gpu58 ran
# RN first, this runs the default first), and the contest-shaped throughput at 64 streams against the 8B server with
# default flags (the persistent TMA decode GEMM, default from 6964fe09) and with ATLAS_DECODE_GEMM_PERSISTENT=0.
# Kernels: the 28c6ef38 set. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
b1() { prof "$1" "$2" --model "$3" --batch ${4:-1} --context 512; }
RN=ATLAS_MOE_ROUTER_NORM=1
b1 d35 "X=1" $G/qwen3_5-35b-a3b
b1 r35 "$RN" $G/qwen3_5-35b-a3b
b1 r35_2 "$RN" $G/qwen3_5-35b-a3b
b1 d35_2 "X=1" $G/qwen3_5-35b-a3b
b1 dn35 "X=1" $G/q-nvfp4/qwen3_5-35b-a3b
b1 rn35 "$RN" $G/q-nvfp4/qwen3_5-35b-a3b
for i in $(seq 150); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
tp() { local name=$1 levels=$2 weights=$3 n=$4 seed=$5; local s=$(date +%s); timeout 110 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=$levels --param weights=$weights --param requests_per_level=$n --param seed=$seed --format json --no-fail-on-verdict > $R/tp_$name.json 2> $L/tp_$name.err; echo "tp_$name rc=$? $(( $(date +%s)-s ))s"; pack; }
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
serve() { (env $1 python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/server_$2.log 2>&1 &) ; for i in $(seq 240); do grep -q "Listening on" $L/server_$2.log && break; sleep 0.5; done; grep -E "Listening" $L/server_$2.log | head -1 | cut -c1-120; }
serve "X=1" on; tp on 64 8 64 1901; show $R/tp_on.json; pkill -f "atlas_cli.main serve"; sleep 3
serve "ATLAS_DECODE_GEMM_PERSISTENT=0" off; tp off 64 8 64 1901; show $R/tp_off.json; pkill -f "atlas_cli.main serve"
echo "ALL DONE"
