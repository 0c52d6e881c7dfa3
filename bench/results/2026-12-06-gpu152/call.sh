#!/usr/bin/env bash
# session-44 call E: on an H200, the standings with this session's defaults (stream-K among
# the decode GEMM tuner's candidates, the prefill GEMM's gated entries): gpu137's call (default
# servers, the 1..64 throughput sweep, batch 1 of every config, the gate records). On an H100,
# the contest-shaped 64-stream level of the default Qwen3-8B server against the same server
# with both switched off (ATLAS_DECODE_GEMM_STREAMK=0 ATLAS_GEMM_SWIGLU=0), default again.
# Prepare as gpu148 (.device at this HEAD, with .device/git.tar). Carry [".device", ".whl"].
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-05-gpu137/call.sh
fi
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
ckpt qwen3-8b
serve qwen3-8b; tp on1 64 8 64 2001 qwen3-8b; unserve
serve qwen3-8b ATLAS_DECODE_GEMM_STREAMK=0 ATLAS_GEMM_SWIGLU=0; tp off 64 8 64 2001 qwen3-8b; unserve
serve qwen3-8b; tp on2 64 8 64 2001 qwen3-8b; unserve
for n in on1 off on2; do echo "-- $n"; tp_show $R/tp_$n.json; done
echo "ALL DONE"
