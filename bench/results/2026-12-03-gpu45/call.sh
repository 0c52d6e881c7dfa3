#!/usr/bin/env bash
# session-16 call B (lead): the h2 GEMV's range guard summed at the block's exponent (checks), second samples of
# call A's A/Bs in the other order (attention gate in o_proj, FP8 on HFMA2), the prefill step with and without the
# TMA GEMM, and the default server's throughput levels (TMA prefill GEMM, SwiGLU GEMV on). Repo root, carry
# [".device", ".whl"].
source tools/gpu/call_head.sh
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -k gemv_nvfp4_h2 -k "fp8 h2" -k "gemv swiglu" -k gemm_sm90_tma --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
TAILN=2 t 90 checks2 python3 tools/gpu/check_kernels.py --seed 16016 -k gemv_nvfp4_h2 -k "fp8 h2" --out $R/checks2.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks2.log | head -8 | cut -c1-200
prof b1_35_ag0 "ATLAS_GEMV_ATTN_GATE=0" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_35_def "X=1" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_fp8_h20 "ATLAS_QUANT_FP8_H2=0" --model $G/q-fp8-block/qwen3-8b --batch 1 --context 512
prof b1_fp8_def "X=1" --model $G/q-fp8-block/qwen3-8b --batch 1 --context 512
pp() { local name=$1 envs=$2; shift 2; TAILN=0 t 90 $name env $envs python3 tools/gpu/profile_prefill.py --synthetic-seed 0 "$@" --out $R/$name.json; grep -E "tok/s|gemm" $L/$name.log | head -4 | cut -c1-160; }
pp pf_8_tma0 "ATLAS_GEMM_TMA=0" --model $G/qwen3-8b --tokens 2048
pp pf_8_tma "X=1" --model $G/qwen3-8b --tokens 2048
for i in $(seq 120); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
(python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/server.log 2>&1 &) ; for i in $(seq 240); do grep -q "Listening on" $L/server.log && break; sleep 0.5; done
grep -E "Listening|kv|KV|max" $L/server.log | head -4 | cut -c1-200
tp() { local name=$1 levels=$2 weights=$3 n=$4 seed=$5; local s=$(date +%s); timeout 100 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=$levels --param weights=$weights --param requests_per_level=$n --param seed=$seed --format json --no-fail-on-verdict > $R/tp_$name.json 2> $L/tp_$name.err; echo "tp_$name rc=$? $(( $(date +%s)-s ))s"; pack; }
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
tp d 64 8 64 1601; show $R/tp_d.json
tp c 16,32 4,4 64 1602; show $R/tp_c.json
tp b 4,8 2,2 16 1603; show $R/tp_b.json
tp a 1,2 1,1 4 1604; show $R/tp_a.json
pkill -f "atlas_cli.main serve"
echo "ALL DONE"
