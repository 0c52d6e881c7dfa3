#!/usr/bin/env bash
# session-35 call C: where batch-1 decode attention's ~8.5-11.3 us a layer goes (issues 10, 15), and the kernel
# table rows issue 15 names that gpu120 prepared (prefill GEMM, decode attention) on the current tree.
# 1. phase trace of the default batch-1 entry (decode_attn_long_rope_early_bf16's traced twin) at the head
#    geometries of Qwen3-0.6B (16/8), Qwen2.5-1.5B (12/2, group 6: 11.3 us a layer at gpu119) and Qwen3-30B-A3B
#    (32/4), 512 keys: alone, behind itself, behind the qkv GEMV and inside a graph of GEMV-attention-GEMV layers.
# 2. kernel table: the prefill GEMM rows and the decode attention rows (batch 1..64, histories 512..32k) against
#    PyTorch on the same device.
# Repo root, carry [".device", ".whl"]; .device/head_src.tgz is `git archive HEAD py tools kernels` of the call.
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
TAILN=60 t 150 trace python3 tools/gpu/trace_decode_attn.py --long --trace-only --keys 512 \
  --heads qwen3-0.6b,qwen2.5-1.5b,qwen3-30b-a3b
KLIM=120 kt pgemm "" -k prefill_gemm
KLIM=200 kt dattn "" -k "decode_attention qwen3-8b" -k "decode_attention_rope qwen3-8b" \
  -k "qwen2.5-1.5b b1 hist512 latency"
echo "ALL DONE"
