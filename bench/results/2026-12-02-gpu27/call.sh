#!/usr/bin/env bash
# session-11 call 2 (lead): the helpers' new paths: checks and A/Bs; WIDE prefill A/B at 2k/8k
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p .device/kernels .device/sass && tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/tok.tar.xz -C .device && tar xJf .device/sass.tar.xz -C .device/sass
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1 PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --target /tmp/site .whl/*.whl
W=/tmp/c2; R=$W/r; L=$W/log; mkdir -p $R $L; C=/tmp/atlas_ckpt
pack() { tar czf $OUT/all.tgz -C $W r log; }
trap pack EXIT
t() { local lim=$1 name=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $L/$name.log 2>&1; local rc=$?; echo "$name rc=$rc $(( $(date +%s)-s ))s"; tail -n ${TAILN:-4} $L/$name.log | cut -c1-230; pack; return $rc; }
hdr() { grep -E "GPU per step|async scheduling" $L/$1.log | cut -c1-200; }
TAILN=2 t 60 warm python3 tools/gpu/warm_jit.py
TAILN=4 t 150 checks python3 tools/gpu/check_kernels.py -k "verify cluster" -k ticket -k l2pf -k "moe_gate_topk cluster" -k moe_down_short -k "down short" --out $R/checks.json
grep -E "FAIL|Traceback|Error" $L/checks.log | head -12 | cut -c1-220
P8=$PWD/cfg/qwen3-8b; P06=$PWD/cfg/qwen3-0.6b; P30=$PWD/cfg/qwen3-30b-a3b
# verification attention (issue 13)
for v in def ATLAS_DECODE_ATTN_VERIFY_CLUSTER=1; do
  TAILN=5 t 50 verify_${v%%=*} env ATLAS_PDL=0 $([ $v = def ] || echo $v) python3 tools/gpu/profile_decode.py --model $P8 --synthetic-seed 0 --batch 1 --context 512 --verify 3 --out $R/verify_${v%%=*}.json
  grep -E "decode_attn_verify|qk_norm_rope|host phases" $L/verify_${v%%=*}.log | head -4 | cut -c1-200
  TAILN=4 t 90 spec_${v%%=*} env $([ $v = def ] || echo $v) python3 tools/gpu/bench_spec.py --model $P8 --synthetic-seed 0 --batches 1 --max-k 3 --k 3 --accept 0.7 --new 512 --steps 20 --no-fused-baseline --out $R/spec_${v%%=*}.json
done
# ticket split-K decode GEMM (issue 15)
TAILN=40 t 150 gemm_rows python3 tools/gpu/bench_kernels.py -k "8b qkv b64 wide" -k "8b o_proj b64 wide" -k "8b down b64 wide" -k "8b gate_up+swiglu b64 wide" -k "8b o_proj b64 ticket" -k "8b down b64 ticket" --out-dir $R/gemm_rows
for v in def ATLAS_DECODE_GEMM_TICKET=1; do TAILN=7 t 60 b64_${v%%=*} env $([ $v = def ] || echo $v) python3 tools/gpu/profile_decode.py --model $P8 --synthetic-seed 0 --batch 64 --context 1536 --out $R/b64_${v%%=*}.json; hdr b64_${v%%=*}; done
TAILN=7 t 60 b64_ticket_pdl0 env ATLAS_PDL=0 ATLAS_DECODE_GEMM_TICKET=1 python3 tools/gpu/profile_decode.py --model $P8 --synthetic-seed 0 --batch 64 --context 1536 --out $R/b64_ticket_pdl0.json; hdr b64_ticket_pdl0
# attention L2 prefetch of the next weights, batch 1 (issues 15, 10), PDL on
for m in 0.6b 8b; do for v in def ATLAS_ATTN_L2_PREFETCH=1; do TAILN=0 t 50 b1_${m}_${v%%=*} env $([ $v = def ] || echo $v) python3 tools/gpu/profile_decode.py --model $PWD/cfg/qwen3-$m --synthetic-seed 0 --batch 1 --context 512 --out $R/b1_${m}_${v%%=*}.json; hdr b1_${m}_${v%%=*}; done; done
# MoE batch 1: PDL off per kernel (router cluster, short down), then PDL on with all
for v in def ATLAS_MOE_ROUTER_CLUSTER=1 ATLAS_MOE_DOWN_SHORT=2 ATLAS_MOE_DOWN_SHORT=1; do TAILN=10 t 90 m30_pdl0_${v//=/_} env ATLAS_PDL=0 $([ $v = def ] || echo $v) python3 tools/gpu/profile_decode.py --model $P30 --synthetic-seed 0 --batch 1 --context 512 --out $R/m30_pdl0_${v//=/_}.json; hdr m30_pdl0_${v//=/_}; done
for v in def "ATLAS_MOE_ROUTER_CLUSTER=1 ATLAS_MOE_DOWN_SHORT=2 ATLAS_ATTN_L2_PREFETCH=1"; do n=$([ "$v" = def ] && echo def || echo all); TAILN=0 t 90 m30_pdl1_$n env $([ "$v" = def ] || echo $v) python3 tools/gpu/profile_decode.py --model $P30 --synthetic-seed 0 --batch 1 --context 512 --out $R/m30_pdl1_$n.json; hdr m30_pdl1_$n; done
# prefill attention tiles at shorter prompts (the WIDE default)
for p in 2048 8192; do for v in def ATLAS_PREFILL_ATTN_WIDE=0; do TAILN=2 t 40 pf${p}_${v%%=*} env $([ $v = def ] || echo $v) python3 tools/gpu/bench_long_context.py --config qwen3-8b --prefill $p --contexts "" --out $R/pf${p}_${v%%=*}.json; done; done
