"""Host references of the split prefill attention (hopper/common/attention_sm90.cu
prefill_attn_sm90_split_bf16 and prefill_attn_sm90_merge_bf16).

The split entry's partials follow the kernel's partition exactly: a block's rows (queries,
or with `pack` the (query, q head) pairs of one kv head's group) in 128-row tiles, the keys
any of them sees cut into `num_splits` runs of whole key tiles (ops/attention_sm90.
split_tiles), each run's partial per row computed in float64 (o normalized by its own l,
the max scaled score in log2 units, l), stored as the kernel stores them (float32). A
split whose keys a row does not see leaves (-inf, 0) and zeros. The merge weighs each
partial by l 2^(m - max m), as the kernel does.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import PREFILL_ATTN_SM90_MERGE, PREFILL_ATTN_SM90_SPLIT
from ..ops.attention_sm90 import PREFILL_SM90_QUERY_TILE, split_key_tile, split_tiles
from . import HostMemory, reference
from .attention import gather_kv

_LOG2E = 1.0 / np.log(2.0)


def _run_partial(q: np.ndarray, k: np.ndarray, v: np.ndarray, positions: np.ndarray,
                 lo: int, hi: int, scale: float, window: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows q [R, D] at `positions` [R] over keys [lo, hi) of k, v [R, L, D] (each row's
    own kv head's): (o [R, D] normalized by l, m [R] in log2 units, l [R]), float64."""
    keys = np.arange(lo, hi)
    s = np.einsum("rd,rnd->rn", q, k[:, lo:hi]) * scale
    hidden = keys[None, :] > positions[:, None]
    if window:
        hidden |= keys[None, :] <= positions[:, None] - window
    s[hidden] = -np.inf
    rows = q.shape[0]
    m = s.max(axis=-1, initial=-np.inf) if hi > lo else np.full(rows, -np.inf)
    seen = np.isfinite(m)
    p = np.where(seen[:, None], np.exp(s - np.where(seen, m, 0.0)[:, None]), 0.0)
    l = p.sum(axis=-1)
    o = np.einsum("rn,rnd->rd", p, v[:, lo:hi]) / np.where(seen, l, 1.0)[:, None]
    return o, np.where(seen, m * _LOG2E, -np.inf), l


@reference(PREFILL_ATTN_SM90_SPLIT)
def prefill_attn_sm90_split_bf16(mem: HostMemory, grid: Dim3, block: Dim3, q: int,
                                 k_cache: int, v_cache: int, block_tables: int, cu_q: int,
                                 kv_lens: int, out: int, num_seqs: int, hq: int, hkv: int,
                                 head_dim: int, block_size: int, max_blocks: int, scale: float,
                                 window: int, proj_dim: int, num_splits: int, pack: int,
                                 part_o: int, part_ml: int) -> None:
    group = hq // hkv
    pk = group if pack else 1
    d, tile_keys = head_dim, split_key_tile(head_dim)
    cu = mem.view(cu_q, np.int32, num_seqs + 1).astype(np.int64)
    tables = mem.view(block_tables, np.int32, num_seqs * max_blocks).reshape(num_seqs,
                                                                             max_blocks)
    lens = mem.view(kv_lens, np.int32, num_seqs)
    total = int(cu[-1])
    qf = bf16_bits_to_f32(mem.view(q, np.uint16, total * hq * d)).reshape(total, hq, d)
    tokens_rel = total - int(cu[0])
    po = mem.view(part_o, np.float32, tokens_rel * hq * num_splits * d).reshape(
        tokens_rel, hq, num_splits, d) if num_splits > 1 else None
    pml = mem.view(part_ml, np.float32, tokens_rel * hq * num_splits * 2).reshape(
        tokens_rel, hq, num_splits, 2) if num_splits > 1 else None
    o_out = mem.view(out, np.uint16, total * hq * proj_dim).reshape(total, hq, proj_dim)
    for b in range(num_seqs):
        lo, hi, kv_len = int(cu[b]), int(cu[b + 1]), int(lens[b])
        q_len = hi - lo
        if q_len == 0:
            continue
        k = gather_kv(mem, k_cache, tables[b], kv_len, hkv, block_size, d).astype(np.float64)
        v = gather_kv(mem, v_cache, tables[b], kv_len, hkv, block_size, d).astype(np.float64)
        first_pos = kv_len - q_len
        # the blocks of this sequence: (kv head when packed, else q head) x row tiles
        for x in range(hkv if pack else hq):
            for q0 in range(0, q_len * pk, PREFILL_SM90_QUERY_TILE):
                rows = np.arange(q0, min(q0 + PREFILL_SM90_QUERY_TILE, q_len * pk))
                toks = rows // pk
                heads = x * pk + rows % pk if pack else np.full(rows.size, x)
                n_keys = first_pos + min((q0 + PREFILL_SM90_QUERY_TILE - 1) // pk + 1, q_len)
                lo_key = max(first_pos + q0 // pk - (window - 1), 0) if window else 0
                t0, n_tiles = lo_key // tile_keys, -(-n_keys // tile_keys)
                qr = qf[lo + toks, heads].astype(np.float64)
                kr, vr = k[heads // group], v[heads // group]
                for split in range(num_splits):
                    ts, te = split_tiles(n_tiles, t0, num_splits, split)
                    o, m, l = _run_partial(qr, kr, vr, first_pos + toks, ts * tile_keys,
                                           min(te * tile_keys, n_keys), scale, window)
                    if num_splits == 1:
                        o_out[lo + toks, heads] = f32_to_bf16_bits(
                            o.astype(np.float32))[:, :proj_dim]
                        continue
                    assert po is not None and pml is not None
                    rel = lo - int(cu[0]) + toks
                    po[rel, heads, split] = o.astype(np.float32)
                    pml[rel, heads, split, 0] = m.astype(np.float32)
                    pml[rel, heads, split, 1] = l.astype(np.float32)


@reference(PREFILL_ATTN_SM90_MERGE)
def prefill_attn_sm90_merge_bf16(mem: HostMemory, grid: Dim3, block: Dim3, part_o: int,
                                 part_ml: int, cu_q: int, out: int, num_seqs: int, hq: int,
                                 head_dim: int, num_splits: int, proj_dim: int) -> None:
    cu = mem.view(cu_q, np.int32, num_seqs + 1).astype(np.int64)
    first, total = int(cu[0]), int(cu[-1])
    n = total - first
    po = mem.view(part_o, np.float32, n * hq * num_splits * head_dim).reshape(
        n, hq, num_splits, head_dim).astype(np.float64)
    pml = mem.view(part_ml, np.float32, n * hq * num_splits * 2).reshape(
        n, hq, num_splits, 2).astype(np.float64)
    m, l = pml[..., 0], pml[..., 1]
    seen = l > 0
    top = np.where(seen, m, -np.inf).max(axis=-1, keepdims=True)
    w = np.where(seen, l * np.exp2(np.where(seen, m, 0.0) - top), 0.0)
    merged = (w[..., None] * po).sum(axis=2) / w.sum(axis=-1)[..., None]
    o_out = mem.view(out, np.uint16, total * hq * proj_dim).reshape(total, hq, proj_dim)
    o_out[first:] = f32_to_bf16_bits(merged.astype(np.float32))[..., :proj_dim]
