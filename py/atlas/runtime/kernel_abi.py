"""Every CUDA entry point Atlas launches, with its parameter list: the kernel ABI.

One table, read by the ops launch builders, the host reference kernels, the mock backend
and the GPU check script. A `.cu` file in any leaf that defines one of these functions
must take exactly these parameters, in this order. Layouts (all row-major, contiguous):

* activations and weights are bf16; logits are f32; token ids, positions, slots are i32.
* GEMV/GEMM weights are [N, K] (PyTorch Linear layout): y[m, n] = sum_k x[m, k] * w[n, k];
  the *_f32 variants (logits) store the bf16-rounded result widened to f32.
* the paged KV cache is one K and one V pool per layer, each [num_blocks, hkv, block_size,
  head_dim]; a token's slot is block_id * block_size + offset; a negative slot is not written.
* block_tables is i32 [num_seqs, max_blocks]; kv_lens is i32 [num_seqs], the number of
  cached tokens of each sequence after this step's append.
* cos_sin is f32 [max_positions, head_dim]: cos of the head_dim/2 frequencies, then sin.
* proj_dim (on the entries that take it): a head's length in the projections, <= head_dim.
  A model whose head dim no attention kernel is built for (Phi-3-mini's 96) attends at a
  padded head_dim (ops.attention.padded_head_dim): its cache rows and rotated q rows are
  [head_dim], the proj_dim elements then zeros, while the qkv rows it reads ([tokens,
  (hq + 2 hkv) * proj_dim]) and the attention rows it writes ([tokens, hq * proj_dim], the
  o_proj's input) stay compact. proj_dim == head_dim: no padding.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .gpu import KernelSig

S = KernelSig.of

# --- normalization -----------------------------------------------------------------------
RMSNORM = S("rmsnorm", "rmsnorm_bf16", "x:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
# the same over rows of `dim` that start `pitch` elements apart, in place allowed (x == out):
# a segment of a wider row (MiniMax-M2's q or k part of the fused [q | k | v] projection)
RMSNORM_PITCHED = S("rmsnorm", "rmsnorm_pitched_bf16",
                    "x:ptr w:ptr out:ptr rows:u32 dim:u32 pitch:u32 eps:f32")
ADD_RMSNORM = S("rmsnorm", "add_rmsnorm_bf16",
                "residual:ptr delta:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
# the same with zero-centred weights (Qwen3.5/Qwen3-Next): out = bf16(r * rsqrt(mean(r^2) +
# eps) * (1 + w)), all in f32 with one rounding (transformers' Qwen3_5RMSNorm)
RMSNORM_OFFSET = S("rmsnorm", "rmsnorm_offset_bf16",
                   "x:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
ADD_RMSNORM_OFFSET = S("rmsnorm", "add_rmsnorm_offset_bf16",
                       "residual:ptr delta:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
# Gemma 3's residual step: delta normalized by its own zero-centred weights (the sublayer's
# output norm, one rounding), then ADD_RMSNORM_OFFSET (rmsnorm.cu)
NORM_ADD_RMSNORM_OFFSET = S("rmsnorm", "norm_add_rmsnorm_offset_bf16",
                            "residual:ptr delta:ptr w_delta:ptr w:ptr out:ptr rows:u32 dim:u32 "
                            "eps:f32")
# the two add + norms letting the next kernel launch before their PDL wait
# (ops/early_trigger.py): the same values
ADD_RMSNORM_EARLY = S("rmsnorm", "add_rmsnorm_early_bf16",
                      "residual:ptr delta:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
ADD_RMSNORM_OFFSET_EARLY = S("rmsnorm", "add_rmsnorm_offset_early_bf16",
                             "residual:ptr delta:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
# ... and the two letting it launch only once their rows have landed (ops/norm.py
# norm_triggers_late): the same values
ADD_RMSNORM_LATE = S("rmsnorm", "add_rmsnorm_late_bf16",
                     "residual:ptr delta:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
ADD_RMSNORM_OFFSET_LATE = S("rmsnorm", "add_rmsnorm_offset_late_bf16",
                            "residual:ptr delta:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
# the plain weight times the f32 normalized row, one rounding: out = bf16(w * (r * rsqrt(
# mean(r^2) + eps))) (gpt-oss's GptOssRMSNorm); RMSNORM, ADD_RMSNORM and its early twin's shape
RMSNORM_ONEROUND = S("rmsnorm", "rmsnorm_oneround_bf16",
                     "x:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
ADD_RMSNORM_ONEROUND = S("rmsnorm", "add_rmsnorm_oneround_bf16",
                         "residual:ptr delta:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
ADD_RMSNORM_ONEROUND_EARLY = S("rmsnorm", "add_rmsnorm_oneround_early_bf16",
                               "residual:ptr delta:ptr w:ptr out:ptr rows:u32 dim:u32 eps:f32")
# the step's first norm with its embedding lookup (rmsnorm.cu embed_rmsnorm_*): residual[i] =
# bf16(table[ids[i]] * scale) (a zero row for an id outside [0, vocab)), out[i] = the plain /
# offset / one-rounding norm of it: EMBEDDING(_SCALED) then RMSNORM(_OFFSET, _ONEROUND); the
# *_late_* twins trigger once the row has landed (ops/norm.py norm_triggers_late)
_EMBED_RMSNORM_ARGS = ("ids:ptr table:ptr residual:ptr w:ptr out:ptr rows:u32 dim:u32 "
                       "vocab:u32 scale:f32 eps:f32")
EMBED_RMSNORM = S("rmsnorm", "embed_rmsnorm_bf16", _EMBED_RMSNORM_ARGS)
EMBED_RMSNORM_OFFSET = S("rmsnorm", "embed_rmsnorm_offset_bf16", _EMBED_RMSNORM_ARGS)
EMBED_RMSNORM_ONEROUND = S("rmsnorm", "embed_rmsnorm_oneround_bf16", _EMBED_RMSNORM_ARGS)
EMBED_RMSNORM_LATE = S("rmsnorm", "embed_rmsnorm_late_bf16", _EMBED_RMSNORM_ARGS)
EMBED_RMSNORM_OFFSET_LATE = S("rmsnorm", "embed_rmsnorm_offset_late_bf16", _EMBED_RMSNORM_ARGS)
# Gated-DeltaNet output norm (gated_rmsnorm.cu): per (token, head) row of `dim`,
# out = bf16(bf16(w * bf16(x * rsqrt(mean(x^2) + eps))) * silu(f32 z)); x and out are
# [tokens, heads * dim], z's (t, h) row starts at z + t * z_pitch + h * dim (elements).
GATED_RMSNORM = S("gated_rmsnorm", "gated_rmsnorm_bf16",
                  "x:ptr z:ptr z_pitch:u32 w:ptr out:ptr tokens:u32 heads:u32 dim:u32 eps:f32")

# --- activation, embedding, argmax -------------------------------------------------------
SILU_MUL = S("silu_mul", "silu_mul_bf16", "gate_up:ptr out:ptr rows:u32 inter:u32")
# the same values, letting the down projection launch before its PDL wait (ops/early_trigger.py)
SILU_MUL_EARLY = S("silu_mul", "silu_mul_early_bf16", "gate_up:ptr out:ptr rows:u32 inter:u32")
# GeGLU: bf16(bf16(gelu_tanh(gate)) * up), Gemma's `gelu_pytorch_tanh` MLP, the same layout
GELU_TANH_MUL = S("silu_mul", "gelu_tanh_mul_bf16", "gate_up:ptr out:ptr rows:u32 inter:u32")
# x [rows, n] += bias [n] in place, in f32 with one bf16 rounding (bias_add.cu)
BIAS_ADD = S("bias_add", "bias_add_bf16", "x:ptr bias:ptr rows:u32 n:u32")
# out bf16 [rows, n] = bf16(x[r, c] + bias[c]): the float32 sums of a projection x f32 [rows, n]
# (GEMV/GEMM_F32_UNROUNDED's) plus its bf16 bias, rounded once, as transformers' bf16 Linear
# with a bias rounds (gpt-oss, whose attention projections are sensitive to a second rounding)
BIAS_ADD_F32 = S("bias_add", "bias_add_f32_bf16", "x:ptr bias:ptr out:ptr rows:u32 n:u32")
EMBEDDING = S("embedding", "embedding_bf16", "ids:ptr table:ptr out:ptr n:u32 dim:u32 vocab:u32")
# the same rows times `scale`, one bf16 rounding (Gemma's embedding * bf16(sqrt(hidden)))
EMBEDDING_SCALED = S("embedding", "embedding_scaled_bf16",
                     "ids:ptr table:ptr out:ptr n:u32 dim:u32 vocab:u32 scale:f32")
# argmax splits a row over blocks: partials is scratch (8 bytes per block, ops.argmax sizes
# it); counters u32 [rows] must be zero before a launch and are left zero after it.
ARGMAX = S("argmax", "argmax_f32", "logits:ptr out:ptr partials:ptr counters:ptr rows:u32 n:u32")

# --- matrix products ---------------------------------------------------------------------
GEMV = S("gemv", "gemv_bf16", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
GEMV_F32OUT = S("gemv", "gemv_bf16_f32", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
# the same products for m == 1 only (batch-1 decode): compiled without the 8-row
# accumulators, so it needs a third of the registers and keeps more loads in flight
GEMV_SINGLE = S("gemv", "gemv_bf16_single", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
# ... capped at 48 registers: a block more an SM, taken where that saves a wave (ops/matmul)
GEMV_LEAN_SINGLE = S("gemv", "gemv_bf16_lean_single", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
# ... plus a bias [n] added to its bf16 output and rounded again: GEMV_SINGLE followed by
# BIAS_ADD, bit for bit (batch 1's q/k/v projection with Qwen2-family biases)
GEMV_BIAS_SINGLE = S("gemv", "gemv_bias_bf16_single",
                     "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32 bias:ptr")
GEMV_SINGLE_F32OUT = S("gemv", "gemv_bf16_f32_single", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
# the float32 sums themselves, not bf16-rounded (1..8 rows): the router of a model whose gate
# transformers keeps in float32 (GLM-4.5; ops/matmul.py linear_f32_unrounded)
GEMV_F32_UNROUNDED = S("gemv", "gemv_bf16_f32_unrounded", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
# the MLP down projection with SwiGLU fused into its x load: gate_up is bf16 [m, 2k] =
# [gate | up] and the product's x[i, j] = bf16(bf16(silu(gate[i, j])) * up[i, j]), exactly
# SILU_MUL's output, so these equal SILU_MUL followed by GEMV / GEMV_SINGLE (m <= 8)
GEMV_SILU = S("gemv", "gemv_silu_bf16", "gate_up:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
GEMV_SILU_SINGLE = S("gemv", "gemv_silu_bf16_single",
                     "gate_up:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
# the same products for 1..8 rows with the weights streamed through a per-thread cp.async
# ring in dynamic shared memory (gemv_ring.cuh), bit for bit GEMV's / GEMV_SILU's sums:
# `stages` tiles per thread (2..3, ops/matmul.py gemv_ring_plan). The default for 2..8 rows
# (ATLAS_GEMV_RING=0: GEMV, GEMV_F32OUT, GEMV_SILU)
GEMV_RING = S("gemv", "gemv_ring_bf16", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32 stages:u32")
GEMV_RING_F32OUT = S("gemv", "gemv_ring_bf16_f32",
                     "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32 stages:u32")
GEMV_RING_SILU = S("gemv", "gemv_ring_silu_bf16",
                   "gate_up:ptr w:ptr y:ptr m:u32 n:u32 k:u32 stages:u32")
# batch 1's o_proj of gated full attention with ATTN_GATE applied to x on load (one row):
# x[h * head_dim + d] = ATTN_GATE's output for the gate of head h at gate + h * head_pitch,
# then GEMV_SINGLE's product (y)
GEMV_ATTN_GATE_SINGLE = S("gemv", "gemv_attn_gate_bf16_single",
                          "x:ptr gate:ptr w:ptr y:ptr n:u32 k:u32 head_dim:u32 head_pitch:u32")
# batch 1's fused [gate | up] product [n, k] ending with its SwiGLU (one row, n even): act
# [1, n / 2] = SILU_MUL of the product's [gate | up] output, bit for bit GEMV_SINGLE followed
# by SILU_MUL
# ... the two in 8-row blocks (ATLAS_GEMV_ROWS=8): the same bits
GEMV_X8_SINGLE = S("gemv", "gemv_bf16_x8_single", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
GEMV_SWIGLU_X8_SINGLE = S("gemv", "gemv_swiglu_bf16_x8_single",
                          "x:ptr w:ptr act:ptr m:u32 n:u32 k:u32")
# ... the SwiGLU one capped at 96 registers for blocks under 256 threads (more blocks an SM)
GEMV_SWIGLU_X8N_SINGLE = S("gemv", "gemv_swiglu_bf16_x8n_single",
                           "x:ptr w:ptr act:ptr m:u32 n:u32 k:u32")
GEMV_SWIGLU_SINGLE = S("gemv", "gemv_swiglu_bf16_single",
                       "x:ptr w:ptr act:ptr m:u32 n:u32 k:u32")
# ... ending with the tanh-GELU GLU (Gemma 3): GEMV_SINGLE followed by GELU_TANH_MUL
GEMV_GEGLU_SINGLE = S("gemv", "gemv_geglu_bf16_single", "x:ptr w:ptr act:ptr m:u32 n:u32 k:u32")
GEMM = S("gemm", "gemm_bf16", "a:ptr w:ptr c:ptr m:u32 n:u32 k:u32")
GEMM_F32OUT = S("gemm", "gemm_bf16_f32", "a:ptr w:ptr c:ptr m:u32 n:u32 k:u32")
# ... its float32 sums not bf16-rounded (GEMV_F32_UNROUNDED for more than 8 rows)
GEMM_F32_UNROUNDED = S("gemm", "gemm_bf16_f32_unrounded", "a:ptr w:ptr c:ptr m:u32 n:u32 k:u32")
# the same products with a 64x32 tile, for few rows (decode batches > 8): more blocks
# stream the weights in parallel than the 128x128 tile would give
GEMM_SKINNY = S("gemm", "gemm_bf16_skinny", "a:ptr w:ptr c:ptr m:u32 n:u32 k:u32")
GEMM_SKINNY_F32OUT = S("gemm", "gemm_bf16_f32_skinny", "a:ptr w:ptr c:ptr m:u32 n:u32 k:u32")
# the same products for decode batches of 1..64 rows on tensor cores (weights as the MMA's M
# dimension, streamed once like the GEMV; hopper only: gb10 has no gemv_mma module)
GEMV_MMA = S("gemv_mma", "gemv_mma_bf16", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
GEMV_MMA_F32OUT = S("gemv_mma", "gemv_mma_bf16_f32", "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32")
# the same products for decode batches of 1..256 rows on Hopper wgmma (kernels/hopper/common/
# gemm_decode_sm90.cu, sm_90a only): the weight as wgmma's M = 64 operand, streamed once. The
# *_splitS entries are compiled for S-block clusters that split K and sum the partials through
# distributed shared memory; their grid is ceil(n / 64) * S (ops/matmul_decode.py). l2_tiles:
# k-tiles of each block's weight rows kept prefetched into L2 ahead of its ring (0: none)
_DECODE_GEMM = "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32 l2_tiles:u32"
GEMM_DECODE_SM90 = S("gemm_decode_sm90", "gemm_decode_sm90_bf16", _DECODE_GEMM)
GEMM_DECODE_SM90_F32OUT = S("gemm_decode_sm90", "gemm_decode_sm90_bf16_f32", _DECODE_GEMM)
GEMM_DECODE_SM90_SPLIT2 = S("gemm_decode_sm90", "gemm_decode_sm90_bf16_split2", _DECODE_GEMM)
GEMM_DECODE_SM90_F32OUT_SPLIT2 = S("gemm_decode_sm90", "gemm_decode_sm90_bf16_f32_split2",
                                   _DECODE_GEMM)
GEMM_DECODE_SM90_SPLIT4 = S("gemm_decode_sm90", "gemm_decode_sm90_bf16_split4", _DECODE_GEMM)
GEMM_DECODE_SM90_F32OUT_SPLIT4 = S("gemm_decode_sm90", "gemm_decode_sm90_bf16_f32_split4",
                                   _DECODE_GEMM)
GEMM_DECODE_SM90_SPLIT8 = S("gemm_decode_sm90", "gemm_decode_sm90_bf16_split8", _DECODE_GEMM)
GEMM_DECODE_SM90_F32OUT_SPLIT8 = S("gemm_decode_sm90", "gemm_decode_sm90_bf16_f32_split8",
                                   _DECODE_GEMM)
# the gate_up projection ending with its SwiGLU: w the fused [gate | up] weight [n, k] (n even),
# act [m, n / 2] = silu_mul of the unfused product; grid ceil(n / 128) * S (two gate/up rows
# a column pair: ops/matmul_decode.py)
_DECODE_SWIGLU = "x:ptr w:ptr act:ptr m:u32 n:u32 k:u32 l2_tiles:u32"
GEMM_DECODE_SM90_SWIGLU = S("gemm_decode_sm90", "gemm_decode_sm90_swiglu_bf16", _DECODE_SWIGLU)
GEMM_DECODE_SM90_SWIGLU_SPLIT2 = S("gemm_decode_sm90", "gemm_decode_sm90_swiglu_bf16_split2",
                                   _DECODE_SWIGLU)
GEMM_DECODE_SM90_SWIGLU_SPLIT4 = S("gemm_decode_sm90", "gemm_decode_sm90_swiglu_bf16_split4",
                                   _DECODE_SWIGLU)
GEMM_DECODE_SM90_SWIGLU_SPLIT8 = S("gemm_decode_sm90", "gemm_decode_sm90_swiglu_bf16_split8",
                                   _DECODE_SWIGLU)
# the same products (and SwiGLU entries) with the operands streamed by the TMA unit
# (kernels/hopper/common/gemm_decode_tma.cu, sm_90a only): wmap / xmap are tensor maps over w
# [n][k] and x [m][k] (GpuBackend.tensor_map_2d; ops/matmul_decode.py encodes them once per
# buffer and box); the kernel reads x and w only through them, the host reference through x
# and w. y is act [m, n / 2] for the SwiGLU entries. Grid ceil(n / (64 G)) * S, 128 G + 32
# threads (a producer warp past the warpgroups)
_DECODE_TMA = "x:ptr w:ptr y:ptr m:u32 n:u32 k:u32 wmap:tmap xmap:tmap"
GEMM_DECODE_TMA = S("gemm_decode_tma", "gemm_decode_tma_bf16", _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32", _DECODE_TMA)
GEMM_DECODE_TMA_SPLIT2 = S("gemm_decode_tma", "gemm_decode_tma_bf16_split2", _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT_SPLIT2 = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32_split2",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SPLIT4 = S("gemm_decode_tma", "gemm_decode_tma_bf16_split4", _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT_SPLIT4 = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32_split4",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SPLIT8 = S("gemm_decode_tma", "gemm_decode_tma_bf16_split8", _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT_SPLIT8 = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32_split8",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16", _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU_SPLIT2 = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_split2",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU_SPLIT4 = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_split4",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU_SPLIT8 = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_split8",
                                  _DECODE_TMA)
# ... and at the cluster sizes between the powers of two (the TMA kernel only: a narrow
# projection's tiles x S then come closer to the blocks the device holds)
GEMM_DECODE_TMA_SPLIT3 = S("gemm_decode_tma", "gemm_decode_tma_bf16_split3", _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT_SPLIT3 = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32_split3",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU_SPLIT3 = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_split3",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SPLIT5 = S("gemm_decode_tma", "gemm_decode_tma_bf16_split5", _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT_SPLIT5 = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32_split5",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU_SPLIT5 = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_split5",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SPLIT6 = S("gemm_decode_tma", "gemm_decode_tma_bf16_split6", _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT_SPLIT6 = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32_split6",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU_SPLIT6 = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_split6",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SPLIT7 = S("gemm_decode_tma", "gemm_decode_tma_bf16_split7", _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT_SPLIT7 = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32_split7",
                                  _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU_SPLIT7 = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_split7",
                                  _DECODE_TMA)
# ... persistent (the unsplit and split-2 grids that run several waves): grid C x S for C
# clusters the device holds at once, each looping over tiles c, c + C, ... (gemm_decode_tma.cu
# header; ops/matmul_decode.py persistent_grid), the same products bit for bit
GEMM_DECODE_TMA_PERSISTENT = S("gemm_decode_tma", "gemm_decode_tma_bf16_persistent",
                               _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT_PERSISTENT = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32_persistent",
                                      _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU_PERSISTENT = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_persistent",
                                      _DECODE_TMA)
GEMM_DECODE_TMA_PERSISTENT_SPLIT2 = S("gemm_decode_tma", "gemm_decode_tma_bf16_persistent_split2",
                                      _DECODE_TMA)
GEMM_DECODE_TMA_F32OUT_PERSISTENT_SPLIT2 = S(
    "gemm_decode_tma", "gemm_decode_tma_bf16_f32_persistent_split2", _DECODE_TMA)
GEMM_DECODE_TMA_SWIGLU_PERSISTENT_SPLIT2 = S(
    "gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_persistent_split2", _DECODE_TMA)
# stream-K (gemm_decode_tma.cu "Stream-K"): one block per resident slot over an equal share of
# the (tile, k-tile) units; work f32 [blocks][cols / 2][threads] partials and flags u32
# [blocks] (0 between launches), ops/matmul_decode.py streamk_workspace
_DECODE_TMA_STREAMK = _DECODE_TMA + " work:ptr flags:ptr"
GEMM_DECODE_TMA_STREAMK = S("gemm_decode_tma", "gemm_decode_tma_bf16_streamk",
                            _DECODE_TMA_STREAMK)
GEMM_DECODE_TMA_F32OUT_STREAMK = S("gemm_decode_tma", "gemm_decode_tma_bf16_f32_streamk",
                                   _DECODE_TMA_STREAMK)
GEMM_DECODE_TMA_SWIGLU_STREAMK = S("gemm_decode_tma", "gemm_decode_tma_swiglu_bf16_streamk",
                                   _DECODE_TMA_STREAMK)


def geglu_twin(swiglu: KernelSig) -> KernelSig:
    """The decode GEMM entry ending with the tanh-GELU GLU (Gemma 3's gelu_pytorch_tanh) in
    place of the SwiGLU entry `swiglu`: act = gelu_tanh_mul of the unfused product, the same
    parameters, grid and threads (gemm_decode_tile.cuh Glu::kGeglu)."""
    return replace(swiglu, func=swiglu.func.replace("_swiglu_", "_geglu_"))


# ... ending with the tanh-GELU GLU instead (Gemma 3): every SwiGLU entry's geglu_twin
GEMM_DECODE_SM90_GEGLU = geglu_twin(GEMM_DECODE_SM90_SWIGLU)
GEMM_DECODE_SM90_GEGLU_SPLIT2 = geglu_twin(GEMM_DECODE_SM90_SWIGLU_SPLIT2)
GEMM_DECODE_SM90_GEGLU_SPLIT4 = geglu_twin(GEMM_DECODE_SM90_SWIGLU_SPLIT4)
GEMM_DECODE_SM90_GEGLU_SPLIT8 = geglu_twin(GEMM_DECODE_SM90_SWIGLU_SPLIT8)
GEMM_DECODE_TMA_GEGLU = geglu_twin(GEMM_DECODE_TMA_SWIGLU)
GEMM_DECODE_TMA_GEGLU_SPLIT2 = geglu_twin(GEMM_DECODE_TMA_SWIGLU_SPLIT2)
GEMM_DECODE_TMA_GEGLU_SPLIT3 = geglu_twin(GEMM_DECODE_TMA_SWIGLU_SPLIT3)
GEMM_DECODE_TMA_GEGLU_SPLIT4 = geglu_twin(GEMM_DECODE_TMA_SWIGLU_SPLIT4)
GEMM_DECODE_TMA_GEGLU_SPLIT5 = geglu_twin(GEMM_DECODE_TMA_SWIGLU_SPLIT5)
GEMM_DECODE_TMA_GEGLU_SPLIT6 = geglu_twin(GEMM_DECODE_TMA_SWIGLU_SPLIT6)
GEMM_DECODE_TMA_GEGLU_SPLIT7 = geglu_twin(GEMM_DECODE_TMA_SWIGLU_SPLIT7)
GEMM_DECODE_TMA_GEGLU_SPLIT8 = geglu_twin(GEMM_DECODE_TMA_SWIGLU_SPLIT8)
GEMM_DECODE_TMA_GEGLU_PERSISTENT = geglu_twin(GEMM_DECODE_TMA_SWIGLU_PERSISTENT)
GEMM_DECODE_TMA_GEGLU_PERSISTENT_SPLIT2 = geglu_twin(GEMM_DECODE_TMA_SWIGLU_PERSISTENT_SPLIT2)
GEMM_DECODE_TMA_GEGLU_STREAMK = geglu_twin(GEMM_DECODE_TMA_SWIGLU_STREAMK)
# FP8 E4M3 weights [N, K] (one byte each) with f32 scales under the index map
# scale[(n >> row_shift) * row_stride + (k >> col_shift) * col_stride] (block, per-channel or
# per-tensor layouts; ops/matmul_quant.py builds the map), dequantized in registers.
_FP8_SCALE = ("scale:ptr y:ptr m:u32 n:u32 k:u32 row_shift:u32 row_stride:u32 col_shift:u32 "
              "col_stride:u32")
GEMV_FP8 = S("gemv_fp8", "gemv_fp8_bf16", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_FP8_SINGLE = S("gemv_fp8", "gemv_fp8_bf16_single", "x:ptr w:ptr " + _FP8_SCALE)
# ... m == 1 decoded by the hardware E4M3 convert (the batch-1 route, ATLAS_QUANT_FP8_CORE)
GEMV_FP8_CVT_SINGLE = S("gemv_fp8", "gemv_fp8_cvt_bf16_single", "x:ptr w:ptr " + _FP8_SCALE)
# ... the bf16 and SwiGLU products in 8-row blocks (ATLAS_GEMV_ROWS=8): the same bits
GEMV_FP8_CVT_X8_SINGLE = S("gemv_fp8", "gemv_fp8_cvt_x8_single", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_FP8_CVT_SWIGLU_X8_SINGLE = S("gemv_fp8", "gemv_fp8_cvt_swiglu_x8_single",
                                  "x:ptr w:ptr " + _FP8_SCALE)
# ... f32 logits (a quantized LM head: the bf16-rounded sums widened; y f32)
GEMV_FP8_CVT_F32_SINGLE = S("gemv_fp8", "gemv_fp8_cvt_f32_single", "x:ptr w:ptr " + _FP8_SCALE)
# ... and the fused [gate | up] product ending with its SwiGLU (y the activation [1, n / 2])
GEMV_FP8_CVT_SWIGLU_SINGLE = S("gemv_fp8", "gemv_fp8_cvt_swiglu_bf16_single",
                               "x:ptr w:ptr " + _FP8_SCALE)
# ... m == 1 on packed half-precision FMAs (ATLAS_QUANT_FP8_H2): y bf16, f32 logits (the
# bf16-rounded sums widened), and the fused [gate | up] product ending with its SwiGLU (y the
# activation [1, n / 2])
GEMV_FP8_H2 = S("gemv_fp8", "gemv_fp8_h2_bf16", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_FP8_H2_F32 = S("gemv_fp8", "gemv_fp8_h2_f32", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_FP8_H2_SWIGLU = S("gemv_fp8", "gemv_fp8_h2_swiglu_bf16", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_SILU_FP8 = S("gemv_fp8", "gemv_silu_fp8_bf16", "gate_up:ptr w:ptr " + _FP8_SCALE)
GEMV_SILU_FP8_SINGLE = S("gemv_fp8", "gemv_silu_fp8_bf16_single",
                         "gate_up:ptr w:ptr " + _FP8_SCALE)
# ... 1..8 rows on Hopper's FP8 tensor cores (kernels/hopper/common/gemm_decode_fp8.cu, sm_90a
# only; ops/matmul_fp8_wgmma.py): the same products, f32 logits and [gate | up] -> SwiGLU
# activation ([m, n / 2]) as the GEMVs above; wmap is the tensor map of the codes seen as a
# bf16 matrix [n][k / 2] ([64][64] boxes; [32][64] for SwiGLU). Grid ceil(n / 64) * S (the
# *_splitS entries: clusters of S blocks over K), 160 threads
_FP8_DECODE = "x:ptr w:ptr " + _FP8_SCALE + " wmap:tmap"
GEMM_DECODE_FP8 = S("gemm_decode_fp8", "gemm_decode_fp8_bf16", _FP8_DECODE)
GEMM_DECODE_FP8_F32 = S("gemm_decode_fp8", "gemm_decode_fp8_f32", _FP8_DECODE)
GEMM_DECODE_FP8_SWIGLU = S("gemm_decode_fp8", "gemm_decode_fp8_swiglu_bf16", _FP8_DECODE)
GEMM_DECODE_FP8_SPLIT2 = S("gemm_decode_fp8", "gemm_decode_fp8_bf16_split2", _FP8_DECODE)
GEMM_DECODE_FP8_F32_SPLIT2 = S("gemm_decode_fp8", "gemm_decode_fp8_f32_split2", _FP8_DECODE)
GEMM_DECODE_FP8_SWIGLU_SPLIT2 = S("gemm_decode_fp8", "gemm_decode_fp8_swiglu_bf16_split2",
                                  _FP8_DECODE)
GEMM_DECODE_FP8_SPLIT3 = S("gemm_decode_fp8", "gemm_decode_fp8_bf16_split3", _FP8_DECODE)
GEMM_DECODE_FP8_F32_SPLIT3 = S("gemm_decode_fp8", "gemm_decode_fp8_f32_split3", _FP8_DECODE)
GEMM_DECODE_FP8_SWIGLU_SPLIT3 = S("gemm_decode_fp8", "gemm_decode_fp8_swiglu_bf16_split3",
                                  _FP8_DECODE)
GEMM_DECODE_FP8_SPLIT4 = S("gemm_decode_fp8", "gemm_decode_fp8_bf16_split4", _FP8_DECODE)
GEMM_DECODE_FP8_F32_SPLIT4 = S("gemm_decode_fp8", "gemm_decode_fp8_f32_split4", _FP8_DECODE)
GEMM_DECODE_FP8_SWIGLU_SPLIT4 = S("gemm_decode_fp8", "gemm_decode_fp8_swiglu_bf16_split4",
                                  _FP8_DECODE)
GEMM_DECODE_FP8_SPLIT5 = S("gemm_decode_fp8", "gemm_decode_fp8_bf16_split5", _FP8_DECODE)
GEMM_DECODE_FP8_F32_SPLIT5 = S("gemm_decode_fp8", "gemm_decode_fp8_f32_split5", _FP8_DECODE)
GEMM_DECODE_FP8_SWIGLU_SPLIT5 = S("gemm_decode_fp8", "gemm_decode_fp8_swiglu_bf16_split5",
                                  _FP8_DECODE)
GEMM_DECODE_FP8_SPLIT6 = S("gemm_decode_fp8", "gemm_decode_fp8_bf16_split6", _FP8_DECODE)
GEMM_DECODE_FP8_F32_SPLIT6 = S("gemm_decode_fp8", "gemm_decode_fp8_f32_split6", _FP8_DECODE)
GEMM_DECODE_FP8_SWIGLU_SPLIT6 = S("gemm_decode_fp8", "gemm_decode_fp8_swiglu_bf16_split6",
                                  _FP8_DECODE)
GEMM_DECODE_FP8_SPLIT7 = S("gemm_decode_fp8", "gemm_decode_fp8_bf16_split7", _FP8_DECODE)
GEMM_DECODE_FP8_F32_SPLIT7 = S("gemm_decode_fp8", "gemm_decode_fp8_f32_split7", _FP8_DECODE)
GEMM_DECODE_FP8_SWIGLU_SPLIT7 = S("gemm_decode_fp8", "gemm_decode_fp8_swiglu_bf16_split7",
                                  _FP8_DECODE)
GEMM_DECODE_FP8_SPLIT8 = S("gemm_decode_fp8", "gemm_decode_fp8_bf16_split8", _FP8_DECODE)
GEMM_DECODE_FP8_F32_SPLIT8 = S("gemm_decode_fp8", "gemm_decode_fp8_f32_split8", _FP8_DECODE)
GEMM_DECODE_FP8_SWIGLU_SPLIT8 = S("gemm_decode_fp8", "gemm_decode_fp8_swiglu_bf16_split8",
                                  _FP8_DECODE)
# ... their traced twins (the bf16 product at splits 1..4, tools/gpu/trace_decode_fp8.py):
# trace u64 [grid, ops.matmul_fp8_wgmma.TRACE_WORDS], zeroed before the launch, gets each
# block's phase stamps (%globaltimer ns) and its SM id
_FP8_DECODE_TRACE = _FP8_DECODE + " trace:ptr"
GEMM_DECODE_FP8_TRACE = S("gemm_decode_fp8", "gemm_decode_fp8_trace_bf16", _FP8_DECODE_TRACE)
GEMM_DECODE_FP8_TRACE_SPLIT2 = S("gemm_decode_fp8", "gemm_decode_fp8_trace_bf16_split2",
                                 _FP8_DECODE_TRACE)
GEMM_DECODE_FP8_TRACE_SPLIT3 = S("gemm_decode_fp8", "gemm_decode_fp8_trace_bf16_split3",
                                 _FP8_DECODE_TRACE)
GEMM_DECODE_FP8_TRACE_SPLIT4 = S("gemm_decode_fp8", "gemm_decode_fp8_trace_bf16_split4",
                                 _FP8_DECODE_TRACE)
# one block that waits for the kernel before it and only then lets the next one launch: between
# a kernel writing a weight (a dequantize) and a GEMM that prefetches weights before its PDL wait
PDL_FENCE = S("gemv_fp8", "pdl_fence", "")
DEQUANT_FP8 = S("gemv_fp8", "dequant_fp8_bf16",
                "w:ptr scale:ptr w_out:ptr n:u32 k:u32 row_shift:u32 row_stride:u32 "
                "col_shift:u32 col_stride:u32")
# NVFP4 weights: E2M1 codes packed [N, K/2] (element 2i in the low nibble), E4M3 group scales
# [N, K/16] (bytes), one f32 per output row (the tensor's global scale), dequantized in registers
_NVFP4 = "scale:ptr row_scale:ptr y:ptr m:u32 n:u32 k:u32"
GEMV_NVFP4 = S("gemv_nvfp4", "gemv_nvfp4_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_NVFP4_SINGLE = S("gemv_nvfp4", "gemv_nvfp4_bf16_single", "x:ptr w:ptr " + _NVFP4)
GEMV_SILU_NVFP4 = S("gemv_nvfp4", "gemv_silu_nvfp4_bf16", "gate_up:ptr w:ptr " + _NVFP4)
GEMV_SILU_NVFP4_SINGLE = S("gemv_nvfp4", "gemv_silu_nvfp4_bf16_single",
                           "gate_up:ptr w:ptr " + _NVFP4)
# ... m == 1 on packed half-precision FMAs (ATLAS_QUANT_NVFP4_H2): y bf16, f32 logits (the
# bf16-rounded sums widened), and the fused [gate | up] product ending with its SwiGLU (y the
# activation [1, n / 2])
GEMV_NVFP4_H2 = S("gemv_nvfp4", "gemv_nvfp4_h2_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_NVFP4_H2_F32 = S("gemv_nvfp4", "gemv_nvfp4_h2_f32", "x:ptr w:ptr " + _NVFP4)
GEMV_NVFP4_H2_SWIGLU = S("gemv_nvfp4", "gemv_nvfp4_h2_swiglu_bf16", "x:ptr w:ptr " + _NVFP4)
# ... in 8-row blocks (one chunk of each row a thread: x's conversion shared by 8 rows)
GEMV_NVFP4_H2X8 = S("gemv_nvfp4", "gemv_nvfp4_h2x8_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_NVFP4_H2X8_F32 = S("gemv_nvfp4", "gemv_nvfp4_h2x8_f32", "x:ptr w:ptr " + _NVFP4)
GEMV_NVFP4_H2X8_SWIGLU = S("gemv_nvfp4", "gemv_nvfp4_h2x8_swiglu_bf16", "x:ptr w:ptr " + _NVFP4)
DEQUANT_NVFP4 = S("gemv_nvfp4", "dequant_nvfp4_bf16",
                  "w:ptr scale:ptr row_scale:ptr w_out:ptr n:u32 k:u32")
# the same FP8 / NVFP4 products on tensor cores for decode batches of 1..64 rows
# (kernels/hopper/common/gemv_mma_quant.cu): the quantized bytes stream once for any m; the
# _SMALL entry points take m <= 8 only (fewer registers: two blocks per SM)
GEMV_MMA_FP8 = S("gemv_mma_quant", "gemv_mma_fp8_bf16", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_MMA_FP8_SMALL = S("gemv_mma_quant", "gemv_mma_fp8_bf16_small", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_MMA_NVFP4 = S("gemv_mma_quant", "gemv_mma_nvfp4_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_MMA_NVFP4_SMALL = S("gemv_mma_quant", "gemv_mma_nvfp4_bf16_small", "x:ptr w:ptr " + _NVFP4)
# ... with f32 outputs (each bf16-rounded sum widened: a quantized LM head's logits)
GEMV_MMA_FP8_F32 = S("gemv_mma_quant", "gemv_mma_fp8_f32", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_MMA_NVFP4_F32 = S("gemv_mma_quant", "gemv_mma_nvfp4_f32", "x:ptr w:ptr " + _NVFP4)
# the same products for 1..8 rows with the MMA fragments loaded straight into registers
# (kernels/hopper/common/gemv_quant_direct.cu: no shared-memory ring, 16 weight rows a block)
GEMV_QD_FP8 = S("gemv_quant_direct", "gemv_qd_fp8_bf16", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_NVFP4 = S("gemv_quant_direct", "gemv_qd_nvfp4_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_QD_FP8_F32 = S("gemv_quant_direct", "gemv_qd_fp8_f32", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_NVFP4_F32 = S("gemv_quant_direct", "gemv_qd_nvfp4_f32", "x:ptr w:ptr " + _NVFP4)
# ... and a dense MLP's gate_up product ending with its SwiGLU: w the fused [gate | up] weight
# [n = 2 I, k], y the activation [m, I] (silu_mul_bf16 over the plain product's bf16 output)
GEMV_QD_FP8_SWIGLU = S("gemv_quant_direct", "gemv_qd_fp8_swiglu_bf16",
                       "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_NVFP4_SWIGLU = S("gemv_quant_direct", "gemv_qd_nvfp4_swiglu_bf16",
                         "x:ptr w:ptr " + _NVFP4)
# ... each format on its other loop (gemv_quant_direct.cu: FP8 defaults to the one-tile-per-block
# loop, NVFP4 to the pipelined one; ATLAS_QUANT_TILE_LOOP=0 / 1 and the one-wave grid pick these)
GEMV_QD_FP8_PIPE = S("gemv_quant_direct", "gemv_qd_fp8_pipe_bf16", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_FP8_PIPE_F32 = S("gemv_quant_direct", "gemv_qd_fp8_pipe_f32", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_FP8_PIPE_SWIGLU = S("gemv_quant_direct", "gemv_qd_fp8_pipe_swiglu_bf16",
                            "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_NVFP4_TILE = S("gemv_quant_direct", "gemv_qd_nvfp4_tile_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_QD_NVFP4_TILE_F32 = S("gemv_quant_direct", "gemv_qd_nvfp4_tile_f32", "x:ptr w:ptr " + _NVFP4)
GEMV_QD_NVFP4_TILE_SWIGLU = S("gemv_quant_direct", "gemv_qd_nvfp4_tile_swiglu_bf16",
                              "x:ptr w:ptr " + _NVFP4)
# ... the NVFP4 ones on the byte-table decode (ATLAS_QUANT_E2M1_LUT=1, the A/B of the bit moves)
GEMV_QD_NVFP4_LUT = S("gemv_quant_direct", "gemv_qd_nvfp4_lut_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_QD_NVFP4_LUT_F32 = S("gemv_quant_direct", "gemv_qd_nvfp4_lut_f32", "x:ptr w:ptr " + _NVFP4)
GEMV_QD_NVFP4_LUT_SWIGLU = S("gemv_quant_direct", "gemv_qd_nvfp4_lut_swiglu_bf16",
                             "x:ptr w:ptr " + _NVFP4)
# ... on the pipelined loop with narrower load batches and more blocks per SM
# (ATLAS_QUANT_NARROW=1: one step a batch, four blocks; =2: two steps, three blocks)
GEMV_QD_FP8_N1 = S("gemv_quant_direct", "gemv_qd_fp8_n1_bf16", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_FP8_N1_F32 = S("gemv_quant_direct", "gemv_qd_fp8_n1_f32", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_FP8_N1_SWIGLU = S("gemv_quant_direct", "gemv_qd_fp8_n1_swiglu_bf16",
                          "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_NVFP4_N1 = S("gemv_quant_direct", "gemv_qd_nvfp4_n1_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_QD_NVFP4_N1_F32 = S("gemv_quant_direct", "gemv_qd_nvfp4_n1_f32", "x:ptr w:ptr " + _NVFP4)
GEMV_QD_NVFP4_N1_SWIGLU = S("gemv_quant_direct", "gemv_qd_nvfp4_n1_swiglu_bf16",
                            "x:ptr w:ptr " + _NVFP4)
GEMV_QD_FP8_N2 = S("gemv_quant_direct", "gemv_qd_fp8_n2_bf16", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_FP8_N2_F32 = S("gemv_quant_direct", "gemv_qd_fp8_n2_f32", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_FP8_N2_SWIGLU = S("gemv_quant_direct", "gemv_qd_fp8_n2_swiglu_bf16",
                          "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QD_NVFP4_N2 = S("gemv_quant_direct", "gemv_qd_nvfp4_n2_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_QD_NVFP4_N2_F32 = S("gemv_quant_direct", "gemv_qd_nvfp4_n2_f32", "x:ptr w:ptr " + _NVFP4)
GEMV_QD_NVFP4_N2_SWIGLU = S("gemv_quant_direct", "gemv_qd_nvfp4_n2_swiglu_bf16",
                            "x:ptr w:ptr " + _NVFP4)
# ... the same products staged through shared memory by bulk copies (ATLAS_QUANT_STAGED=1):
# one block of 16 warps per SM, ops/matmul_quant_mma.STAGED_SHARED bytes of dynamic shared
# memory
GEMV_QS_FP8 = S("gemv_quant_direct", "gemv_qs_fp8_bf16", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QS_FP8_F32 = S("gemv_quant_direct", "gemv_qs_fp8_f32", "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QS_FP8_SWIGLU = S("gemv_quant_direct", "gemv_qs_fp8_swiglu_bf16",
                       "x:ptr w:ptr " + _FP8_SCALE)
GEMV_QS_NVFP4 = S("gemv_quant_direct", "gemv_qs_nvfp4_bf16", "x:ptr w:ptr " + _NVFP4)
GEMV_QS_NVFP4_F32 = S("gemv_quant_direct", "gemv_qs_nvfp4_f32", "x:ptr w:ptr " + _NVFP4)
GEMV_QS_NVFP4_SWIGLU = S("gemv_quant_direct", "gemv_qs_nvfp4_swiglu_bf16",
                         "x:ptr w:ptr " + _NVFP4)
# the same products with Hopper warpgroup MMA (kernels/hopper/common/gemm_sm90.cu, sm_90a
# only): 128x256 tiles for prefill, launched with GEMM_SM90_SMEM bytes of dynamic shared memory
GEMM_SM90 = S("gemm_sm90", "gemm_sm90_bf16", "a:ptr w:ptr c:ptr m:u32 n:u32 k:u32")
GEMM_SM90_F32OUT = S("gemm_sm90", "gemm_sm90_bf16_f32", "a:ptr w:ptr c:ptr m:u32 n:u32 k:u32")
# ... and with the operands streamed by the TMA unit (kernels/hopper/common/gemm_sm90_tma.cu,
# sm_90a only; the same tiles and bits): amap / wmap are tensor maps over a [m][k] in
# [128][64] boxes and w [n][k] in [256][64] boxes (ops/matmul.py); the kernel reads a and w
# only through them, the host reference through a and w. 288 threads (a producer warp past
# the two warpgroups), GEMM_SM90_TMA_SMEM bytes of dynamic shared memory
_GEMM_SM90_TMA = "a:ptr w:ptr c:ptr m:u32 n:u32 k:u32 amap:tmap wmap:tmap"
GEMM_SM90_TMA = S("gemm_sm90_tma", "gemm_sm90_tma_bf16", _GEMM_SM90_TMA)
GEMM_SM90_TMA_F32OUT = S("gemm_sm90_tma", "gemm_sm90_tma_bf16_f32", _GEMM_SM90_TMA)
# ... w a fused [gate | up] weight [n = 2 I][k] in [128][64] wmap boxes, c the activation
# [m][I]: the plain product then silu_mul (geglu: gelu_tanh_mul), bit for bit, in one launch
GEMM_SM90_TMA_SWIGLU = S("gemm_sm90_tma", "gemm_sm90_tma_swiglu_bf16", _GEMM_SM90_TMA)
GEMM_SM90_TMA_GEGLU = S("gemm_sm90_tma", "gemm_sm90_tma_geglu_bf16", _GEMM_SM90_TMA)
# ... in clusters of two m-tiles sharing each W tile by multicast: wmap in [128][64] boxes, a
# grid of ceil(m / 256) * 2 * ceil(n / 256) blocks (KernelRoutes.gemm_tma_multicast)
GEMM_SM90_TMA_CLUSTER2 = S("gemm_sm90_tma", "gemm_sm90_tma_cluster2_bf16", _GEMM_SM90_TMA)
GEMM_SM90_TMA_CLUSTER2_F32OUT = S("gemm_sm90_tma", "gemm_sm90_tma_cluster2_bf16_f32",
                                  _GEMM_SM90_TMA)

# --- rotary embedding + per-head q/k RMSNorm + paged KV append -----------------------------
QK_NORM_ROPE_KV = S(
    "rope_kv", "qk_norm_rope_kv_bf16",
    "qkv:ptr q_out:ptr k_cache:ptr v_cache:ptr q_norm_w:ptr k_norm_w:ptr cos_sin:ptr "
    "positions:ptr slots:ptr tokens:u32 hq:u32 hkv:u32 head_dim:u32 block_size:u32 eps:f32")

# the general form (rope_kv.cu): q heads sit q_pitch elements apart in the qkv row (2 * D
# when each head is followed by its output gate, Qwen3.5/Qwen3-Next), only the first
# rotary_dim elements of a head rotate (cos_sin is f32 [positions, rotary_dim]), and
# norm_offset = 1 applies zero-centred norm weights, bf16(x * rsqrt(mean(x^2) + eps) * (1 + w))
# with one rounding. A qkv row is [hq * q_pitch | k (hkv * P) | v (hkv * P)], P = proj_dim:
# a padded head's q_out and cache rows get its P elements, then zeros (the norm spans P)
QK_NORM_ROPE_KV_PARTIAL = S(
    "rope_kv", "qk_norm_rope_kv_partial_bf16",
    "qkv:ptr q_out:ptr k_cache:ptr v_cache:ptr q_norm_w:ptr k_norm_w:ptr cos_sin:ptr "
    "positions:ptr slots:ptr tokens:u32 hq:u32 hkv:u32 head_dim:u32 q_pitch:u32 "
    "rotary_dim:u32 norm_offset:u32 block_size:u32 eps:f32 proj_dim:u32")
# the sigmoid output gate of gated full attention (attn_gate.cu):
# out[t, h*D + d] = bf16(x[t, h*D + d] * bf16(sigmoid(gate[t * gate_pitch + h * head_pitch + d])))
ATTN_GATE = S("attn_gate", "sigmoid_gate_mul_bf16",
              "x:ptr gate:ptr out:ptr tokens:u32 heads:u32 head_dim:u32 gate_pitch:u32 "
              "head_pitch:u32")
# the same values, letting the o_proj launch before its PDL wait (ops/early_trigger.py)
ATTN_GATE_EARLY = S("attn_gate", "sigmoid_gate_mul_early_bf16",
                    "x:ptr gate:ptr out:ptr tokens:u32 heads:u32 head_dim:u32 gate_pitch:u32 "
                    "head_pitch:u32")

# --- Gated-DeltaNet (linear attention) ------------------------------------------------------
# Per-sequence recurrent state lives in slot-indexed pools: state_slots i32 [num_seqs]; a
# sequence whose chunk starts at position 0 (kv_lens[b] == its q_len, from cu_q) starts from
# zero state and ignores what the slot held. conv_state is bf16 [slots, kernel, channels], a
# ring holding the input at position p in row p % kernel (history below position 0 reads
# zero); the delta-rule state is f32 [slots, hv, dk, dv].
# causal depthwise conv1d + SiLU over channels = the first `channels` columns of x's rows
# (x_pitch elements apart); w is bf16 [channels, kernel]; out bf16 [tokens, channels]:
# out[t, c] = bf16(silu(bf16(sum_j w[c, j] * x[t - kernel + 1 + j, c]))), history from the state.
CONV1D = S("conv1d", "causal_conv1d_silu_bf16",
           "x:ptr x_pitch:u32 w:ptr conv_state:ptr state_slots:ptr cu_q:ptr kv_lens:ptr "
           "out:ptr num_seqs:u32 channels:u32 kernel:u32")
# gated delta rule (gated_delta.cu), q/k/v from the conv output rows [q (hk*dk) | k (hk*dk) |
# v (hv*dv)] (qkv_pitch apart), b and a from ba rows (b at +h, a at +hv; ba_pitch apart),
# A_log and dt_bias bf16 [hv]; out bf16 [tokens, hv * dv]. Value head h reads key head
# h / (hv / hk). Per token: q, k L2-normalized (eps 1e-6) in f32, q scaled by dk^-0.5,
# beta = bf16(sigmoid(b)), g = -exp(A_log) * softplus(a + dt_bias), then
#   S = exp(g) S;  S += k (beta (v - k^T S))^T;  o = q^T S.
# The chunked form (prefill, chunks of 64 in each sequence's step) and the recurrent form
# (decode: one token per sequence) compute the same function.
GATED_DELTA_CHUNK = S(
    "gated_delta", "gated_delta_chunk_bf16",
    "qkv:ptr qkv_pitch:u32 ba:ptr ba_pitch:u32 a_log:ptr dt_bias:ptr state:ptr "
    "state_slots:ptr cu_q:ptr kv_lens:ptr out:ptr num_seqs:u32 hk:u32 hv:u32 dk:u32 dv:u32")
# the chunked form with its K K^T, Q K^T, K S, Q S and K^T V' products on tensor cores (f32
# operands split into bf16 hi + lo parts: near-f32 products); dk a multiple of 16
GATED_DELTA_CHUNK_TC = S(
    "gated_delta", "gated_delta_chunk_tc_bf16",
    "qkv:ptr qkv_pitch:u32 ba:ptr ba_pitch:u32 a_log:ptr dt_bias:ptr state:ptr "
    "state_slots:ptr cu_q:ptr kv_lens:ptr out:ptr num_seqs:u32 hk:u32 hv:u32 dk:u32 dv:u32")
GATED_DELTA_STEP = S(
    "gated_delta", "gated_delta_step_bf16",
    "qkv:ptr qkv_pitch:u32 ba:ptr ba_pitch:u32 a_log:ptr dt_bias:ptr state:ptr "
    "state_slots:ptr cu_q:ptr kv_lens:ptr out:ptr num_seqs:u32 hk:u32 hv:u32 dk:u32 dv:u32")

# a Gated-DeltaNet layer's decode step between its projections, in one launch (gdn_decode.cu):
# conv1d update + SiLU, q/k L2 norms, the recurrent delta-rule step and the gated RMSNorm,
# equal to CONV1D, GATED_DELTA_STEP and GATED_RMSNORM in turn. proj rows (proj_pitch apart)
# are the fused input projection [q | k | v | z | b | a]; conv_w bf16 [conv_dim, kernel];
# norm_w bf16 [dv]; out bf16 [tokens, hv * dv]; one token per sequence.
GDN_DECODE = S(
    "gdn_decode", "gated_deltanet_decode_bf16",
    "proj:ptr proj_pitch:u32 conv_w:ptr conv_state:ptr a_log:ptr dt_bias:ptr norm_w:ptr "
    "state:ptr state_slots:ptr state_out:ptr cu_q:ptr kv_lens:ptr out:ptr num_seqs:u32 hk:u32 "
    "hv:u32 dk:u32 dv:u32 kernel:u32 eps:f32")

# --- attention ---------------------------------------------------------------------------
# window: the layer's sliding window (a query at position p sees keys p - window + 1 .. p;
# 0: every key up to p), here and on every entry point below that takes one; proj_dim: the
# attention rows written to out are [tokens, hq * proj_dim] (a padded head's first proj_dim
# elements; the module docstring), here and on every entry point below that takes one;
# sinks: bf16 [hq] attention sinks (gpt-oss), one more logit per q head in every query's
# softmax denominator whose column is dropped: out = sum_i e^(s_i - m) v_i /
# (sum_i e^(s_i - m) + e^(sinks[h] - m)), m any reference (scores and sink in the same units,
# after the scale); a null pointer: no sink, the plain softmax (here and wherever it is taken)
_PREFILL = ("q:ptr k_cache:ptr v_cache:ptr block_tables:ptr cu_q:ptr kv_lens:ptr out:ptr "
            "num_seqs:u32 hq:u32 hkv:u32 head_dim:u32 block_size:u32 max_blocks:u32 scale:f32 "
            "window:u32 proj_dim:u32")
PREFILL_ATTN = S("attention", "prefill_attn_bf16", _PREFILL + " sinks:ptr")
# the same on Hopper warpgroup MMA (kernels/hopper/common/attention_sm90.cu, sm_90a only):
# head_dim 128 or 256, 128-query blocks, launched with dynamic shared memory
# (ops/attention_sm90.py); probabilities enter PV as one bf16 each; no sinks (a model with
# them prefills on PREFILL_ATTN: ops.attention.prefill_attention)
PREFILL_ATTN_SM90 = S("attention_sm90", "prefill_attn_sm90_bf16", _PREFILL)
# the same at head_dim 128 with Q in registers (the A/B of ATLAS_PREFILL_ATTN_QREG)
PREFILL_ATTN_SM90_QREG = S("attention_sm90", "prefill_attn_sm90_qreg_bf16", _PREFILL)
# the same at head_dim 128 on 128-key tiles in a 3-stage ring (the default at D = 128;
# ATLAS_PREFILL_ATTN_WIDE=0 takes PREFILL_ATTN_SM90)
PREFILL_ATTN_SM90_WIDE = S("attention_sm90", "prefill_attn_sm90_wide_bf16", _PREFILL)
# the default entry's schedule for short chunks past long histories: grid (kv heads when
# pack, else q heads; 128-row tiles; num_seqs * num_splits), each split a run of the key
# tiles (ops/attention_sm90.split_tiles); with num_splits > 1 it writes part_o f32 [tokens,
# hq, num_splits, head_dim] (normalized by its own l) and part_ml f32 [tokens, hq,
# num_splits, 2] (max scaled score in log2 units, l), tokens counted from cu_q[0], and
# PREFILL_ATTN_SM90_MERGE writes out; with pack a tile's rows are (query, q head of the kv
# head's group) pairs
PREFILL_ATTN_SM90_SPLIT = S("attention_sm90", "prefill_attn_sm90_split_bf16",
                            _PREFILL + " num_splits:u32 pack:u32 part_o:ptr part_ml:ptr")
# out [tokens, hq * proj_dim] = the merge of those partials; grid (ceil(hq * head_dim / 512),
# a bound on the tokens), 128 threads
PREFILL_ATTN_SM90_MERGE = S("attention_sm90", "prefill_attn_sm90_merge_bf16",
                            "part_o:ptr part_ml:ptr cu_q:ptr out:ptr num_seqs:u32 hq:u32 "
                            "head_dim:u32 num_splits:u32 proj_dim:u32")
# split-K decode: num_splits is the grid size (fixed per CUDA graph); each launch splits
# a sequence's live kv_len into ceil(kv_len / c) active splits of
# c = max(ceil(kv_len / num_splits), ops.attention.DECODE_MIN_KEYS_PER_SPLIT) keys. With
# one active split it writes out [num_seqs, hq, head_dim] bf16 directly; with more, each writes
# part_o f32 [num_seqs, hq, num_splits, head_dim] and part_ml f32 [num_seqs, hq, num_splits,
# 2] (scratch) and the last to finish merges them into out. counters u32 [num_seqs, hkv] must
# be zero before a launch and are left zero after it.
_DECODE = ("q:ptr k_cache:ptr v_cache:ptr block_tables:ptr kv_lens:ptr part_o:ptr part_ml:ptr "
           "counters:ptr out:ptr num_seqs:u32 hq:u32 hkv:u32 head_dim:u32 block_size:u32 "
           "max_blocks:u32 num_splits:u32 scale:f32")
DECODE_ATTN = S("attention", "decode_attn_bf16", _DECODE)
# QK_NORM_ROPE_KV (one token per sequence: tokens = num_seqs, its classic layout) fused into
# DECODE_ATTN: q never leaves the kernel; k and v are appended to the caches as QK_NORM_ROPE_KV
# appends them (slot < 0: not written) and used for the step's key, and for the keys up to 7
# rows before a row append to its history (a verification step's consecutive rows: as if
# QK_NORM_ROPE_KV had appended every row's first). hq / hkv <= 16.
_DECODE_ROPE = ("qkv:ptr k_cache:ptr v_cache:ptr q_norm_w:ptr k_norm_w:ptr cos_sin:ptr "
                "positions:ptr slots:ptr block_tables:ptr kv_lens:ptr part_o:ptr part_ml:ptr "
                "counters:ptr out:ptr num_seqs:u32 hq:u32 hkv:u32 head_dim:u32 "
                "block_size:u32 max_blocks:u32 num_splits:u32 scale:f32 eps:f32")
DECODE_ATTN_ROPE = S("attention", "decode_attn_rope_bf16", _DECODE_ROPE)
# DECODE_ATTN_ROPE waiting for the previous kernel before it reads anything (the A/B of its
# pre-wait reads: ops/routes ATLAS_DECODE_ATTN_LATENCY=0)
DECODE_ATTN_ROPE_WAIT = S("attention", "decode_attn_rope_wait_bf16", _DECODE_ROPE)
# DECODE_ATTN / DECODE_ATTN_ROPE with the splits in thread-block clusters of
# ops.attention.DECODE_CLUSTER_SPLITS (the grid's x a multiple of it) that merge on chip:
# splits of c = max(ceil(kv_len / num_splits), ops.attention.DECODE_CLUSTER_MIN_KEYS) keys;
# partials only when more than one cluster holds keys, one per such cluster (slot = cluster
# index): ops.attention.decode_partial_rule.
DECODE_ATTN_CLUSTER = S("attention", "decode_attn_cluster_bf16", _DECODE)
DECODE_ATTN_ROPE_CLUSTER = S("attention", "decode_attn_rope_cluster_bf16", _DECODE_ROPE)
# the phase-traced twins of DECODE_ATTN_ROPE, DECODE_ATTN_ROPE_CLUSTER and DECODE_ATTN_CLUSTER
# (kernels/hopper/common/attention_twins.cu, a module of its own; tools/gpu/
# trace_decode_attn.py): the same results, and thread 0 of every block stamps
# trace u64 [blocks, ops.attention.TRACE_WORDS] (block = (z * grid_y + y) * grid_x + x):
# %globaltimer ns at word p and clock64 at word 16 + p when it reaches phase p
# (ops.attention.TRACE_PHASES), its SM id at TRACE_SM_WORD; zero it before the launch
DECODE_ATTN_ROPE_TRACE = S("attention_twins", "decode_attn_rope_trace_bf16",
                           _DECODE_ROPE + " trace:ptr")
DECODE_ATTN_ROPE_CLUSTER_TRACE = S("attention_twins", "decode_attn_rope_cluster_trace_bf16",
                                   _DECODE_ROPE + " trace:ptr")
DECODE_ATTN_CLUSTER_TRACE = S("attention_twins", "decode_attn_cluster_trace_bf16",
                              _DECODE + " trace:ptr")
# DECODE_ATTN / DECODE_ATTN_ROPE with only the next round's block-table entries and K/V in
# flight (no L2 prefetch ahead of the register loads): the A/B of that prefetch
# (ops/routes ATLAS_DECODE_ATTN_AHEAD=0), in the twins' module
DECODE_ATTN_AHEAD1 = S("attention_twins", "decode_attn_ahead1_bf16", _DECODE)
DECODE_ATTN_ROPE_AHEAD1 = S("attention_twins", "decode_attn_rope_ahead1_bf16", _DECODE_ROPE)
# DECODE_ATTN_CLUSTER / DECODE_ATTN_ROPE_CLUSTER taking their clusters split-major (every head
# slice's first cluster among the first the GPU starts; the same results, the same push
# merge): the A/B of that order (ops/routes ATLAS_DECODE_ATTN_SPLIT_MAJOR=1), in the twins'
# module
DECODE_ATTN_CLUSTER_SPLIT_MAJOR = S("attention_twins", "decode_attn_cluster_splitmajor_bf16",
                                    _DECODE)
DECODE_ATTN_ROPE_CLUSTER_SPLIT_MAJOR = S("attention_twins",
                                         "decode_attn_rope_cluster_splitmajor_bf16",
                                         _DECODE_ROPE)
# DECODE_ATTN_CLUSTER / DECODE_ATTN_ROPE_CLUSTER with the session-6 cluster merge (each block
# merges its warps, peers read the blocks' parts through distributed shared memory) and their
# shortest splits' later K/V rounds requested into L2 before the PDL wait rather than loaded
# (the same results): the A/B of the batch-1 chain (ops/routes ATLAS_DECODE_ATTN_B1_CHAIN=0),
# in the twins' module
DECODE_ATTN_CLUSTER_PULL = S("attention_twins", "decode_attn_cluster_pull_bf16", _DECODE)
DECODE_ATTN_ROPE_CLUSTER_PULL = S("attention_twins", "decode_attn_rope_cluster_pull_bf16",
                                  _DECODE_ROPE)
# merges the partials of DECODE_ATTN_LONG (decode_attn_bf16 merges its own in its last split)
_COMBINE = ("part_o:ptr part_ml:ptr kv_lens:ptr out:ptr num_seqs:u32 hq:u32 head_dim:u32 "
            "num_splits:u32 window:u32 proj_dim:u32 sinks:ptr")
DECODE_ATTN_COMBINE = S("attention", "decode_attn_combine_bf16", _COMBINE)
# the same values, letting the kernel after it launch before its PDL wait (ops/early_trigger.py)
DECODE_ATTN_COMBINE_EARLY = S("attention", "decode_attn_combine_early_bf16", _COMBINE)
# the same partials for batched and long-context decode on tensor cores
# (kernels/hopper/common/attention_long.cu, hopper only): hq / hkv <= 16, launched with
# dynamic shared memory (ops/attention_long.py); decode_attn_combine_bf16 merges them. A
# one-split launch (num_splits 1) writes out (bf16, normalized) instead: no combine follows.
# head_dim 64 or 128 on DECODE_ATTN_LONG, 256 on DECODE_ATTN_LONG_D256.
# counters (u32 [seqs, hkv] zeroed, or 0): a launch of several splits merges its partials in
# its last block (attention_long.cu SplitMerge) instead of DECODE_ATTN_COMBINE after it
_DECODE_LONG = ("q:ptr k_cache:ptr v_cache:ptr block_tables:ptr kv_lens:ptr part_o:ptr "
                "part_ml:ptr counters:ptr out:ptr num_seqs:u32 hq:u32 hkv:u32 head_dim:u32 "
                "block_size:u32 max_blocks:u32 num_splits:u32 scale:f32 window:u32 proj_dim:u32 "
                "sinks:ptr")
DECODE_ATTN_LONG = S("attention_long", "decode_attn_long_bf16", _DECODE_LONG)
DECODE_ATTN_LONG_D256 = S("attention_long", "decode_attn_long_d256_bf16", _DECODE_LONG)
# (its phase-traced twin: trace_decode_attn.py --long, Qwen3.5's heads)
DECODE_ATTN_LONG_D256_TRACE = S("attention_long", "decode_attn_long_d256_trace_bf16",
                                _DECODE_LONG + " trace:ptr")
# DECODE_ATTN_LONG with qk_norm_rope_kv_bf16 done by its blocks (one token per sequence, the
# classic qkv layout, head_dim 64 or 128): q from the qkv rows, the step's k and v appended
# at the row's slot (none for slot < 0) and substituted for that cache row. The qkv rows are
# [(hq + 2 hkv) * proj_dim], a head rotating whole (cos_sin f32 [positions, proj_dim]); a
# padded head's q and cache rows get its proj_dim elements, then zeros
_DECODE_LONG_ROPE = (
    "qkv:ptr k_cache:ptr v_cache:ptr q_norm_w:ptr k_norm_w:ptr cos_sin:ptr positions:ptr "
    "slots:ptr block_tables:ptr kv_lens:ptr part_o:ptr part_ml:ptr counters:ptr out:ptr "
    "num_seqs:u32 hq:u32 hkv:u32 head_dim:u32 block_size:u32 max_blocks:u32 num_splits:u32 "
    "scale:f32 eps:f32 window:u32 proj_dim:u32 sinks:ptr")
# (waiting for the qkv projection on entry)
DECODE_ATTN_LONG_ROPE_WAIT = S("attention_long", "decode_attn_long_rope_wait_bf16",
                               _DECODE_LONG_ROPE)
# (the same, its prologue's reads in two trips: ATLAS_DECODE_ATTN_LONG_STAGED=1)
DECODE_ATTN_LONG_ROPE_STAGED = S("attention_long", "decode_attn_long_rope_staged_bf16",
                                 _DECODE_LONG_ROPE)
# (its twins for heads of head_dim elements without sinks holding one head dim's code:
# the default for batches, ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM=0 the A/B; proj_dim must be
# head_dim and sinks null)
DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D128 = S(
    "attention_long", "decode_attn_long_rope_staged_exact_d128_bf16", _DECODE_LONG_ROPE)
DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D64 = S(
    "attention_long", "decode_attn_long_rope_staged_exact_d64_bf16", _DECODE_LONG_ROPE)
# (the staged entry letting the next kernel launch once its K/V tiles landed, not on entry:
# ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1)
DECODE_ATTN_LONG_ROPE_LATE = S("attention_long", "decode_attn_long_rope_late_bf16",
                               _DECODE_LONG_ROPE)
# (the staged entry reading all but the qkv rows before its wait, merging whole-tile splits,
# at one sequence: ATLAS_DECODE_ATTN_LONG_EARLY=1; and with the late trigger)
DECODE_ATTN_LONG_ROPE_EARLY = S("attention_long", "decode_attn_long_rope_early_bf16",
                                _DECODE_LONG_ROPE)
DECODE_ATTN_LONG_ROPE_EARLY_LATE = S("attention_long", "decode_attn_long_rope_early_late_bf16",
                                     _DECODE_LONG_ROPE)
# (the two for heads of head_dim elements without sinks, the code before proj_dim and sinks:
# ATLAS_DECODE_ATTN_LONG_EXACT=1, the default; proj_dim must be head_dim and sinks null)
DECODE_ATTN_LONG_ROPE_EARLY_EXACT = S("attention_long", "decode_attn_long_rope_early_exact_bf16",
                                      _DECODE_LONG_ROPE)
DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT = S("attention_long",
                                           "decode_attn_long_rope_early_late_exact_bf16",
                                           _DECODE_LONG_ROPE)
# (the same with one head dim's code only: ATLAS_DECODE_ATTN_LONG_ONE_DIM, the default)
DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D128 = S(
    "attention_long", "decode_attn_long_rope_early_exact_d128_bf16", _DECODE_LONG_ROPE)
DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D128 = S(
    "attention_long", "decode_attn_long_rope_early_late_exact_d128_bf16", _DECODE_LONG_ROPE)
DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D64 = S(
    "attention_long", "decode_attn_long_rope_early_exact_d64_bf16", _DECODE_LONG_ROPE)
DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D64 = S(
    "attention_long", "decode_attn_long_rope_early_late_exact_d64_bf16", _DECODE_LONG_ROPE)
# (the general early entries with one head dim's code only: padded heads, sinks)
DECODE_ATTN_LONG_ROPE_EARLY_D128 = S(
    "attention_long", "decode_attn_long_rope_early_d128_bf16", _DECODE_LONG_ROPE)
DECODE_ATTN_LONG_ROPE_EARLY_LATE_D128 = S(
    "attention_long", "decode_attn_long_rope_early_late_d128_bf16", _DECODE_LONG_ROPE)
DECODE_ATTN_LONG_ROPE_EARLY_D64 = S(
    "attention_long", "decode_attn_long_rope_early_d64_bf16", _DECODE_LONG_ROPE)
DECODE_ATTN_LONG_ROPE_EARLY_LATE_D64 = S(
    "attention_long", "decode_attn_long_rope_early_late_d64_bf16", _DECODE_LONG_ROPE)
# (batch 1 of gated full attention at D 256, Qwen3.5 / Qwen3-Next: q heads q_pitch apart,
# each followed by its output gate, the first rotary_dim elements rotating (cos_sin f32
# [positions, rotary_dim]), (1 + w) norm weights where norm_offset; each head's output
# multiplied by its sigmoid gate as it is written; heads of head_dim elements, no sinks; the
# splits merge together, so counters are u32 [hkv, 2] (arrivals, departures) and the grid at
# most one wave; and with the late trigger: ops/attention_long.py
# decode_attention_long_rope_gated)
_DECODE_LONG_ROPE_GATED = _DECODE_LONG_ROPE + " q_pitch:u32 rotary_dim:u32 norm_offset:u32"
DECODE_ATTN_LONG_ROPE_EARLY_GATED_D256 = S(
    "attention_long", "decode_attn_long_rope_early_gated_d256_bf16", _DECODE_LONG_ROPE_GATED)
DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_D256 = S(
    "attention_long", "decode_attn_long_rope_early_late_gated_d256_bf16",
    _DECODE_LONG_ROPE_GATED)
# (the late one's phase-traced twin: tools/gpu/trace_decode_attn.py --long --gated)
DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_TRACE_D256 = S(
    "attention_long", "decode_attn_long_rope_early_late_gated_trace_d256_bf16",
    _DECODE_LONG_ROPE_GATED + " trace:ptr")
# (the early exact D-128 entries' phase-traced twins: tools/gpu/trace_decode_attn.py --long)
DECODE_ATTN_LONG_ROPE_EARLY_TRACE = S("attention_long", "decode_attn_long_rope_early_trace_bf16",
                                      _DECODE_LONG_ROPE + " trace:ptr")
DECODE_ATTN_LONG_ROPE_EARLY_LATE_TRACE = S("attention_long",
                                           "decode_attn_long_rope_early_late_trace_bf16",
                                           _DECODE_LONG_ROPE + " trace:ptr")
# (the staged entry's phase-traced twin: batches, trace_decode_attn.py --long)
DECODE_ATTN_LONG_ROPE_STAGED_TRACE = S("attention_long",
                                       "decode_attn_long_rope_staged_trace_bf16",
                                       _DECODE_LONG_ROPE + " trace:ptr")

# verification rows (a speculating sequence's K + 1 consecutive rows) on tensor cores, each
# sequence's K/V read once for all its rows (kernels/hopper/common/attention_verify.cu, hopper
# only): head_dim 64, 128 or 256, hq / hkv <= 64, dynamic shared memory, its own split rule
# and in-kernel merge (ops/attention_verify.py)
DECODE_ATTN_VERIFY = S(
    "attention_verify", "decode_attn_verify_bf16",
    "q:ptr k_cache:ptr v_cache:ptr block_tables:ptr kv_lens:ptr part_o:ptr part_ml:ptr "
    "counters:ptr out:ptr num_rows:u32 hq:u32 hkv:u32 head_dim:u32 block_size:u32 "
    "max_blocks:u32 num_splits:u32 scale:f32 min_chunk:u32")
# the same with qk_norm_rope_kv_bf16's work done by its blocks (q staged in `q`; opt-in,
# ATLAS_DECODE_ATTN_VERIFY_ROPE=1)
DECODE_ATTN_VERIFY_ROPE = S(
    "attention_verify", "decode_attn_verify_rope_bf16",
    "qkv:ptr q:ptr k_cache:ptr v_cache:ptr q_norm_w:ptr k_norm_w:ptr cos_sin:ptr "
    "positions:ptr slots:ptr block_tables:ptr kv_lens:ptr part_o:ptr part_ml:ptr "
    "counters:ptr out:ptr num_rows:u32 hq:u32 hkv:u32 head_dim:u32 block_size:u32 "
    "max_blocks:u32 num_splits:u32 scale:f32 min_chunk:u32 eps:f32")
# the same work with a sequence's rows served per kv head by one thread-block cluster that
# merges on chip: no partial buffers, no split count (opt-in, ATLAS_DECODE_ATTN_VERIFY_CLUSTER=1)
DECODE_ATTN_VERIFY_CLUSTER = S(
    "attention_verify", "decode_attn_verify_cluster_bf16",
    "qkv:ptr k_cache:ptr v_cache:ptr q_norm_w:ptr k_norm_w:ptr cos_sin:ptr positions:ptr "
    "slots:ptr block_tables:ptr kv_lens:ptr out:ptr num_rows:u32 hq:u32 hkv:u32 head_dim:u32 "
    "block_size:u32 max_blocks:u32 scale:f32 eps:f32")

# --- quantized KV cache: FP8 (E4M3) and NVFP4 (kv_quant.cu, attention_kvq.cu) -----------------
# Pools as the bf16 cache with quantized rows: FP8, one E4M3 code byte per element; NVFP4, a
# row (block, kv head, offset) of head_dim / 2 bytes of E2M1 nibbles (element 2i low) then
# head_dim / 16 E4M3 group-scale bytes. kv_scales f32 [2, hkv] per layer (K scales, then V
# scales): an element is code * scale (FP8) or e2m1 * group scale * scale (NVFP4). The rotary
# kernel writes the step's bf16 K/V rows to stage [2, hkv, stage_rows, head_dim] (row t =
# token t of the step); the calibration sets a scale still 0 to amax / qmax over the first
# min(tokens, calib_tokens) tokens with a slot (1 if amax is 0), and the appends quantize the
# rows into the pools.
KV_CALIBRATE = S("kv_quant", "kv_calibrate",
                 "stage:ptr stage_rows:u32 slots:ptr scales:ptr tokens:u32 calib_tokens:u32 "
                 "hkv:u32 head_dim:u32 qmax:f32")
_KV_APPEND = ("stage:ptr stage_rows:u32 slots:ptr scales:ptr k_cache:ptr v_cache:ptr "
              "tokens:u32 hkv:u32 head_dim:u32 block_size:u32")
KV_FP8_APPEND = S("kv_quant", "kv_fp8_append", _KV_APPEND)
KV_NVFP4_APPEND = S("kv_quant", "kv_nvfp4_append", _KV_APPEND)
# PREFILL_ATTN / DECODE_ATTN over the quantized pools (decode_attn_combine_bf16 merges the
# partials)
_PREFILL_KVQ = ("q:ptr k_cache:ptr v_cache:ptr kv_scales:ptr block_tables:ptr cu_q:ptr "
                "kv_lens:ptr out:ptr num_seqs:u32 hq:u32 hkv:u32 head_dim:u32 block_size:u32 "
                "max_blocks:u32 scale:f32")
_DECODE_KVQ = ("q:ptr k_cache:ptr v_cache:ptr kv_scales:ptr block_tables:ptr kv_lens:ptr "
               "part_o:ptr part_ml:ptr num_seqs:u32 hq:u32 hkv:u32 head_dim:u32 "
               "block_size:u32 max_blocks:u32 num_splits:u32 scale:f32")
PREFILL_ATTN_FP8 = S("attention_kvq", "prefill_attn_fp8", _PREFILL_KVQ)
DECODE_ATTN_FP8 = S("attention_kvq", "decode_attn_fp8", _DECODE_KVQ)
PREFILL_ATTN_NVFP4 = S("attention_kvq", "prefill_attn_nvfp4", _PREFILL_KVQ)
DECODE_ATTN_NVFP4 = S("attention_kvq", "decode_attn_nvfp4", _DECODE_KVQ)

# --- sampler (kernels/<hw>/common/sampler.cu) ----------------------------------------------
# Per-row inputs are one SAMPLE_ROW record per batch row, written by the host before each
# step (so the launches can live in a CUDA graph). Per-sequence penalty state is indexed by
# the row's slot: counts i32 [max_slots, vocab] (times each token was generated) and
# prompt_mask u8 [max_slots, vocab] (1 where the token occurs in the prompt), and the
# additive logit biases bias_ids i32 / bias_vals f32 [max_slots, max_bias] (the first
# num_bias entries of the row's slot, distinct ids). logits are f32 [rows, vocab], penalized
# and biased in place; out is i32 [rows].
SAMPLE_ROW = np.dtype([
    ("slot", "<i4"),          # penalty-state slot; < 0: no penalties, no counting
    ("top_k", "<i4"),         # <= 0: off
    ("seed_lo", "<u4"), ("seed_hi", "<u4"),
    ("step", "<u4"),          # tokens generated so far: the RNG counter
    ("temperature", "<f4"),   # <= 0: greedy
    ("top_p", "<f4"),         # >= 1: off
    ("min_p", "<f4"),         # <= 0: off
    ("repetition", "<f4"),    # 1: off (<= 0 is treated as 1)
    ("presence", "<f4"),
    ("frequency", "<f4"),
    ("num_bias", "<u4"),      # logit biases of the slot (0: none)
])
SAMPLER_PENALTIES = S("sampler", "apply_penalties_f32",
                      "logits:ptr row_params:ptr counts:ptr prompt_mask:ptr bias_ids:ptr "
                      "bias_vals:ptr rows:u32 vocab:u32 max_bias:u32")
# sample_f32 splits a row over blocks: scratch holds their partials and candidates
# (ops.sampling.sample_scratch_bytes); counters u32 [rows] are zero before and after a launch.
# Each row's finishing block also adds its token to counts i32 [slots, vocab] at the row's
# penalty slot (counts 0: none) and, with host_ids (mapped page-locked i32 [2, pitch]) set,
# writes it to host_ids[parity[0] * pitch + r]: a captured step's ids published to the host;
# with top_n set, the row's logprobs (SAMPLER_LOGPROBS's outputs, for the drawn token).
SAMPLER_SAMPLE = S("sampler", "sample_f32",
                   "logits:ptr row_params:ptr out:ptr scratch:ptr counters:ptr rows:u32 vocab:u32 "
                   "counts:ptr host_ids:ptr parity:ptr pitch:u32 top_n:ptr out_logprob:ptr "
                   "top_ids:ptr top_logprobs:ptr max_top:u32")
# Grammar masks: bitmask u32 [mask rows, words] (bit t % 32 of word t / 32; 1 = allowed);
# mask_rows i32 [rows] picks each logits row's mask row (< 0: unconstrained).
SAMPLER_TOKEN_BITMASK = S("sampler", "apply_token_bitmask_f32",
                          "logits:ptr bitmask:ptr mask_rows:ptr rows:u32 vocab:u32 words:u32")
# logprobs of given tokens (prompt rows; sample_f32 reports its own rows'); top_n i32 [rows]
# (< 0: none for that row), out_logprob f32 [rows], top_ids i32 / top_logprobs f32
# [rows, max_top].
SAMPLER_LOGPROBS = S("sampler", "logprobs_f32",
                     "logits:ptr tokens:ptr top_n:ptr out_logprob:ptr top_ids:ptr "
                     "top_logprobs:ptr rows:u32 vocab:u32 max_top:u32")

# --- a captured decode step's input copy (step_io.cu; its output copy is SAMPLER_SAMPLE's) ---
# stage: dst[w] = src[w] over the words [k * tok_stride, + tokens) for k = 0, 1, 2 and
# [tail_at, + tail_words); a word of the first span below zero is -1 - r: sampled[r] instead
# (src: the host's page-locked step inputs, mapped); then ack[0] = src[seq_word] (mapped host
# memory: every word was read).
STEP_STAGE_INPUTS = S("step_io", "stage_step_inputs_i32",
                      "src:ptr dst:ptr tokens:u32 tok_stride:u32 tail_at:u32 tail_words:u32 "
                      "sampled:ptr ack:ptr seq_word:u32")

# --- mixture of experts (kernels/<hw>/common/moe_*.cu; contract in ops/moe.py) -------------
# Router: logits f32 [tokens, experts] (the gate's bf16 product widened, as GEMV_F32OUT
# writes it) -> topk_ids i32 [tokens, top_k] (best first, ties to the lower expert index) and
# topk_weights f32 [tokens, top_k]. renormalize != 0 divides the k weights by their sum
# (norm_topk_prob); every weight is then multiplied by scale (routed_scaling_factor).
MOE_TOPK_SOFTMAX = S("moe_router", "moe_topk_softmax_f32",
                     "logits:ptr topk_ids:ptr topk_weights:ptr tokens:u32 experts:u32 "
                     "top_k:u32 renormalize:u32 scale:f32")
# the same over a router Linear with a bias (gpt-oss): the logits are float32 sums
# (GEMV/GEMM_F32_UNROUNDED's) and the keys and the softmax's logits bf16(logit +
# logit_bias[e]) (logit_bias bf16 [experts]), one rounding as transformers' bf16 Linear
MOE_TOPK_SOFTMAX_BIAS = S("moe_router", "moe_topk_softmax_bias_f32",
                          "logits:ptr topk_ids:ptr topk_weights:ptr tokens:u32 experts:u32 "
                          "top_k:u32 renormalize:u32 scale:f32 logit_bias:ptr")
# sigmoid scoring: experts are chosen by sigmoid(logit) + bias[e] (bias f32 [experts],
# e_score_correction_bias; a null pointer means no bias), weighted by the unbiased sigmoid
MOE_TOPK_SIGMOID = S("moe_router", "moe_topk_sigmoid_f32",
                     "logits:ptr bias:ptr topk_ids:ptr topk_weights:ptr tokens:u32 experts:u32 "
                     "top_k:u32 renormalize:u32 scale:f32")
# Decode router (1..8 tokens) in one launch: logits f32 [tokens, experts] = the bf16 product
# x bf16 [tokens, hidden] . w_gate bf16 [experts, hidden] widened (as GEMV_F32OUT writes it),
# then the top-k of the kernels above from them; the last block routes (counter: one u32,
# zero before and after); 2 * tokens * hidden bytes of dynamic shared memory (x)
# With shared_slots > 0 (a shared expert folded in as that many slots after the top_k routed
# ones, ops.moe.MoeShape.shared_slots) shared_gate is its gate row bf16 [hidden]:
# shared_logits f32 [tokens] = bf16(x . shared_gate), and slot top_k + c of each token gets
# id experts + c, weight bf16(sigmoid(shared logit)); a null shared_gate is an ungated shared
# expert (GLM-4.5): weight 1, shared_logits unused. ids/weights rows are top_k + shared_slots
# long. unrounded != 0: the experts' logits are the float32 sums, not bf16-rounded (a float32
# router, as GEMV_F32_UNROUNDED writes them; the shared gate's stays rounded).
MOE_GATE_TOPK_SOFTMAX = S("moe_router", "moe_gate_topk_softmax_bf16",
                          "x:ptr w_gate:ptr shared_gate:ptr logits:ptr shared_logits:ptr "
                          "topk_ids:ptr topk_weights:ptr counter:ptr tokens:u32 experts:u32 "
                          "hidden:u32 top_k:u32 shared_slots:u32 renormalize:u32 scale:f32 "
                          "unrounded:u32")
MOE_GATE_TOPK_SIGMOID = S("moe_router", "moe_gate_topk_sigmoid_bf16",
                          "x:ptr w_gate:ptr shared_gate:ptr bias:ptr logits:ptr "
                          "shared_logits:ptr topk_ids:ptr topk_weights:ptr counter:ptr "
                          "tokens:u32 experts:u32 hidden:u32 top_k:u32 shared_slots:u32 "
                          "renormalize:u32 scale:f32 unrounded:u32")
# The same two routers with the model's add_rmsnorm before them done by their blocks
# (moe_router.cu NormIn: residual += delta, normed = RMSNorm(residual) * w, or * (1 + w) with
# offset; both written by the last block): the default (ATLAS_MOE_ROUTER_NORM=0: never)
_NORM_ROUTER = "residual:ptr delta:ptr norm_w:ptr normed:ptr w_gate:ptr shared_gate:ptr "
_NORM_ROUTER_TAIL = ("logits:ptr shared_logits:ptr topk_ids:ptr topk_weights:ptr counter:ptr "
                     "tokens:u32 experts:u32 hidden:u32 top_k:u32 shared_slots:u32 "
                     "renormalize:u32 scale:f32 unrounded:u32 eps:f32 offset:u32")
MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX = S("moe_router", "moe_add_rmsnorm_gate_topk_softmax_bf16",
                                      _NORM_ROUTER + _NORM_ROUTER_TAIL)
MOE_ADD_RMSNORM_GATE_TOPK_SIGMOID = S("moe_router", "moe_add_rmsnorm_gate_topk_sigmoid_bf16",
                                      _NORM_ROUTER + "bias:ptr " + _NORM_ROUTER_TAIL)
# The two NormIn routers at batch 1 as one cluster of 16 blocks (ATLAS_MOE_ROUTER_CLUSTER,
# ops.moe.router_uses_cluster): the logits meet in rank 0's shared memory, no counter
_CLUSTER_ROUTER_TAIL = ("logits:ptr shared_logits:ptr topk_ids:ptr topk_weights:ptr "
                        "tokens:u32 experts:u32 hidden:u32 top_k:u32 shared_slots:u32 "
                        "renormalize:u32 scale:f32 unrounded:u32 eps:f32 offset:u32")
MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SOFTMAX = S(
    "moe_router", "moe_add_rmsnorm_gate_topk_cluster_softmax_bf16",
    _NORM_ROUTER + _CLUSTER_ROUTER_TAIL)
MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SIGMOID = S(
    "moe_router", "moe_add_rmsnorm_gate_topk_cluster_sigmoid_bf16",
    _NORM_ROUTER + "bias:ptr " + _CLUSTER_ROUTER_TAIL)
# The same router's gate GEMV alone (logits and the shared expert's logit, no top-k, no
# counter): at batch 1 the expert kernels route from the logits themselves
# (ops.moe.routes_in_experts: moe_gate_up_gemv_tiles_route_bf16, moe_down_gemv_route_*).
MOE_GATE_LOGITS = S("moe_router", "moe_gate_logits_bf16",
                    "x:ptr w_gate:ptr shared_gate:ptr logits:ptr shared_logits:ptr tokens:u32 "
                    "experts:u32 hidden:u32 shared_slots:u32 unrounded:u32")
# Decode (1..8 tokens), one launch per projection over all selected experts. Weights:
# w_gate_up bf16 [experts, 2 inter, hidden] (gate rows, then up rows), w_down bf16
# [experts, hidden, inter]. act bf16 [tokens, top_k, inter] = swiglu of the selected
# expert's gate/up products (each rounded to bf16 first); an id outside [0, experts) gives
# zeros there and nothing in the sum. Slots top_k .. top_k + shared_slots - 1 of a token are
# the shared expert's intermediate columns in chunks of inter (shared_gate_up bf16
# [2 shared_inter, hidden], gate rows then up rows; shared_down bf16 [hidden, shared_inter];
# act past shared_inter is zero, which the down kernels rely on); act/ids/weights rows are
# top_k + shared_slots long. 2 * tokens * hidden bytes of dynamic shared memory (x); grid
# x: column groups of 8 in blocks of ops.moe.gate_up_groups_per_block.
_MOE_GATE_UP = ("x:ptr w_gate_up:ptr topk_ids:ptr act:ptr tokens:u32 top_k:u32 hidden:u32 "
                "inter:u32 experts:u32 shared_gate_up:ptr shared_slots:u32 shared_inter:u32")
MOE_GATE_UP_SILU = S("moe_decode", "moe_gate_up_silu_bf16", _MOE_GATE_UP)
# The same with the expert epilogue (gpt-oss; ops.moe.ExpertEpilogue), on the routed slots:
# expert_bias bf16 [experts, 2 inter] (or null) added to the bf16 gate and up products,
# g = bf16(g + b), and with glu_limit > 0 the clamped GLU act = bf16(bf16(u' + 1) * bf16(g' *
# bf16(sigmoid(bf16(glu_alpha g'))))), g' = bf16(min(g, limit)), u' = bf16(clamp(u, -limit,
# limit)); the same grid, threads and shared memory
_EPILOGUE = " expert_bias:ptr glu_alpha:f32 glu_limit:f32"
MOE_GATE_UP_EPILOGUE = S("moe_decode", "moe_gate_up_epilogue_bf16", _MOE_GATE_UP + _EPILOGUE)
# The same act from a GEMV-shaped launch (the default; ops.moe.gate_up_uses_gemv): grid
# (ceil(inter / 2), tokens * slots), ops.moe.gate_up_gemv_threads(hidden) threads, no dynamic
# shared memory; a block computes two columns of one expert for up to 4 pairs routed to it.
# _single: tokens == 1 only (fewer registers). No expert epilogue (ops.moe.gate_up_uses_gemv).
MOE_GATE_UP_GEMV = S("moe_decode", "moe_gate_up_gemv_bf16",
                     "x:ptr w_gate_up:ptr topk_ids:ptr act:ptr tokens:u32 top_k:u32 hidden:u32 "
                     "inter:u32 experts:u32 shared_gate_up:ptr shared_slots:u32 "
                     "shared_inter:u32")
MOE_GATE_UP_GEMV_SINGLE = S("moe_decode", "moe_gate_up_gemv_bf16_single",
                            "x:ptr w_gate_up:ptr topk_ids:ptr act:ptr tokens:u32 top_k:u32 "
                            "hidden:u32 inter:u32 experts:u32 shared_gate_up:ptr "
                            "shared_slots:u32 shared_inter:u32")
# The batch-1 default (ops.moe.gate_up_tiles): the same act, grid (ceil(ceil(inter / 2) /
# tiles), slots), a block taking `tiles` column pairs of one slot one after the other.
MOE_GATE_UP_GEMV_TILES = S("moe_decode", "moe_gate_up_gemv_tiles_bf16",
                           "x:ptr w_gate_up:ptr topk_ids:ptr act:ptr tokens:u32 top_k:u32 "
                           "hidden:u32 inter:u32 experts:u32 shared_gate_up:ptr "
                           "shared_slots:u32 shared_inter:u32 tiles:u32")
# out bf16 [tokens, hidden] = bf16(sum_j topk_weights[t, j] * bf16(act[t, j] . w_down[e_j]));
# with shared slots: bf16(that sum) + bf16(topk_weights[t, top_k] * bf16(shared act .
# shared_down)) (transformers' bf16 op boundaries); a block covers rows_per_block rows of one
# token for all its slots, in groups of ops.moe.down_rows_per_group rows (ops.moe.down_rows),
# with ops.moe.down_smem bytes of dynamic shared memory (the token's act rows). It reads
# topk_ids / topk_weights before its PDL wait: their writer must be at least two launches
# back, with a launch between that waits before it lets dependents start (moe_gate_up_silu)
_MOE_DOWN = ("act:ptr w_down:ptr topk_ids:ptr topk_weights:ptr out:ptr tokens:u32 "
             "top_k:u32 hidden:u32 inter:u32 experts:u32 rows_per_block:u32 "
             "shared_down:ptr shared_slots:u32 shared_inter:u32")
MOE_DOWN_SUM = S("moe_decode", "moe_down_sum_bf16", _MOE_DOWN)
# the same with the down bias (gpt-oss; ops.moe.ExpertEpilogue): expert_bias bf16 [experts,
# hidden] (or null), each routed slot's y = bf16(bf16(act . w_down) + expert_bias[e]) before
# it is weighted
MOE_DOWN_SUM_BIAS = S("moe_decode", "moe_down_sum_bias_bf16", _MOE_DOWN + " expert_bias:ptr")
# The same down product as one GEMV-shaped launch (the default at batch 1;
# ops.moe.down_uses_gemv): the same arguments with rows_per_block a multiple of
# ops.moe.DOWN_GEMV_ROWS (ops.moe.down_gemv_rows: tiles of that many rows, one after the
# other), grid (ceil(hidden / rows_per_block), tokens), 256 threads, no dynamic shared memory;
# (top_k + shared_slots) x inter / 8 chunks a row, inter a multiple of 256. The routing is
# read before the PDL wait, as MOE_DOWN_SUM's.
MOE_DOWN_GEMV_SUM = S("moe_decode", "moe_down_gemv_sum_bf16", _MOE_DOWN)
# (its twins holding one chunk-step count's code, by ops.moe.down_gemv_steps: 1, 2, 3, and 4
# or more; the default, ATLAS_MOE_DOWN_ONE_STEP=0 the general one)
MOE_DOWN_GEMV_SUM_S1 = S("moe_decode", "moe_down_gemv_sum_s1_bf16", _MOE_DOWN)
MOE_DOWN_GEMV_SUM_S2 = S("moe_decode", "moe_down_gemv_sum_s2_bf16", _MOE_DOWN)
MOE_DOWN_GEMV_SUM_S3 = S("moe_decode", "moe_down_gemv_sum_s3_bf16", _MOE_DOWN)
MOE_DOWN_GEMV_SUM_S4 = S("moe_decode", "moe_down_gemv_sum_s4_bf16", _MOE_DOWN)
MOE_DOWN_GEMV_SUM_STEPS = (MOE_DOWN_GEMV_SUM_S1, MOE_DOWN_GEMV_SUM_S2, MOE_DOWN_GEMV_SUM_S3,
                           MOE_DOWN_GEMV_SUM_S4)
# The batch-1 tiled gate/up and the down GEMVs routing from the router's logits (what
# moe_gate_topk_* would write, computed by each block with its code: the same bits) in place
# of topk_ids / topk_weights: logits f32 [tokens, experts], shared_logits f32 [tokens] (0: an
# ungated shared expert, weight 1), bias (sigmoid scoring's, or 0), sigmoid 0 / 1,
# renormalize and scale as the router's; at most
# ops.moe.ROUTE_IN_EXPERTS_MAX_EXPERTS experts. The down twin reads them before its PDL wait
# (the router is two launches back).
MOE_GATE_UP_GEMV_TILES_ROUTE = S(
    "moe_decode", "moe_gate_up_gemv_tiles_route_bf16",
    "x:ptr w_gate_up:ptr logits:ptr bias:ptr act:ptr tokens:u32 top_k:u32 hidden:u32 "
    "inter:u32 experts:u32 shared_gate_up:ptr shared_slots:u32 shared_inter:u32 tiles:u32 "
    "sigmoid:u32")
MOE_DOWN_GEMV_ROUTE_SUM = S(
    "moe_decode", "moe_down_gemv_route_sum_bf16",
    "act:ptr w_down:ptr logits:ptr shared_logits:ptr bias:ptr out:ptr tokens:u32 top_k:u32 "
    "hidden:u32 inter:u32 experts:u32 rows_per_block:u32 shared_down:ptr shared_slots:u32 "
    "shared_inter:u32 renormalize:u32 scale:f32 sigmoid:u32")
# Decode (1..8 tokens) over quantized experts (kernels/<hw>/common/moe_decode_quant.cu,
# ops/moe_quant.py): every expert's rows stacked in one matrix (gate_up [experts * 2 inter,
# hidden], expert e's gate rows then up rows; down [experts * hidden, inter]), FP8 E4M3 codes
# with f32 scales through the Fp8ScaleMap arguments, or NVFP4 (packed E2M1 [rows, k / 2],
# E4M3 group scales [rows, k / 16], f32 row scales [rows]). topk rows are `slots` long: the
# `routed` top-k, then a shared expert folded in as expert (routed experts + c) of the
# matrix (`experts` counts it); act bf16 [tokens, slots, inter] and out bf16 [tokens,
# hidden] as moe_gate_up_silu_bf16 / moe_down_sum_bf16 compute them; grid (ceil(inter / 8),
# tokens * slots) and (ceil(hidden / 8), tokens), 256 threads, k % 16 == 0.
_MOE_Q_MAP = "row_shift:u32 row_stride:u32 col_shift:u32 col_stride:u32"
_MOE_Q_GATE_UP = "topk_ids:ptr act:ptr tokens:u32 slots:u32 hidden:u32 inter:u32 experts:u32"
_MOE_Q_DOWN = ("topk_ids:ptr topk_weights:ptr out:ptr tokens:u32 slots:u32 routed:u32 "
               "hidden:u32 inter:u32 experts:u32")
MOE_GATE_UP_SILU_FP8 = S("moe_decode_quant", "moe_gate_up_silu_fp8",
                         f"x:ptr w:ptr scale:ptr {_MOE_Q_GATE_UP} {_MOE_Q_MAP}")
MOE_GATE_UP_SILU_NVFP4 = S("moe_decode_quant", "moe_gate_up_silu_nvfp4",
                           f"x:ptr w:ptr scale:ptr row_scale:ptr {_MOE_Q_GATE_UP}")
MOE_DOWN_SUM_FP8 = S("moe_decode_quant", "moe_down_sum_fp8",
                     f"act:ptr w:ptr scale:ptr {_MOE_Q_DOWN} {_MOE_Q_MAP}")
MOE_DOWN_SUM_NVFP4 = S("moe_decode_quant", "moe_down_sum_nvfp4",
                       f"act:ptr w:ptr scale:ptr row_scale:ptr {_MOE_Q_DOWN}")
# The same two down launches reading the routing (topk_ids, topk_weights) before their PDL
# wait and requesting their first round of weights into L2 (ATLAS_MOE_QUANT_DOWN_EARLY):
# their writer (the router) must be at least two launches back, with a launch between that
# waits before it lets dependents start (moe_gate_up_silu_*), as MOE_DOWN_SUM's.
MOE_DOWN_SUM_EARLY_FP8 = replace(MOE_DOWN_SUM_FP8, func="moe_down_sum_early_fp8")
MOE_DOWN_SUM_EARLY_NVFP4 = replace(MOE_DOWN_SUM_NVFP4, func="moe_down_sum_early_nvfp4")
# the prefill path's NVFP4 dequantize for k % 16 == 0 (DEQUANT_NVFP4 needs k % 32): w_out
# bf16 [n, k] = bf16(e2m1 * f32(e4m3(s) * row_scale)); grid ceil(n k / 16 / 256), 256 threads
MOE_DEQUANT_NVFP4 = S("moe_decode_quant", "moe_dequant_nvfp4_bf16",
                      "w:ptr scale:ptr row_scale:ptr w_out:ptr n:u32 k:u32")
# Grouped path (more tokens): the slots s = t * top_k + j are sorted by expert into M-tiles
# of ops.moe.MOE_TILE_M rows. sorted_slots i32 [max_tiles * MOE_TILE_M] (-1 = padding),
# tile_expert i32 [max_tiles] (-1 = unused tile). Slots of one expert keep ascending order.
MOE_ALIGN = S("moe_grouped", "moe_align_i32",
              "topk_ids:ptr sorted_slots:ptr tile_expert:ptr slots:u32 experts:u32 "
              "max_tiles:u32")
# act bf16 [max_tiles * MOE_TILE_M, inter], row p for slot sorted_slots[p] (padding rows 0)
_MOE_GROUPED_GATE_UP = ("x:ptr w_gate_up:ptr sorted_slots:ptr tile_expert:ptr act:ptr "
                        "top_k:u32 hidden:u32 inter:u32 experts:u32 max_tiles:u32")
MOE_GROUPED_GATE_UP = S("moe_grouped", "moe_grouped_gate_up_silu_bf16", _MOE_GROUPED_GATE_UP)
# y bf16 [slots, hidden]: y[sorted_slots[p]] = bf16(act[p] . w_down[expert of p's tile])
_MOE_GROUPED_DOWN = ("act:ptr w_down:ptr sorted_slots:ptr tile_expert:ptr y:ptr hidden:u32 "
                     "inter:u32 experts:u32 max_tiles:u32")
MOE_GROUPED_DOWN = S("moe_grouped", "moe_grouped_down_bf16", _MOE_GROUPED_DOWN)
# the two with gpt-oss's expert epilogue (ops.moe.ExpertEpilogue): gate/up with
# MOE_GATE_UP_EPILOGUE's (expert_bias, glu_alpha, glu_limit), down with the down bias,
# y = bf16(y + expert_bias[e]) (bf16 [experts, hidden], or null)
MOE_GROUPED_GATE_UP_EPILOGUE = S("moe_grouped", "moe_grouped_gate_up_epilogue_bf16",
                                 _MOE_GROUPED_GATE_UP + _EPILOGUE)
MOE_GROUPED_DOWN_BIAS = S("moe_grouped", "moe_grouped_down_bias_bf16",
                          _MOE_GROUPED_DOWN + " expert_bias:ptr")
# out bf16 [tokens, hidden] = bf16(sum_j topk_weights[t, j] * y[t * top_k + j]), j in order,
# skipping ids outside [0, experts)
MOE_COMBINE = S("moe_grouped", "moe_combine_bf16",
                "y:ptr topk_ids:ptr topk_weights:ptr out:ptr tokens:u32 top_k:u32 hidden:u32 "
                "experts:u32")
# the same two products on Hopper warpgroup MMA (kernels/hopper/common/moe_grouped_sm90.cu,
# sm_90a only; 64 x 256 tiles over the same align layout), launched with ops.moe.MOE_SM90_SMEM
# bytes of dynamic shared memory
MOE_GROUPED_GATE_UP_SM90 = S("moe_grouped_sm90", "moe_grouped_gate_up_silu_sm90_bf16",
                             _MOE_GROUPED_GATE_UP)
MOE_GROUPED_DOWN_SM90 = S("moe_grouped_sm90", "moe_grouped_down_sm90_bf16", _MOE_GROUPED_DOWN)
MOE_GROUPED_GATE_UP_SM90_EPILOGUE = S(
    "moe_grouped_sm90", "moe_grouped_gate_up_epilogue_sm90_bf16", _MOE_GROUPED_GATE_UP + _EPILOGUE)
MOE_GROUPED_DOWN_SM90_BIAS = S("moe_grouped_sm90", "moe_grouped_down_bias_sm90_bf16",
                               _MOE_GROUPED_DOWN + " expert_bias:ptr")

# --- shared expert (kernels/<hw>/common/moe_shared.cu) --------------------------------------
# out bf16 [tokens, hidden] = bf16(routed + bf16(bf16(sigmoid(gate[t * gate_stride])) * shared)):
# the Qwen2-MoE shared expert scaled by its sigmoid gate and added to the routed sum; gate is
# f32 (a bf16-rounded logit, as the f32-output linear writes it); out may alias routed. A null
# gate is an ungated shared expert (GLM-4.5): out = bf16(routed + shared).
MOE_SHARED_ADD = S("moe_shared", "moe_shared_add_bf16",
                   "routed:ptr shared:ptr gate:ptr out:ptr tokens:u32 hidden:u32 gate_stride:u32")

# --- expert parallelism (kernels/<hw>/common/moe_ep.cu) ---------------------------------------
# in place over the first `width` columns of ids i32 [rows, stride] (the routed top-k ids;
# a shared expert's slots follow them): e - first where first <= e < first + count (an
# expert this rank holds, as its local index), else -1 (skipped by the expert kernels)
MOE_EP_LOCALIZE = S("moe_ep", "moe_ep_localize_i32",
                    "ids:ptr rows:u32 stride:u32 width:u32 first:u32 count:u32")

# --- one-shot all-reduce over peer-mapped workspaces (kernels/<hw>/common/allreduce.cu) -------
# out bf16 [count] = bf16(sum over ranks r in order of float(in_r)), through each rank's
# workspace (peers: u64 [world], every rank's workspace as mapped here; layout and protocol
# in the .cu file and ops/allreduce.py); out may alias in
ALLREDUCE_ONESHOT = S("allreduce", "allreduce_oneshot_bf16",
                      "peers:ptr in:ptr out:ptr count:u32 capacity:u32 world:u32 rank:u32")

# --- benchmark-only synthetic weights (kernels/<hw>/common/fill_random.cu) ---------------------
# out bf16 [n] = bf16(mean + std * z_i), z_i ~ N(0, 1): Box-Muller over SplitMix64 of the
# counter (key_hi:key_lo) + (i + 1) * golden, a pure function of (key, i)
FILL_NORMAL = S("fill_random", "fill_normal_bf16",
                "out:ptr n:u32 key_lo:u32 key_hi:u32 mean:f32 std:f32")

# --- persistent batch-1 decode of a dense bf16 model (kernels/hopper/common/decode_persistent.cu)
# Every transformer layer of one decode step of ONE sequence in one launch (grid = SM count,
# one block per SM, device-wide barriers between phases; opt-in ATLAS_PERSISTENT_DECODE=1).
# layers: u64 [num_layers, 10] = in_norm, qkv_w, q_norm (0: none), k_norm, k_cache, v_cache,
# o_w, post_norm, gate_up_w, down_w (ops/decode_persistent.LAYER_POINTERS). resid bf16
# [hidden] in place; qkv, attn, act: the step's scratch rows; part_o / part_ml: decode
# attention's partials with `splits` slots a head (decode_split_rule); sync u32
# [ops/decode_persistent.sync_words]: zero at allocation; a 64-bit barrier arrival count that
# only grows (the same grid every launch on it), then at word 32 the q heads' split tickets,
# then an exit ticket and per-layer readiness counts (schedule 1), all left zero. schedule:
# 1 orders the phases by those counts, 0 by device-wide barriers (ATLAS_PERSISTENT_FLAGS;
# no effect on the values). prefetch_bytes,
# stage0, stage1: how weights are fetched ahead (ops/decode_persistent.py stage_plan; no
# effect on the values); trace: null, or u64
# [grid, 1 + 10 num_layers] that each block's phase timeline is written to (tools/gpu/
# persistent_trace.py). The rest as
# DECODE_ATTN_ROPE (row 0 of block_tables).
DECODE_PERSISTENT = S("decode_persistent", "decode_persistent_bf16",
                      "layers:ptr resid:ptr qkv:ptr attn:ptr act:ptr part_o:ptr part_ml:ptr "
                      "sync:ptr cos_sin:ptr positions:ptr slots:ptr block_tables:ptr "
                      "kv_lens:ptr num_layers:u32 hidden:u32 hq:u32 hkv:u32 head_dim:u32 "
                      "inter:u32 block_size:u32 splits:u32 prefetch_bytes:u32 stage0:u32 "
                      "stage1:u32 scale:f32 eps:f32 trace:ptr schedule:u32")
