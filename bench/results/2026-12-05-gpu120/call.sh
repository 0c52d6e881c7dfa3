#!/usr/bin/env bash
# session-33 call C: (1) MiniMax-M2 2 of 62 layers at its published shape against transformers again, the config
# now stating partial_rotary_factor beside rotary_dim (gpu119's cosine 0.48 was transformers 5.17 rotating whole
# heads: it ignores the legacy rotary_dim; reproduced on the CPU); (2) the kernel table rows issue 15 names (every
# row >= 1.0x PyTorch or explained), re-measured on the current tree (the last full table ran 2026-11-30 on 89
# shapes): the prefill GEMM and attention, the decode attention (batch 1..64, histories 512..32k) and the 16..256-row
# decode GEMM against torch.mm (cuBLAS).
# Also the sampler's check cases and a Qwen3-0.6B batch-1 profile after the sampler change (general logit_bias
# values, 88b8a563: apply_penalties_f32 gained the bias tables; gpu118 measured 0.718 ms a step before it).
# Repo root, carry [".device", ".whl"]. .device/head_src.tgz: `git archive HEAD py tools kernels` made with the
# call (the working tree may hold a helper's uncommitted edits, which must not meet the carried PTX).
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
TAILN=3 t 120 checks python3 tools/gpu/check_kernels.py -m sampler --out $R/checks.json
TAILN=2 t 150 mk_mm2 python3 tools/make_fixtures.py --config minimax-m2-2l --device cuda --out $C/minimax-m2-2l
TAILN=6 t 120 par_mm2 python3 tools/gpu/model_parity.py --backend cuda --model $C/minimax-m2-2l --tail \
  --out $R/parity_minimax-m2-2l.json
rm -rf "${C:?}/minimax-m2-2l"
PLIM=90 prof d06 "X=1" --model $G/qwen3-0.6b --batch 1 --context 512
KLIM=150 kt pgemm "" -k prefill_gemm
KLIM=150 kt pattn "" -k "prefill_attention qwen3-8b"
KLIM=150 kt dattn "" -k "decode_attention qwen3-8b" -k "decode_attention_rope qwen3-8b"
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
