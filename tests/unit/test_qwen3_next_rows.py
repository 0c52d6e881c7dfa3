"""Qwen3-Next's key-head-grouped linear-attention projections land in the kernels'
[q | k | v | z | b | a] row order: the row moves are checked against the grouping rule of
transformers' fix_query_key_value_ordering, written here as numpy reshapes and splits."""

import numpy as np

from atlas.core.config import LinearAttentionConfig
from atlas.model.loaders.hybrid import grouped_in_proj_moves


def _hf_order(qkvz: np.ndarray, ba: np.ndarray, la: LinearAttentionConfig) -> np.ndarray:
    """Rows of [q|k|v|z|b|a] as transformers derives them from the grouped projections."""
    hk, dk, dv = la.num_key_heads, la.key_head_dim, la.value_head_dim
    r = la.num_value_heads // hk
    g = qkvz.reshape(hk, 2 * dk + 2 * r * dv, -1)
    q, k, v, z = np.split(g, np.cumsum([dk, dk, r * dv]), axis=1)
    b, a = np.split(ba.reshape(hk, 2 * r, -1), [r], axis=1)
    return np.concatenate([x.reshape(-1, qkvz.shape[-1]) for x in (q, k, v, z, b, a)])


def _apply(buf: np.ndarray, la: LinearAttentionConfig) -> np.ndarray:
    out = np.full_like(buf, -1)
    for m in grouped_in_proj_moves(la):
        out[m.dst:m.dst + m.rows] = buf[m.src:m.src + m.rows]
    return out


def test_moves_match_transformers_grouping_for_several_head_ratios() -> None:
    for hk, hv, dk, dv in ((2, 4, 8, 16), (16, 32, 128, 128), (4, 4, 16, 32), (2, 6, 8, 16)):
        la = LinearAttentionConfig(hk, hv, dk, dv, 4)
        rows_qkvz, rows_ba = 2 * hk * dk + 2 * hv * dv, 2 * hv
        buf = np.arange((rows_qkvz + rows_ba) * 2).reshape(-1, 2)  # every row distinct
        want = _hf_order(buf[:rows_qkvz], buf[rows_qkvz:], la)
        np.testing.assert_array_equal(_apply(buf, la), want)


def test_moves_cover_every_row_exactly_once() -> None:
    la = LinearAttentionConfig(16, 32, 128, 128, 4)
    total = la.conv_dim + la.value_dim + 2 * la.num_value_heads
    src = np.zeros(total, int)
    dst = np.zeros(total, int)
    for m in grouped_in_proj_moves(la):
        src[m.src:m.src + m.rows] += 1
        dst[m.dst:m.dst + m.rows] += 1
    assert (src == 1).all() and (dst == 1).all()
