#!/usr/bin/env bash
# session-9 call 2 (lead, gpu22): the five helper branches merged, same-run A/Bs
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p .device/kernels .device/sass && tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/tok.tar.xz -C .device && tar xJf .device/sass.tar.xz -C .device/sass
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1 PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --target /tmp/site .whl/*.whl
W=/tmp/c2; R=$W/r; L=$W/log; mkdir -p $R $L; G=$PWD/cfg
pack() { tar czf $OUT/all.tgz -C $W r log; }
trap pack EXIT
t() { local lim=$1 name=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $L/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-s ))s"; tail -n ${TAILN:-4} $L/$name.log | cut -c1-220; pack; }
TAILN=2 t 60 warm python3 tools/gpu/warm_jit.py
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -k long -k "gemv ring" -k "gemv_silu ring" -k "verify D" -k "verify rope" -k persistent -k gemv_qd_nvfp4_n -k gemv_qd_fp8_n -k moe_gate_up -k moe_route_in_experts -k moe_decode -k moe_down -k moe_gate_topk -k moe_topk --out $R/checks.json
grep -E "FAIL|ERROR|Traceback" $L/checks.log | head -12 | cut -c1-200
# attn: the batched attention in the 8B / 0.6B b64 x 1,536 step (PDL on), default vs EARLY=0
for e in 1 0; do TAILN=10 t 40 a8b_early$e env ATLAS_DECODE_ATTN_LONG_EARLY=$e python3 tools/gpu/profile_decode.py --model $G/qwen3-8b --synthetic-seed 0 --batch 64 --context 1536 --out $R/a8b_early$e.json; done
TAILN=8 t 30 a06 python3 tools/gpu/profile_decode.py --model $G/qwen3-0.6b --synthetic-seed 0 --batch 64 --context 1536 --out $R/a06.json
# moe: 30B / 35B b1 new vs old
for n in qwen3-30b-a3b qwen3_5-35b-a3b; do
  TAILN=5 t 50 moe_${n}_new python3 tools/gpu/bench_moe.py --config $n --batches 1,8 --prompt 512 --new 128 --prefill 512 --hf none --out $R/moe_${n}_new.json
  TAILN=5 t 50 moe_${n}_old env ATLAS_MOE_ROUTE_IN_EXPERTS=0 ATLAS_MOE_GATE_UP_TILED=0 python3 tools/gpu/bench_moe.py --config $n --batches 1 --prompt 512 --new 128 --prefill 512 --hf none --out $R/moe_${n}_old.json
done
# quant: NVFP4 (+LM head) and FP8-block 8B b1/b8 at ATLAS_QUANT_NARROW unset (default) / 0 (old loops)
for nw in d 0; do e=(); [ $nw = 0 ] && e=(ATLAS_QUANT_NARROW=0)
  TAILN=5 t 40 qn_nvfp4_$nw env "${e[@]}" python3 tools/gpu/bench_moe.py --config qwen3-8b --quant nvfp4 --lm-head --batches 1,8 --new 128 --prefill 512 --hf none --out $R/qn_nvfp4_$nw.json
  TAILN=5 t 40 qn_fp8_$nw env "${e[@]}" python3 tools/gpu/bench_moe.py --config qwen3-8b --quant fp8-block --batches 1,8 --new 128 --prefill 512 --hf none --out $R/qn_fp8_$nw.json
done
# b1: 0.6B b1 default vs persistent (readiness counts) vs persistent barriers
for v in default ATLAS_PERSISTENT_DECODE=1 "ATLAS_PERSISTENT_DECODE=1 ATLAS_PERSISTENT_FLAGS=0"; do n=${v//[ =]/_}
  TAILN=4 t 30 b1_$n env $([ "$v" = default ] || echo $v) python3 tools/gpu/bench_moe.py --config qwen3-0.6b --batches 1 --new 128 --prefill 512 --hf none --out $R/b1_$n.json
done
# spec: verification step (PDL off) default vs VERIFY_ROPE=1, then bench_spec
for v in default ATLAS_DECODE_ATTN_VERIFY_ROPE=1; do n=${v//=/_}
  TAILN=12 t 40 vprof_$n env ATLAS_PDL=0 $([ "$v" = default ] || echo $v) python3 tools/gpu/profile_decode.py --model $G/qwen3-8b --synthetic-seed 0 --batch 1 --context 512 --verify 3 --out $R/vprof_$n.json
done
TAILN=14 t 90 spec python3 tools/gpu/bench_spec.py --model $G/qwen3-8b --synthetic-seed 0 --batches 1,8 --max-k 3 --k 3 --accept 0.7 --new 128 --steps 20 --no-fused-baseline --out $R/spec.json
