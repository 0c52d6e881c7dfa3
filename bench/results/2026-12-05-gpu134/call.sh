#!/usr/bin/env bash
# session-39 call D: a captured decode step's own input and output copies as kernels in its
# graph (step_io.cu, 9624ddb9; opt-in ATLAS_GRAPH_STEP_IO=1, the default the copies on the
# stream) - correctness, then the A/B; if it wins, make it the default (routes.py). Expected: the ~20 us span between step graphs (gpu133) down to a few us, the
# async wall a step ~15 us shorter on every model (Qwen3-0.6B 0.656 -> ~0.641 ms on an H200).
# (Trimmed to fit session 39's last ~500 s of device time, then not run: new loans were
# paused. Add Llama-3.2-1B and a Qwen3.5-35B-A3B digest (hybrid state slots) when time allows.)
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
ON=ATLAS_GRAPH_STEP_IO=1; OFF=X=1
TAILN=2 t 60 checks python3 tools/gpu/check_kernels.py -m step_io --out $R/checks.json
for f in tiny-qwen3 tiny-qwen2; do
  TAILN=1 t 60 "parity_$f" env $ON python3 tools/gpu/model_parity.py --backend cuda --model tests/fixtures/$f --out $R/parity_$f.json
done
dg() { TAILN=1 t 120 "dg_$1" env $2 python3 tools/gpu/greedy_digest.py --synthetic-seed 0 --model $G/$3 --batch $4; }
dg q06_b8 $ON qwen3-0.6b 8; dg q06_b8_off $OFF qwen3-0.6b 8
dg q06_b3 $ON qwen3-0.6b 3; dg q06_b3_off $OFF qwen3-0.6b 3
dg q06_b1 $ON qwen3-0.6b 1; dg q06_b1_off $OFF qwen3-0.6b 1
b1() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch 1 --context 512; hdr "$1" | tail -1 | cut -c1-150; }
b1 q06_io $ON qwen3-0.6b; b1 q06_off $OFF qwen3-0.6b; b1 q06_io2 $ON qwen3-0.6b; b1 q06_off2 $OFF qwen3-0.6b
b1 q8_io $ON qwen3-8b; b1 q8_off $OFF qwen3-8b
for n in q06_io q06_off; do echo "== $n"; grep -A5 "between step graphs" $L/$n.log | cut -c1-150; done
serve() {  # serve NAME ENV: the default Qwen3-0.6B server
  (env $2 python3 -m atlas_cli.main serve $C/qwen3-0.6b --backend cuda --port 8897 > $L/server_$1.log 2>&1 &)
  for i in $(seq 360); do grep -q "Listening on" $L/server_$1.log && break; sleep 0.5; done
  t 60 "sr_$1" python3 tools/gpu/stream_rate.py --url http://127.0.0.1:8897/v1 --model qwen3-0.6b \
    --tokens 1024 --requests 3 --out $R/sr_$1.json
  pkill -f "atlas_cli.main serve"; sleep 3
}
python3 tools/make_fixtures.py --config qwen3-0.6b --device cuda --out $C/qwen3-0.6b --no-golden > $L/ckpt.log 2>&1
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-0.6b/
serve io $ON; serve off $OFF
echo "== greedy digests (io / copies)"
for n in q06_b8 q06_b3 q06_b1; do echo "$n: $(grep -o 'digest [0-9a-f]*' $L/dg_$n.log) / $(grep -o 'digest [0-9a-f]*' $L/dg_${n}_off.log)"; done
echo "== async wall ms a step (GPU replay first): io / copies"
aw() { grep -oE "GPU per step \(graph replay\) [0-9.]+|async scheduling: wall per step [0-9.]+" $L/$1.log | grep -oE "[0-9.]+$" | tr '\n' ' '; }
echo "q06 $(aw q06_io)| $(aw q06_off)| $(aw q06_io2)| $(aw q06_off2)"
echo "q8 $(aw q8_io)| $(aw q8_off)"
echo "== server, Qwen3-0.6B, openai SDK: io / copies"; grep -h median $L/sr_io.log $L/sr_off.log
echo "ALL DONE"
