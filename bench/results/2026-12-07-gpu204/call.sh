#!/usr/bin/env bash
# session 59, any card (~4 min): where the server's time to first token goes. profile_ttft
# on Qwen3-8B (synthetic weights, the server's limits): the ttft-warm request (2,000 words
# cached, a question after), a cold one and 12-word prompts, through the engine core alone
# and through serve() over HTTP from another process (per-request marks: submit, schedule,
# launch, collect, outputs routed), again at a 0.5 ms GIL switch interval; then one-step
# prefill profiles of the warm request and of a 16-token prompt.
# Prepare: git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
cp .device/qwen3-tok/tokenizer*.json $G/qwen3-8b/
TAILN=0 t 330 ttft python3 tools/gpu/profile_ttft.py --model $G/qwen3-8b --synthetic-seed 0 \
  --switch-intervals 0.0005 --out $R/ttft.json
TAILN=0 t 90 pf_warm python3 tools/gpu/profile_prefill.py --model $G/qwen3-8b --synthetic-seed 0 \
  --tokens 24 --cached 2040 --out $R/pf_warm.json
TAILN=0 t 90 pf_16 python3 tools/gpu/profile_prefill.py --model $G/qwen3-8b --synthetic-seed 0 \
  --tokens 16 --out $R/pf_16.json
grep -v "request finished\|^\s*$" $L/ttft.log | cut -c1-160
for n in pf_warm pf_16; do grep -A12 "^== " $L/$n.log | cut -c1-100; done
echo "ALL DONE"
