#!/usr/bin/env bash
# session-12 call 5 (lead): gate records at the final tree (behaviour-neutral commits after e962843 reopened them)
cd "$(dirname "$0")"; source ./head.sh
python3 tools/make_fixtures.py --config qwen3-8b --device cuda --out $C/qwen3-8b --no-golden > $L/ckpt8b.log 2>&1; tail -1 $L/ckpt8b.log
cp .device/qwen3-tok/tokenizer*.json $C/qwen3-8b/
(python3 -m atlas_cli.main serve $C/qwen3-8b --backend cuda --port 8897 > $L/server.log 2>&1 &) ; for i in $(seq 240); do grep -q "Listening on" $L/server.log && break; sleep 0.5; done
[ -d .git ] || cp -r .device/git .git
for g in decode-floor concurrency-sweep ttft-cold ttft-warm; do TAILN=2 t 60 gate_$g python3 -m atlas_cli.main gate record $g --url http://127.0.0.1:8897 --model qwen3-8b --checkpoint Qwen/Qwen3-8B; done
mkdir -p $R/benchmarks && cp -r .benchmarks/. $R/benchmarks/; pack
pkill -f "atlas_cli.main serve"
