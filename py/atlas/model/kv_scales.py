"""FP8 KV-cache scales a checkpoint ships (`k_scale` / `v_scale` per attention layer).

Spellings: `model.layers.{i}.self_attn.{k,v}_scale` (compressed-tensors, vLLM) and
`model.layers.{i}.self_attn.{k,v}_proj.{k,v}_scale` (ModelOpt). A scale is one value for the
layer (shape [] or [1], used for every kv head) or one per kv head ([num_kv_heads]); it
dequantizes (value = code * scale), like the pools' scales. A layer with one of the two
and not the other is an error naming the missing tensor; a layer with neither is calibrated.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ..runtime.weights import WeightError, WeightStore
from .loaders.linear_plan import _read_scale


def _find(store: WeightStore, layer: int, which: str) -> str | None:
    for name in (f"model.layers.{layer}.self_attn.{which}_scale",
                 f"model.layers.{layer}.self_attn.{which}_proj.{which}_scale"):
        if name in store:
            return name
    return None


def checkpoint_kv_scales(store: WeightStore, layers: Iterable[int], num_kv_heads: int
                         ) -> dict[int, np.ndarray]:
    """Model layer -> f32 [2, num_kv_heads] (K, V) for every layer the checkpoint scales."""
    out: dict[int, np.ndarray] = {}
    allowed = ((), (1,), (num_kv_heads,))
    for layer in layers:
        names = {w: _find(store, layer, w) for w in ("k", "v")}
        if names["k"] is None and names["v"] is None:
            continue
        for w, other in (("k", "v"), ("v", "k")):
            if names[w] is None:
                raise WeightError(f"{store.model_dir}: layer {layer} has KV scale "
                                  f"{names[other]!r} but no {w}_scale tensor")
        rows = []
        for w in ("k", "v"):
            name = names[w]
            assert name is not None
            value = _read_scale(store, f"model.layers.{layer}.self_attn", name, allowed,
                                "the FP8 KV cache of")
            if not (value > 0).all():
                raise WeightError(f"{store.model_dir}: KV scale tensor {name!r} must be "
                                  "positive")
            rows.append(np.broadcast_to(value.reshape(-1), (num_kv_heads,)))
        out[layer] = np.stack(rows).astype(np.float32)
    return out
