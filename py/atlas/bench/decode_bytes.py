"""Bytes a decode step must read per token: the denominator of a bandwidth fraction.

A dense model reads all its weights per decode step, so `weights_bytes * tok/s` is its
traffic. A mixture-of-experts model reads only the experts its tokens select: at batch 1
that is top_k of num_experts per sparse layer (Qwen3-30B-A3B: 8 of 128), so its weights'
size overstates the traffic ~4x. This model counts, per token of a batch-1 step at a given
context length, every tensor the step must read once:

* embedding row; per layer the two RMSNorm weights (and q/k norms), q/k/v/o projections,
  the KV cache of the context (K and V, bf16); the router, the k selected experts'
  gate/up/down (sparse layers) or the dense MLP; the shared expert and its gate;
* the final norm and the LM head.

A hybrid model (Qwen3.5, Qwen3-Next) has attention and a KV cache in its full-attention layers
only (their q_proj twice as wide: each head's output gate); each linear-attention layer reads
its fused input projection, conv taps, per-head scalars, gated-norm weight and output
projection, and per sequence its recurrent state (conv window and delta-rule matrix), which it
reads and writes back: counted twice (`linear_state`).

With `quant` (a checkpoint format of `atlas models quantize`), the projections it quantizes
(attention q/k/v/o, the experts, the shared expert's projections, dense MLPs) count their
codes and scales per value (`QUANT_BYTES`); routers, gates, norms, the Gated-DeltaNet
projections, embedding and LM head stay bf16.

Activations and the KV append are a few KB and not counted. For batch B > 1 the experts term
uses the expected number of distinct experts B tokens select under uniform routing,
E * (1 - (1 - k/E)^B), an estimate (real routing is not uniform), labelled as such.
"""

from __future__ import annotations

from ..core.config import LinearAttentionConfig, ModelConfig
from ..core.head_dims import padded_head_dim

BF16 = 2
#: bytes per weight value of each format, scales included: FP8 with a float32 per 128 x 128
#: block (or per tensor), NVFP4's half byte plus an E4M3 scale per 16 values
QUANT_BYTES = {"bf16": float(BF16), "fp8-block": 1.0 + 4.0 / (128 * 128), "fp8-tensor": 1.0,
               "nvfp4": 0.5 + 1.0 / 16}


def expected_distinct_experts(experts: int, top_k: int, batch: int) -> float:
    """Distinct experts `batch` tokens select when each picks top_k of `experts` uniformly."""
    return experts * (1.0 - (1.0 - top_k / experts) ** batch)


def decode_bytes_per_step(cfg: ModelConfig, context: int, batch: int = 1,
                          quant: str = "bf16", lm_head: bool = False,
                          linear_attn: bool = False) -> dict[str, float]:
    """Bytes one decode step of `batch` sequences at `context` tokens reads, by component
    (`quant`: the format of the quantized projections, a QUANT_BYTES key; `lm_head`,
    `linear_attn`: the LM head, the Gated-DeltaNet projections in that format too). K/V is
    counted as the kernels read it: rows of the padded head dim (Phi-3's 96 as 128) and, in a
    sliding layer, only the window's keys."""
    q = QUANT_BYTES[quant]
    h, d = cfg.hidden_size, cfg.head_dim
    q_rows, kv_rows = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    cache_row = cfg.num_key_value_heads * padded_head_dim(d)
    out = {"embedding": float(batch * h * BF16), "norms": float(h * BF16),  # + final norm
           "attention": 0.0, "kv_cache": 0.0, "linear_attention": 0.0, "linear_state": 0.0,
           "router": 0.0, "experts": 0.0, "shared_experts": 0.0, "dense_mlp": 0.0,
           "lm_head": float(cfg.vocab_size * h * (q if lm_head else BF16))}
    moe, la = cfg.moe, cfg.linear_attention
    for layer in range(cfg.num_hidden_layers):
        out["norms"] += 2 * h * BF16
        if la is not None and cfg.layer_types[layer] == "linear_attention":
            out["linear_attention"] += linear_layer_weight_bytes(la, h,
                                                                 q if linear_attn else BF16)
            out["linear_state"] += 2 * batch * linear_state_bytes(la)
        else:
            gate_rows = q_rows if cfg.is_hybrid else 0  # gated attention: [query | gate]
            qk_norm = (q_rows + kv_rows) if cfg.qk_norm_whole else 2 * d
            out["norms"] += (qk_norm if cfg.has_qk_norm else 0) * BF16
            out["attention"] += ((q_rows + gate_rows + 2 * kv_rows) * h + h * q_rows) * q
            window = cfg.attention_windows[layer] if cfg.attention_windows else 0
            keys = min(context, window) if window else context
            out["kv_cache"] += batch * 2 * keys * cache_row * BF16
        if moe is None or not moe.is_sparse(layer):
            out["dense_mlp"] += 3 * cfg.intermediate_size * h * q
            continue
        e = moe.num_experts
        out["router"] += e * h * BF16
        out["experts"] += (expected_distinct_experts(e, moe.top_k, batch)
                           * 3 * moe.intermediate_size * h * q)
        if moe.shared_intermediate_size:  # and its gate row, where it has one
            gate = BF16 if moe.shared_gated else 0
            out["shared_experts"] += (3 * moe.shared_intermediate_size * q + gate) * h
    return out


def linear_layer_weight_bytes(la: LinearAttentionConfig, hidden: int,
                              proj_bytes: float = BF16) -> float:
    """A Gated-DeltaNet layer's weights: [qkv | z | b | a] projection, conv taps, A_log and
    dt_bias, the gated norm (bf16), the output projection; the two projections at
    `proj_bytes` a value."""
    in_rows = la.conv_dim + la.value_dim + 2 * la.num_value_heads
    return float((in_rows * hidden + hidden * la.value_dim) * proj_bytes
                 + (la.conv_dim * la.conv_kernel + 2 * la.num_value_heads
                    + la.value_head_dim) * BF16)


def linear_state_bytes(la: LinearAttentionConfig) -> float:
    """One sequence's recurrent state in one layer: bf16 conv window, f32 delta-rule matrix."""
    return float((la.conv_kernel - 1) * la.conv_dim * BF16
                 + la.num_value_heads * la.key_head_dim * la.value_head_dim * 4)
