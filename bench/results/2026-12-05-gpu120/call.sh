#!/usr/bin/env bash
# session-33 call C: the kernel table rows issue 15 names (every row >= 1.0x PyTorch or explained), re-measured on
# the current tree (the last full table ran 2026-11-30 on 89 shapes): the prefill GEMM, the decode attention
# (batch 1..64, histories 512..32k) and the 16..256-row decode GEMM against torch.mm (cuBLAS).
# Repo root, carry [".device", ".whl"]; .device/head_src.tgz is `git archive HEAD py tools kernels` of the call.
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
KLIM=120 kt pgemm "" -k prefill_gemm
KLIM=200 kt dattn "" -k "decode_attention qwen3-8b" -k "decode_attention_rope qwen3-8b"
KLIM=200 kt dgemm "" -k "decode_gemm_sm90 qwen3-8b qkv b16 m=" \
  -k "decode_gemm_sm90 qwen3-8b o_proj b16 m=" \
  -k "decode_gemm_sm90 qwen3-8b gate_up b16 m=" \
  -k "decode_gemm_sm90 qwen3-8b down b16 m=" \
  -k "decode_gemm_sm90 qwen3-8b gate_up+swiglu b16 m=" \
  -k "decode_gemm_sm90 qwen3-8b qkv b64 m=" \
  -k "decode_gemm_sm90 qwen3-8b o_proj b64 m=" \
  -k "decode_gemm_sm90 qwen3-8b gate_up b64 m=" \
  -k "decode_gemm_sm90 qwen3-8b down b64 m=" \
  -k "decode_gemm_sm90 qwen3-8b gate_up+swiglu b64 m=" \
  -k "decode_gemm_sm90 qwen3-8b qkv b256 m=" \
  -k "decode_gemm_sm90 qwen3-8b o_proj b256 m=" \
  -k "decode_gemm_sm90 qwen3-8b gate_up b256 m=" \
  -k "decode_gemm_sm90 qwen3-8b down b256 m=" \
  -k "decode_gemm_sm90 qwen3-8b gate_up+swiglu b256 m="
echo "ALL DONE"
