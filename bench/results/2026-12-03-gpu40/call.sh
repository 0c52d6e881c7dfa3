#!/usr/bin/env bash
# session-14 call C (lead, final tree): checks, default server throughput levels + gate records, the batch-1 MoE down
# A/B (helper down), batch 1 on the staged prologue vs the waiting one, speculation b1, decode GEMM split rows
cd "$(dirname "$0")"; source ./head.sh
(python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; echo done > $W/ckpt8b.done) &
TAILN=3 t 120 checks python3 tools/gpu/check_kernels.py -k moe_down -k "down bulk" -k long_rope -k "verify long" --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
for i in $(seq 90); do [ -f $W/ckpt8b.done ] && break; sleep 2; done; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
(python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/server.log 2>&1 &) ; for i in $(seq 240); do grep -q "Listening on" $L/server.log && break; sleep 0.5; done
tp() { local name=$1 levels=$2 weights=$3 n=$4; local s=$(date +%s); timeout 100 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 --model qwen3-8b --param concurrencies=$levels --param weights=$weights --param requests_per_level=$n --format json --no-fail-on-verdict > $R/tp_$name.json 2> $L/tp_$name.err; echo "tp_$name rc=$? $(( $(date +%s)-s ))s"; pack; }
tp a 1,2 1,1 4
tp b 4,8 2,2 16
tp c 16,32 4,4 64
tp d 64 8 64
python3 - $R/tp_a.json $R/tp_b.json $R/tp_c.json $R/tp_d.json <<'PY' 2>&1 | tail -9
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
[ -d .git ] || cp -r .device/git .git
for g in decode-floor concurrency-sweep ttft-cold ttft-warm; do TAILN=2 t 80 gate_$g python3 -m atlas_cli.main gate record $g --url http://127.0.0.1:8897 --model qwen3-8b --checkpoint Qwen/Qwen3-8B; done
mkdir -p $R/benchmarks && cp -r .benchmarks/. $R/benchmarks/; pack
pkill -f "atlas_cli.main serve"; sleep 2
prof() { local name=$1 envs=$2; shift 2; TAILN=0 t 60 $name env $envs python3 tools/gpu/profile_decode.py --synthetic-seed 0 "$@" --out $R/$name.json; echo "  $name: $(hdr $name | head -1 | cut -c1-120)"; }
prof d30_def "X=1" --model $G/qwen3-30b-a3b --batch 1 --context 512
prof d30_new "ATLAS_MOE_DOWN_BULK=1" --model $G/qwen3-30b-a3b --batch 1 --context 512
prof d35_def "X=1" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof d35_new "ATLAS_MOE_DOWN_BULK=1" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof d30_new_pdl0 "ATLAS_PDL=0 ATLAS_MOE_DOWN_BULK=1" --model $G/qwen3-30b-a3b --batch 1 --context 512
grep -E "moe_down|moe_gate_up" $L/d30_new_pdl0.log | head -3
prof d30_rows8 "ATLAS_MOE_DOWN_BULK=1 ATLAS_MOE_DOWN_BULK_ROWS=8" --model $G/qwen3-30b-a3b --batch 1 --context 512
prof s06_def "X=1" --model $G/qwen3-0.6b --batch 1 --context 512
prof s06_wait "ATLAS_DECODE_ATTN_LONG_STAGED=0" --model $G/qwen3-0.6b --batch 1 --context 512
prof s8_def "X=1" --model $G/qwen3-8b --batch 1 --context 1536
prof s8_wait "ATLAS_DECODE_ATTN_LONG_STAGED=0" --model $G/qwen3-8b --batch 1 --context 1536
TAILN=0 t 90 spec python3 tools/gpu/bench_spec.py --model $G/qwen3-8b --synthetic-seed 0 --batches 1 --max-k 4 --k 3 --accept 0.7 --new 512 --prompts 2 --steps 20 --out $R/spec_b1.json
grep -E "^ +1 |^plain tok/s" $L/spec.log | cut -c1-170
kt() { local name=$1 envs=$2; shift 2; TAILN=0 t 60 kt_$name env $envs python3 tools/gpu/bench_kernels.py --repeats 40 "$@" --out-dir $R/kt_$name; grep -E "^\| " $L/kt_$name.log | grep -v "^| kernel\|^|---" | awk -F'|' '{printf "  %-44s %8s %8s %6s %5s\n", substr($3,1,44), $6, $7, $8, $10}'; }
kt g_def "X=1" -k "qwen3-32b gate_up b64 dgemm" -k "qwen3-4b gate_up b64 dgemm" -k "qwen3-8b o_proj b64 dgemm"
kt g_any "ATLAS_DECODE_GEMM_ANY_SPLIT=1" -k "qwen3-32b gate_up b64 dgemm" -k "qwen3-4b gate_up b64 dgemm" -k "qwen3-8b o_proj b64 dgemm"
echo "ALL DONE"
