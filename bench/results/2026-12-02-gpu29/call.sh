#!/usr/bin/env bash
# session-11 call 4 (lead, final tree): spec with the clustered default, batch 2-4 route A/B, gate records
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p .device/kernels .device/sass && tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/tok.tar.xz -C .device && tar xJf .device/sass.tar.xz -C .device/sass
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1 PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --target /tmp/site .whl/*.whl
W=/tmp/c4; R=$W/r; L=$W/log; mkdir -p $R $L; C=/tmp/atlas_ckpt
pack() { tar czf $OUT/all.tgz -C $W r log; }
trap pack EXIT
t() { local lim=$1 name=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $L/$name.log 2>&1; local rc=$?; echo "$name rc=$rc $(( $(date +%s)-s ))s"; tail -n ${TAILN:-4} $L/$name.log | cut -c1-230; pack; return $rc; }
hdr() { grep -E "GPU per step|async scheduling" $L/$1.log | cut -c1-200; }
TAILN=2 t 60 warm python3 tools/gpu/warm_jit.py
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
P8=$PWD/cfg/qwen3-8b
TAILN=12 t 120 spec python3 tools/gpu/bench_spec.py --model $P8 --synthetic-seed 0 --batches 1,8 --max-k 3 --k 3 --accept 0.7 --new 512 --steps 20 --no-fused-baseline --out $R/spec.json
for b in 4 2; do for v in def ATLAS_BATCHED_GEMV_MIN_M=2 ATLAS_DECODE_GEMM_MIN_M=2; do n=b${b}_${v%%=*}; TAILN=0 t 50 $n env $([ $v = def ] || echo $v) python3 tools/gpu/profile_decode.py --model $P8 --synthetic-seed 0 --batch $b --context 1536 --out $R/$n.json; hdr $n; done; done
for i in $(seq 90); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
(python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/gates_server.log 2>&1 &) ; for i in $(seq 240); do grep -q "Listening on" $L/gates_server.log && break; sleep 0.5; done
[ -d .git ] || cp -r .device/git .git
for g in decode-floor concurrency-sweep ttft-cold ttft-warm; do TAILN=3 t 100 gate_$g python3 -m atlas_cli.main gate record $g --url http://127.0.0.1:8897 --model qwen3-8b --checkpoint Qwen/Qwen3-8B; done
mkdir -p $R/benchmarks && cp -r .benchmarks/. $R/benchmarks/; pack
pkill -f "atlas_cli.main serve" ; sleep 2
