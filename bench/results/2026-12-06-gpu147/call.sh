#!/usr/bin/env bash
# session-43 calls E and F (the device time left: ~530 s, then ~410 s): on an H200 only, the four
# gate records at this HEAD, then Qwen3-8B batch 1 with the SwiGLU rows default and at 4 rows;
# on another card nothing (the bars and BENCH.toml's thresholds are the H200's). Call E (at
# 8c59c64) and call F both came to an H100.
# Prepare: as gpu145's. Repo root, carry [".device", ".whl"].
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { nvidia-smi --query-gpu=name \
  --format=csv,noheader; echo "not an H200: nothing to do"; exit 0; }
source tools/gpu/call_head.sh
h200_gates
b1 q8_def X=1 $G/qwen3-8b; b1 q8_s4 ATLAS_GEMV_SWIGLU_ROWS=4 $G/qwen3-8b
echo "ALL DONE"
