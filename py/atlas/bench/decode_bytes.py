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

Activations and the KV append are a few KB and not counted. For batch B > 1 the experts term
uses the expected number of distinct experts B tokens select under uniform routing,
E * (1 - (1 - k/E)^B), an estimate (real routing is not uniform), labelled as such.
"""

from __future__ import annotations

from ..core.config import ModelConfig

BF16 = 2


def expected_distinct_experts(experts: int, top_k: int, batch: int) -> float:
    """Distinct experts `batch` tokens select when each picks top_k of `experts` uniformly."""
    return experts * (1.0 - (1.0 - top_k / experts) ** batch)


def decode_bytes_per_step(cfg: ModelConfig, context: int, batch: int = 1) -> dict[str, float]:
    """Bytes one decode step of `batch` sequences at `context` tokens reads, by component."""
    h, d = cfg.hidden_size, cfg.head_dim
    q_rows, kv_rows = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    out = {"embedding": float(batch * h * BF16), "norms": float(h * BF16),  # + final norm
           "attention": 0.0, "kv_cache": 0.0, "router": 0.0, "experts": 0.0,
           "shared_experts": 0.0, "dense_mlp": 0.0, "lm_head": float(cfg.vocab_size * h * BF16)}
    moe = cfg.moe
    for layer in range(cfg.num_hidden_layers):
        out["norms"] += (2 * h + (2 * d if cfg.has_qk_norm else 0)) * BF16
        out["attention"] += ((q_rows + 2 * kv_rows) * h + h * q_rows) * BF16
        out["kv_cache"] += batch * 2 * context * kv_rows * BF16
        if moe is None or not moe.is_sparse(layer):
            out["dense_mlp"] += 3 * cfg.intermediate_size * h * BF16
            continue
        e = moe.num_experts
        out["router"] += e * h * BF16
        out["experts"] += (expected_distinct_experts(e, moe.top_k, batch)
                           * 3 * moe.intermediate_size * h * BF16)
        if moe.shared_intermediate_size:
            out["shared_experts"] += (3 * moe.shared_intermediate_size + 1) * h * BF16
    return out
