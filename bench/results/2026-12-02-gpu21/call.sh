#!/usr/bin/env bash
# session-9 call 1 (lead, gpu21): split-rule data, quantized 8B e2e baseline, b64 step
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p .device/kernels .device/sass && tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/tok.tar.xz -C .device && tar xJf .device/sass.tar.xz -C .device/sass
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1 PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --target /tmp/site .whl/*.whl
W=/tmp/c1; R=$W/r; L=$W/log; mkdir -p $R $L; G=$PWD/cfg
pack() { tar czf $OUT/all.tgz -C $W r log; }
trap pack EXIT
t() { local lim=$1 name=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $L/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-s ))s"; tail -n ${TAILN:-4} $L/$name.log | cut -c1-220; pack; }
TAILN=2 t 60 warm python3 tools/gpu/warm_jit.py
TAILN=40 t 40 occ python3 tools/gpu/decode_gemm_occupancy.py --out $R/occ.json
sel=(); for n in qkv o_proj gate_up down; do for b in 16 64 128; do sel+=(-k "decode_gemm_sm90 qwen3-8b $n b$b"); done; done
TAILN=1 t 120 rows_default python3 tools/gpu/bench_kernels.py "${sel[@]}" --out-dir $R/rows_default
TAILN=1 t 120 rows_occ env ATLAS_DECODE_GEMM_OCCUPANCY=1 python3 tools/gpu/bench_kernels.py "${sel[@]}" --out-dir $R/rows_occ
TAILN=1 t 60 rows_split2 env ATLAS_DECODE_GEMM_SPLIT=2 python3 tools/gpu/bench_kernels.py -k "decode_gemm_sm90 qwen3-8b o_proj b" -k "decode_gemm_sm90 qwen3-8b down b" --out-dir $R/rows_split2
for v in default occ; do
  e=(); [ $v = occ ] && e=(ATLAS_DECODE_GEMM_OCCUPANCY=1)
  TAILN=12 t 60 p8b_b64_$v env "${e[@]}" python3 tools/gpu/profile_decode.py --model $G/qwen3-8b-bf16/qwen3-8b --synthetic-seed 0 --batch 64 --context 1536 --out $R/p8b_b64_$v.json
  TAILN=6 t 60 p06_b64_$v env "${e[@]}" python3 tools/gpu/profile_decode.py --model $G/qwen3-0.6b-bf16/qwen3-0.6b --synthetic-seed 0 --batch 64 --context 1536 --out $R/p06_b64_$v.json
done
for q in bf16 fp8-block nvfp4; do
  x=(); [ $q = nvfp4 ] && x=(--lm-head)
  TAILN=14 t 100 q8b_$q python3 tools/gpu/bench_moe.py --config qwen3-8b --quant $q "${x[@]}" --batches 1,8 --new 128 --prefill 512 --hf none --out $R/q8b_$q.json
done
TAILN=25 t 60 pq_nvfp4_b1 env ATLAS_PDL=0 python3 tools/gpu/profile_decode.py --model $G/qwen3-8b-nvfp4/qwen3-8b --synthetic-seed 0 --batch 1 --context 512 --out $R/pq_nvfp4_b1.json
