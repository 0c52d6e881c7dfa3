#!/usr/bin/env bash
# session-11 call 1 (lead): checks + A/Bs of the three opt-in paths (s10_ab), throughput baseline at 64 streams
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p .device/kernels .device/sass && tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/tok.tar.xz -C .device && tar xJf .device/sass.tar.xz -C .device/sass
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1 PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --target /tmp/site .whl/*.whl
W=/tmp/c1; R=$W/r; L=$W/log; mkdir -p $R $L; C=/tmp/atlas_ckpt
pack() { tar czf $OUT/all.tgz -C $W r log; }
trap pack EXIT
t() { local lim=$1 name=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $L/$name.log 2>&1; local rc=$?; echo "$name rc=$rc $(( $(date +%s)-s ))s"; tail -n ${TAILN:-4} $L/$name.log | cut -c1-230; pack; return $rc; }
TAILN=2 t 60 warm python3 tools/gpu/warm_jit.py
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
TAILN=3 t 90 checks python3 tools/gpu/check_kernels.py -m attention_sm90 -m attention_long --out $R/checks.json
grep -E "FAIL|Traceback|Error" $L/checks.log | head -8 | cut -c1-200
for v in def ATLAS_DECODE_ATTN_LONG_LATE=1; do TAILN=9 t 60 b64_${v%%=*} env $([ $v = def ] || echo $v) python3 tools/gpu/profile_decode.py --model $PWD/cfg/qwen3-8b --synthetic-seed 0 --batch 64 --context 1536 --out $R/b64_${v%%=*}.json; done
for v in def ATLAS_PREFILL_ATTN_WIDE=1; do TAILN=3 t 60 long_${v%%=*} env $([ $v = def ] || echo $v) python3 tools/gpu/bench_long_context.py --config qwen3-8b --contexts "" --out $R/long_${v%%=*}.json; done
for v in def ATLAS_VERIFY_GRAPH_COPIES=1; do
  TAILN=8 t 50 verify_${v%%=*} env ATLAS_PDL=0 $([ $v = def ] || echo $v) python3 tools/gpu/profile_decode.py --model $PWD/cfg/qwen3-8b --synthetic-seed 0 --batch 1 --context 512 --verify 3 --out $R/verify_${v%%=*}.json
  TAILN=8 t 70 spec_${v%%=*} env $([ $v = def ] || echo $v) python3 tools/gpu/bench_spec.py --model $PWD/cfg/qwen3-8b --synthetic-seed 0 --batches 1 --max-k 3 --k 3 --accept 0.7 --new 128 --steps 20 --no-fused-baseline --out $R/spec_${v%%=*}.json
done
for i in $(seq 90); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
s=$(date +%s); ATLAS_SERVE_ARGS="" ATLAS_THROUGHPUT_LEVELS=64 ATLAS_THROUGHPUT_WEIGHTS=8 timeout 180 bash tools/gpu/server_sweep.sh $C/qwen3-8b $R/throughput_c64.json none > $L/throughput.log 2>&1; echo "throughput rc=$? $(( $(date +%s)-s ))s"; pack
python3 - $R/throughput_c64.json <<'PY' 2>&1 | tail -4
import json,sys
d=json.load(open(sys.argv[1])); print(json.dumps(d)[:1200])
PY
