#!/usr/bin/env bash
# session-40 call B: session 39's two kernels as the defaults (step_io in the decode graph,
# the staged attention's one-dim twins for batches): correctness on every tiny family
# (CUDA parity) and greedy digests against their A/B switches on the hybrid Qwen3.5-35B-A3B
# (state slots), Llama-3.2-1B (D 64) and Qwen3-0.6B at batch 8; then issue 12's 8B
# bf16 / FP8 / NVFP4 batch 1, the 35B NVFP4 batch 1 (issue 11), the default server's
# Qwen3-0.6B stream (openai SDK) and the 8B c64 level (issue 15).
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TINY=""; for n in tiny-llama tiny-qwen3 tiny-llama3-rope tiny-qwen2 tiny-mistral tiny-phi3 tiny-phi3-d96 \
  tiny-gemma3 tiny-gpt-oss tiny-smollm3 tiny-mixtral tiny-minimax-m2 tiny-qwen3-moe tiny-qwen2-moe \
  tiny-glm4-moe tiny-qwen3_5 tiny-qwen3_5_moe tiny-qwen3_next; do TINY="$TINY --model tests/fixtures/$n"; done
TAILN=20 t 240 tiny python3 tools/gpu/model_parity.py --backend cuda $TINY --out $R/parity_tiny.json
dg() { TAILN=1 t ${DLIM:-60} "dg_$1" env $2 python3 tools/gpu/greedy_digest.py --synthetic-seed 0 --model $G/$3 --batch $4; }
IO0=ATLAS_GRAPH_STEP_IO=0; OD0=ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM=0
dg l1_b3 X=1 llama-3.2-1b 3; dg l1_b3_io0 $IO0 llama-3.2-1b 3; dg l1_b3_od0 $OD0 llama-3.2-1b 3
dg q06_b8 X=1 qwen3-0.6b 8; dg q06_b8_od0 $OD0 qwen3-0.6b 8
DLIM=150 dg q35_b3 X=1 qwen3_5-35b-a3b 3; DLIM=150 dg q35_b3_io0 $IO0 qwen3_5-35b-a3b 3
b1() { PLIM=${PL:-75} prof "$1" X=1 --model $2 --batch 1 --context 512; }
b1 q8 $G/qwen3-8b; b1 q8_fp8 $G/q-fp8-block/qwen3-8b; b1 q8_nvfp4 $G/q-nvfp4/qwen3-8b
PL=120 b1 q35_nvfp4 $G/q-nvfp4/qwen3_5-35b-a3b
serve() {  # serve MODEL: the default server, no flags
  (python3 -m atlas_cli.main serve $C/$1 --backend cuda --port 8897 > $L/server_$1.log 2>&1 &)
  for i in $(seq 360); do grep -q "Listening on" $L/server_$1.log && break; sleep 0.5; done
}
for m in qwen3-0.6b qwen3-8b; do
  python3 tools/make_fixtures.py --config $m --device cuda --out $C/$m --no-golden > $L/ckpt_$m.log 2>&1
  cp .device/qwen3-tok/tokenizer*.json $C/$m/; serve $m
  t 60 sr_$m python3 tools/gpu/stream_rate.py --url http://127.0.0.1:8897/v1 --model $m \
    --tokens 1024 --requests 3 --out $R/sr_$m.json
  if [ $m = qwen3-8b ]; then
    s=$(date +%s); timeout 110 python3 -m atlas_cli.main benchmark run throughput --url http://127.0.0.1:8897 \
      --model qwen3-8b --param concurrencies=64 --param weights=8 --param requests_per_level=64 \
      --param seed=2001 --format json --no-fail-on-verdict > $R/tp_c64.json 2> $L/tp_c64.err
    echo "tp_c64 rc=$? $(( $(date +%s)-s ))s"; pack
  fi
  pkill -f "atlas_cli.main serve"; sleep 3
done
echo "== greedy digests: default / step_io off / batched one-dim off"
dgd() { grep -o 'digest [0-9a-f]*' $L/dg_$1.log 2>/dev/null | cut -d' ' -f2; }
echo "llama-3.2-1b b3 $(dgd l1_b3) / $(dgd l1_b3_io0) / $(dgd l1_b3_od0)"
echo "qwen3-0.6b b8 $(dgd q06_b8) / - / $(dgd q06_b8_od0)"
echo "qwen3_5-35b-a3b b3 $(dgd q35_b3) / $(dgd q35_b3_io0) / -"
echo "== batch 1 x 512, GPU replay / async wall ms a step"
aw() { grep -oE "GPU per step \(graph replay\) [0-9.]+|async scheduling: wall per step [0-9.]+" $L/$1.log | grep -oE "[0-9.]+$" | tr '\n' ' '; }
for n in q8 q8_fp8 q8_nvfp4 q35_nvfp4; do echo "$n $(aw $n)"; done
echo "== server (openai SDK stream, 1,024 tokens)"
for m in qwen3-0.6b qwen3-8b; do echo "$m: $(grep median $L/sr_$m.log)"; done
python3 - $R/tp_c64.json <<'PY' 2>&1 | tail -2
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]; k = "c64."
print(f"c64 total {m[k+'aggregate_total_tok_s']:9.1f} out {m[k+'aggregate_output_tok_s']:8.1f} ttft p50/p99 {m[k+'ttft_p50_ms']:7.1f}/{m[k+'ttft_p99_ms']:7.1f} itl p50/p99 {m[k+'itl_p50_ms']:5.2f}/{m[k+'itl_p99_ms']:6.2f}")
PY
echo "ALL DONE"
