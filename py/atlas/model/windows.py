"""Sliding-window attention: which layers' windows bind in an engine, and what they need.

A layer's window (`ModelConfig.attention_windows`) binds only where a sequence can outgrow
it: a window of at least the engine's max_seq_len never hides a key, so such a layer runs as
full attention (window 0, the kernels' every-key path) and needs nothing. A binding window
runs on the attention kernels that slide (prefill attention and the long decode kernel,
`ops.attention_long.slides`); the routes that do not slide are refused here, at load, naming
the way out, rather than attending past the window at run time.
"""

from __future__ import annotations

from ..core.config import ModelConfig


class WindowError(ValueError):
    """A sliding window binds in a configuration whose attention route does not slide."""


def binding_windows(cfg: ModelConfig, max_seq_len: int) -> tuple[int, ...]:
    """Each layer's window where it binds (0 < window < max_seq_len), else 0; one entry a
    layer, all zero for a model without sliding layers."""
    windows = cfg.attention_windows or (0,) * cfg.num_hidden_layers
    return tuple(w if 0 < w < max_seq_len else 0 for w in windows)


def check_windows(windows: tuple[int, ...], max_seq_len: int, *, quantized_kv: bool,
                  slides: bool) -> None:
    """Refuse what a binding window cannot run on: quantized KV pools (their attention
    kernels take no window) and a target whose decode kernel does not slide (`slides`:
    ops.attention_long.slides for the model's head dim). Speculative verification slides:
    its rows attend one a sequence on the long kernel (model.verifies_on_kernel)."""
    window = max(windows, default=0)
    if not window:
        return
    way_out = f"or serve at most --max-seq-len {min(w for w in windows if w)} (the window)"
    if quantized_kv:
        raise WindowError(f"sliding-window attention (window {window} < --max-seq-len "
                          f"{max_seq_len}) runs on bf16 KV pools only: use --kv-cache-dtype "
                          f"bf16 {way_out}")
    if not slides:
        raise WindowError(f"sliding-window attention (window {window} < --max-seq-len "
                          f"{max_seq_len}) needs the long decode attention kernel "
                          f"(attention_long: Hopper targets, head_dim 64 / 128 / 256, "
                          f"ATLAS_DECODE_ATTN_LONG on) {way_out}")
