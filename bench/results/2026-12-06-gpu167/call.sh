#!/usr/bin/env bash
# session-46 last call (the device time left: ~580 s; as gpu163): on an H200 only, the four gate records at
# this HEAD (call_head.sh h200_gates), then the default Qwen3-8B server's 64- and 1-stream levels;
# on another card nothing. Prepare as gpu159 (.device at this HEAD, .device/git.tar).
nvidia-smi --query-gpu=name --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 0
source tools/gpu/call_head.sh
h200_gates
grep -hE "PASS|FAIL|verdict" $L/gate_*.log | head -12 | cut -c1-200
serve qwen3-8b; tp d 64 8 64 2001 qwen3-8b; tp a 1 1 4 2004 qwen3-8b; unserve
tp_show $R/tp_a.json $R/tp_d.json
echo "ALL DONE"
