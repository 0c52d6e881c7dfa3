#!/usr/bin/env bash
# session-45 call E: where the one-launch gated attention's 23 us go. The phase trace
# (tools/gpu/trace_decode_attn.py --long --gated) of Qwen3.5-35B-A3B's heads at batch 1 x 538
# keys on the plain D-256 entry and on the late gated entry's traced twin, alone, behind a
# launch of itself, behind the qkv GEMV, and in a graph between the qkv and o_proj GEMVs; the
# gated checks again (the traced twin among them only by its outputs: it has no case).
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit. Carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=2 t 120 chk python3 tools/gpu/check_kernels.py -m attention_long -k gated
TAILN=0 t 240 trace python3 tools/gpu/trace_decode_attn.py --long --gated --heads qwen3.5-35b-a3b \
  --keys 538,2048 --trace-only
grep -E "^phase|^shape|qwen3.5" $L/trace.log | cut -c1-330
echo "ALL DONE"
