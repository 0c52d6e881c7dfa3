#!/usr/bin/env bash
# session-11 call 3 (lead, final tree): verification fix A/B, throughput 1..64 sweep, gate records
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p .device/kernels .device/sass && tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/tok.tar.xz -C .device && tar xJf .device/sass.tar.xz -C .device/sass
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1 PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --target /tmp/site .whl/*.whl
W=/tmp/c3; R=$W/r; L=$W/log; mkdir -p $R $L; C=/tmp/atlas_ckpt
pack() { tar czf $OUT/all.tgz -C $W r log; }
trap pack EXIT
t() { local lim=$1 name=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $L/$name.log 2>&1; local rc=$?; echo "$name rc=$rc $(( $(date +%s)-s ))s"; tail -n ${TAILN:-4} $L/$name.log | cut -c1-230; pack; return $rc; }
hdr() { grep -E "GPU per step|async scheduling" $L/$1.log | cut -c1-200; }
TAILN=2 t 60 warm python3 tools/gpu/warm_jit.py
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
P8=$PWD/cfg/qwen3-8b
TAILN=4 t 120 checks python3 tools/gpu/check_kernels.py -k "verify cluster" --out $R/checks.json
grep -E "FAIL|differ|Traceback" $L/checks.log | head -8 | cut -c1-220
for pdl in 1 0; do TAILN=4 t 90 spec_cluster_pdl$pdl env ATLAS_PDL=$pdl ATLAS_DECODE_ATTN_VERIFY_CLUSTER=1 python3 tools/gpu/bench_spec.py --model $P8 --synthetic-seed 0 --batches 1 --max-k 3 --k 3 --accept 0.7 --new 512 --steps 20 --no-fused-baseline --out $R/spec_cluster_pdl$pdl.json; done
TAILN=4 t 90 spec_def python3 tools/gpu/bench_spec.py --model $P8 --synthetic-seed 0 --batches 1 --max-k 3 --k 3 --accept 0.7 --new 512 --steps 20 --no-fused-baseline --out $R/spec_def.json
TAILN=3 t 50 verify_cluster env ATLAS_PDL=0 ATLAS_DECODE_ATTN_VERIFY_CLUSTER=1 python3 tools/gpu/profile_decode.py --model $P8 --synthetic-seed 0 --batch 1 --context 512 --verify 3 --out $R/verify_cluster.json
grep -E "decode_attn_verify|GPU per step \(graph|at per-token" $L/verify_cluster.log | head -4 | cut -c1-200
for i in $(seq 90); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
# throughput 1..64 (contest weights): low levels 8 requests each (steady state at one stream is
# the same per request), 16..64 at the suite's 64 requests; one server with default flags
(python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/sweep_server.log 2>&1 &) ; for i in $(seq 240); do grep -q "Listening on" $L/sweep_server.log && break; sleep 0.5; done
s=$(date +%s)
timeout 150 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=1,2,4,8 --param weights=1,1,2,2 --param requests_per_level=8 --format json --no-fail-on-verdict > $R/tp_low.json 2> $L/tp_low.err; echo "tp_low rc=$? $(( $(date +%s)-s ))s"; pack
s=$(date +%s)
timeout 150 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=16,32,64 --param weights=4,4,8 --format json --no-fail-on-verdict > $R/tp_high.json 2> $L/tp_high.err; echo "tp_high rc=$? $(( $(date +%s)-s ))s"; pack
python3 - $R/tp_low.json $R/tp_high.json <<'PY' 2>&1 | tail -12
import json, sys
m = {}
for f in sys.argv[1:]:
    try: m.update(json.load(open(f))["metrics"])
    except Exception as e: print("bad", f, e)
lv = [1, 2, 4, 8, 16, 32, 64]; w = [1, 1, 2, 2, 4, 4, 8]
for c in lv:
    k = f"c{c}."
    if k + "aggregate_total_tok_s" in m:
        print(f"c{c:<3} total {m[k+'aggregate_total_tok_s']:9.1f} out {m[k+'aggregate_output_tok_s']:8.1f} ttft p50/p99 {m[k+'ttft_p50_ms']:7.1f}/{m[k+'ttft_p99_ms']:7.1f} itl p50/p99 {m[k+'itl_p50_ms']:5.2f}/{m[k+'itl_p99_ms']:6.2f}")
t = [m.get(f"c{c}.aggregate_total_tok_s") for c in lv]
if all(x is not None for x in t): print("weighted score", sum(a * b for a, b in zip(w, t)) / sum(w))
PY
# gate records (issue 15) on the same default server: a shallow .git for the commit stamp
[ -d .git ] || cp -r .device/git .git
for g in decode-floor concurrency-sweep ttft-cold ttft-warm; do TAILN=3 t 100 gate_$g python3 -m atlas_cli.main gate record $g --url http://127.0.0.1:8897 --model qwen3-8b --checkpoint Qwen/Qwen3-8B; done
mkdir -p $R/benchmarks && cp -r .benchmarks/. $R/benchmarks/; pack
pkill -f "atlas_cli.main serve" ; sleep 2
TAILN=6 t 80 moe35 python3 tools/gpu/bench_moe.py --config qwen3_5-35b-a3b --batches 1 --prompt 512 --new 128 --prefill 512 --hf none --out $R/moe35.json
