#!/usr/bin/env bash
# session-34 call F (prepared with no H200 lent): sliding-window attention and Gemma 3 on the device.
# 1. check cases: the window cases of prefill (classic and wgmma, every entry), the long decode kernel (plain,
#    merged, one-split, the rope entries, the early entry's table guesses past the window) and the combine;
#    Gemma 3's gelu_tanh_mul, embedding_scaled, norm_add_rmsnorm_offset and the batch-1 gate_up GEMV ending with
#    the GELU GLU (gemv_geglu); the sampler's general logit_bias (session 33, never on a GPU).
# 2. the tiny fixtures that run past their windows (and Gemma 3), GLM-4.5's (float32 router, ungated shared
#    expert: gemv/gemm_bf16_f32_unrounded, moe_shared_add without a gate, checked in 1) and LongRoPE's, on CUDA
#    against transformers' goldens.
# 3. published per-layer shapes on the device against transformers float32: Gemma-3-1B and Mistral-7B-v0.1 with
#    4 layers and 128-key windows inside the 512-token prompt; MiniMax-M2 2 of 62 layers (its reference config
#    now states partial_rotary_factor; gpu119's 0.48 was transformers 5.17 ignoring rotary_dim).
# 4. batch-1 GPU ms a step, synthetic weights: Qwen3-0.6B / 30B-A3B / 8B at 512 keys (the window argument is now
#    on the default kernels: any regression shows here), Gemma-3-1B / 4B at 512 keys, Mistral-7B-v0.1 at 8,000 keys
#    (its 4,096-key window binding) beside Mistral-7B-v0.3 there (no window), Phi-4-mini (LongRoPE) at 512 keys.
#    Phi-3.5-mini (head_dim 96, padded to 128 in the attention kernels) at 512 keys.
# Session 35 added, unrun on a GPU: head_dim 96 (a trailing proj_dim on the prefill, long decode, combine and
# partial rope entries: their cases at dh 80/96/112 in -m attention* -m rope_kv), GLM-4.5's float32 router logits
# and ungated shared expert in the fused MoE decode (`unrounded` on every fused router entry: -m moe_router
# -m moe_decode, which every MoE model's decode takes).
# Session 36 added: the decode GEMM's GeGLU epilogue (Gemma 3's batched gate_up: `-k geglu`, and every case of
# the two decode GEMM modules as the regression check of the Glu selector) in `checks`, and its A/B at Gemma-3-4B
# batch 64 x 1,536 (ATLAS_DECODE_GEMM_SWIGLU=0 restores gate_up + gelu_tanh_mul) in `steps`.
# Also session 36: gpt-oss (e2e7df53): attention sinks on prefill_attn_bf16, every decode_attn_long entry and the
# combine (-m attention -m attention_long), the MoE expert epilogue (biases, clamped SwiGLU: -m moe_decode
# -m moe_grouped -m moe_grouped_sm90), the router's logit bias (-m moe_router), the one-rounding RMSNorm
# (-m rmsnorm) and bias_add_f32_bf16 (-m bias_add); tiny-gpt-oss and gpt-oss-20b-4l (published per-layer shapes,
# made on the device) against transformers in `parity`.
# Three device calls, each under the 10-minute limit: `call.sh checks` (1), `call.sh parity` (2-3), then
# `call.sh steps` (4).
# Repo root, carry [".device", ".whl"]; .device/head_src.tgz is `git archive HEAD py tools kernels` of the call.
PART=${1:?usage: call.sh checks|parity|steps}
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
if [ "$PART" = checks ]; then
TAILN=3 t 270 checks python3 tools/gpu/check_kernels.py -m attention -m attention_sm90 -m attention_long \
  -m rope_kv -m silu_mul -m embedding -m rmsnorm -m sampler --out $R/checks.json
TAILN=3 t 180 checks_moe python3 tools/gpu/check_kernels.py -m moe_router -m moe_decode -m moe_shared \
  -m moe_grouped -m moe_grouped_sm90 -m bias_add --out $R/checks_moe.json
TAILN=3 t 120 checks_glu python3 tools/gpu/check_kernels.py -k "gemv geglu" -k "gemv swiglu" \
  -k "f32 unrounded" --out $R/checks_glu.json
TAILN=3 t 150 checks_dgemm python3 tools/gpu/check_kernels.py -m gemm_decode_sm90 -m gemm_decode_tma \
  --out $R/checks_dgemm.json
fi
if [ "$PART" = parity ]; then
for f in tiny-mistral-swa tiny-qwen2-swa tiny-gemma3 tiny-mistral tiny-glm4-moe tiny-phi3-longrope \
         tiny-phi3-d96 tiny-qwen3-moe tiny-gpt-oss; do
  TAILN=3 t 90 "tiny_$f" python3 tools/gpu/model_parity.py --backend cuda --model tests/fixtures/$f \
    --out $R/parity_$f.json
done
for c in gemma-3-1b-4l mistral-7b-v0.1-4l minimax-m2-2l gpt-oss-20b-4l; do
  TAILN=2 t 150 "mk_$c" python3 tools/make_fixtures.py --config $c --device cuda --out $C/$c
  TAILN=6 t 120 "par_$c" python3 tools/gpu/model_parity.py --backend cuda --model $C/$c --tail \
    --out $R/parity_$c.json
done
fi
if [ "$PART" = steps ]; then
b1() { PLIM=120 prof "$1" "X=1" --model $G/$2 --batch 1 --context "$3"; }
# the window argument is on the default prefill and long decode kernels: the headline steps first (gpu114-115:
# Qwen3-0.6B 0.718 ms, Qwen3-30B-A3B 2.674 ms at 512 keys)
b1 q06 qwen3-0.6b 512; b1 q30 qwen3-30b-a3b 512; b1 q8 qwen3-8b 512
b1 g1 gemma-3-1b 512; b1 g4 gemma-3-4b 512
b1 m01_8k mistral-7b-v0.1 8000; b1 m03_8k mistral-7b-v0.3 8000; b1 phi4m phi-4-mini 512
b1 phi35 phi-3.5-mini 512
b1 goss gpt-oss-20b 512  # correct-first: separate MoE launches, the long decode kernel, biases as launches
g64() { PLIM=150 prof "$1" "$2" --model $G/gemma-3-4b --batch 64 --context 1536; }
g64 g4_b64_geglu "X=1"; g64 g4_b64_unfused "ATLAS_DECODE_GEMM_SWIGLU=0"; g64 g4_b64_geglu2 "X=1"
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay), batch 1; then Gemma-3-4B b64 x 1536 GeGLU epilogue / unfused / epilogue"
for m in q06 q30 q8 g1 g4 m01_8k m03_8k phi4m phi35 goss g4_b64_geglu g4_b64_unfused g4_b64_geglu2; do
  echo "$m $(step $m)"; done
fi
echo "ALL DONE"
