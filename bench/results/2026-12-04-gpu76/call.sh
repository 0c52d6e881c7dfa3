#!/usr/bin/env bash
# session-22 call A: the evict_first L2 policy on the step's streams (decode GEMM weight boxes, long-attention K/V
# copies; the kernels_l2 set, built with -DATLAS_L2_STREAM_EVICT_FIRST=1) against the default set: checks of both
# modules on the variant, then Qwen3-8B steps A/B in both orders at batch 64 x 1,536, batch 8 x 4,096 and batch 1 x
# 512 (and Qwen3-0.6B batch 1: the b1 GEMVs' weight loads take the policy too). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
V=$PWD/.device/kernels_l2; D=$ATLAS_KERNELS_DIR
ls $V
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
TAILN=3 t 240 checks python3 tools/gpu/check_kernels.py --ptx-dir $V -m attention_long -m gemm_decode_tma -m gemv -m gemv_nvfp4 --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b() { PLIM=150 prof "$1" "ATLAS_KERNELS_DIR=$2" --model $G/qwen3-8b --batch $3 --context $4; }
b b64_d $D 64 1536; b b64_l $V 64 1536; b b64_l2 $V 64 1536; b b64_d2 $D 64 1536
b b8_l $V 8 4096; b b8_d $D 8 4096
b b1_d $D 1 512; b b1_l $V 1 512
PLIM=100 prof s1_l "ATLAS_KERNELS_DIR=$V" --model $G/qwen3-0.6b --batch 1 --context 512
PLIM=100 prof s1_d "ATLAS_KERNELS_DIR=$D" --model $G/qwen3-0.6b --batch 1 --context 512
echo "== kernel rows (us a call) and the attention on the critical path"
for n in b64_d b64_l b64_l2 b64_d2 b8_l b8_d b1_d b1_l s1_l s1_d; do
  echo "$n $(grep -E "GPU per step" $L/$n.log | head -1 | cut -c1-60)"
  grep -E "^(decode_attn|gemm_decode)\w+ +[0-9]" $L/$n.log | head -5 | cut -c1-90
  echo "  crit: $(grep -E "^decode_attn\w* +gemm" $L/$n.log | head -1 | cut -c1-120)"; done
for i in $(seq 120); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
# the contest-shaped level c64 against the default server (no flags) on each set, the same seed
srv() {  # name kernels-dir: serve, run c64 (64 requests, seed 2001), stop
  local name=$1 dir=$2
  (ATLAS_KERNELS_DIR=$dir python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/server_$name.log 2>&1 &)
  for i in $(seq 240); do grep -q "Listening on" $L/server_$name.log && break; sleep 0.5; done
  local s=$(date +%s)
  timeout 60 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=64 --param weights=8 --param requests_per_level=64 --param seed=2001 --format json --no-fail-on-verdict > $R/tp_$name.json 2> $L/tp_$name.err
  echo "tp_$name rc=$? $(( $(date +%s)-s ))s"; pkill -f "atlas_cli.main serve"; sleep 3; pack
  python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['metrics']; print(sys.argv[2], ' '.join(f'{k[4:]}={m[k]:.1f}' for k in ('c64.aggregate_total_tok_s','c64.ttft_p50_ms','c64.itl_p50_ms','c64.itl_p99_ms')))" $R/tp_$name.json $name
}
srv l $V; srv d $D
echo "ALL DONE"
