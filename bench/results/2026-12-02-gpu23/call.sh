#!/usr/bin/env bash
# session-9 call 3 (lead, final tree): throughput, gate records, headline decode rows
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p .device/kernels .device/sass && tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/tok.tar.xz -C .device && tar xJf .device/sass.tar.xz -C .device/sass
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1 PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --target /tmp/site .whl/*.whl
W=/tmp/c3; R=$W/r; L=$W/log; mkdir -p $R $L; C=/tmp/atlas_ckpt
pack() { tar czf $OUT/all.tgz -C $W r log; }
trap pack EXIT
t() { local lim=$1 name=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $L/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-s ))s"; tail -n ${TAILN:-4} $L/$name.log | cut -c1-220; pack; }
TAILN=2 t 60 warm python3 tools/gpu/warm_jit.py
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
TAILN=2 t 40 ckpt06 python3 tools/make_fixtures.py --config qwen3-0.6b --device cuda --out $C/qwen3-0.6b --no-golden
TAILN=3 t 100 checks python3 tools/gpu/check_kernels.py -k persistent -k "verify rope" -k "gemv ring" -k "verify D" -k gemv_qd_nvfp4_n -k moe_route_in_experts --out $R/checks.json
grep -E "FAIL|Traceback" $L/checks.log | head -8 | cut -c1-200
for i in $(seq 90); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
ATLAS_SERVE_ARGS="" ATLAS_THROUGHPUT_LEVELS=64 ATLAS_THROUGHPUT_WEIGHTS=8 timeout 170 bash tools/gpu/server_sweep.sh $C/qwen3-8b $R/throughput_c64.json none > $L/throughput.log 2>&1; echo "throughput rc=$?"; pack
python3 - $R/throughput_c64.throughput.json <<'PY' 2>&1 | tail -3
import json,sys
m=json.load(open(sys.argv[1]))["metrics"]; print({k:round(v,1) for k,v in m.items() if k.startswith("c64.") and any(s in k for s in ("total_tok","ttft_p","itl_p","tpot_p50"))})
PY
# gate records (issue 15): a shallow .git for the commit stamp; records land in .benchmarks/
[ -d .git ] || cp -r .device/git .git
(python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/gates_server.log 2>&1 &) ; for i in $(seq 240); do grep -q "Listening on" $L/gates_server.log && break; sleep 0.5; done
for g in decode-floor concurrency-sweep ttft-cold ttft-warm; do TAILN=3 t 90 gate_$g python3 -m atlas_cli.main gate record $g --url http://127.0.0.1:8897 --model qwen3-8b --checkpoint Qwen/Qwen3-8B; done
pkill -f "atlas_cli.main serve" ; sleep 2; mkdir -p $R/benchmarks && cp -r .benchmarks/. $R/benchmarks/
TAILN=8 t 60 b8b python3 tools/gpu/bench_decode.py --model $C/qwen3-8b --hf none --batches 1,8,64 --out $R/b8b.json
TAILN=6 t 30 b06 python3 tools/gpu/bench_decode.py --model $C/qwen3-0.6b --hf none --batches 1 --out $R/b06.json
TAILN=14 t 60 spec python3 tools/gpu/bench_spec.py --model $PWD/cfg/qwen3-8b --synthetic-seed 0 --batches 1,8 --max-k 3 --k 3 --accept 0.7 --new 128 --steps 20 --no-fused-baseline --out $R/spec.json
for n in llama-3.2-1b qwen3-1.7b qwen3-4b llama-3.1-8b; do TAILN=5 t 40 dense_$n python3 tools/gpu/bench_moe.py --config $n --batches 1 --new 128 --prefill 512 --hf none --out $R/dense_$n.json; done
TAILN=2 t 40 qrows python3 tools/gpu/bench_kernels.py -k "qwen3-8b qkv b1" -k "qwen3-8b o_proj b1" -k "qwen3-8b down b1" -k "qwen3-8b gate_up+swiglu b1" --out-dir $R/qrows
