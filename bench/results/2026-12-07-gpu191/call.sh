#!/usr/bin/env bash
# Session 54 (an H100 came): the batch-1 early decode attention entries' phase trace at HEAD
# (f8895f4e), 512 keys, alone / back to back / behind the qkv GEMV / in a graph between the
# qkv and o_proj GEMVs, for Qwen3-30B-A3B (group 8), Qwen3-0.6B and Qwen3-8B.
rm -rf py tools kernels && tar xzf .device/head_src.tgz && source tools/gpu/call_head.sh \
  && nvidia-smi --query-gpu=name --format=csv,noheader \
  && TAILN=70 t 240 tr python3 tools/gpu/trace_decode_attn.py --long \
       --heads qwen3-30b-a3b,qwen3-0.6b,qwen3-8b --keys 512 --trace-only --model qwen3-30b-a3b
