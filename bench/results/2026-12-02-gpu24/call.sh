#!/usr/bin/env bash
# session-10 call 1 (lead): diagnostics: per-kernel b64 step PDL on/off, small-model b1, kernel rows
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p .device/kernels .device/sass && tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/tok.tar.xz -C .device && tar xJf .device/sass.tar.xz -C .device/sass
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1 PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --target /tmp/site .whl/*.whl
W=/tmp/c1; R=$W/r; L=$W/log; mkdir -p $R $L
pack() { tar czf $OUT/all.tgz -C $W r log; }
trap pack EXIT
t() { local lim=$1 name=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $L/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-s ))s"; tail -n ${TAILN:-4} $L/$name.log | cut -c1-220; pack; }
TAILN=2 t 60 warm python3 tools/gpu/warm_jit.py
for p in 0 1; do TAILN=30 ATLAS_PDL=$p t 120 p8b64_pdl$p python3 tools/gpu/profile_decode.py --model $PWD/cfg/qwen3-8b --synthetic-seed 0 --batch 64 --context 1536 --out $R/p8b64_pdl$p.json; done
for p in 0 1; do TAILN=25 ATLAS_PDL=$p t 60 p06b1_pdl$p python3 tools/gpu/profile_decode.py --model $PWD/cfg/qwen3-0.6b --synthetic-seed 0 --batch 1 --context 512 --out $R/p06b1_pdl$p.json; done
TAILN=12 t 90 attnrows python3 tools/gpu/bench_kernels.py -k "qwen3-8b b64 hist1536" -k "b1 hist512 +rope" --out-dir $R/attnrows
TAILN=25 ATLAS_PDL=0 t 150 p30b1_pdl0 python3 tools/gpu/profile_decode.py --model $PWD/cfg/qwen3-30b-a3b --synthetic-seed 0 --batch 1 --context 512 --out $R/p30b1_pdl0.json
TAILN=12 t 240 longctx python3 tools/gpu/bench_long_context.py --config qwen3-8b --out $R/longctx.json
