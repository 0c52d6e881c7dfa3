"""Launch builders for attention over the paged KV cache (prefill and split-K decode).

Geometry mirrors kernels/hopper/common/attention.cu: prefill runs one 4-warp block per
(q head, 64-query tile, sequence), heaviest (last) query tiles first; decode runs one
4-warp block per (split, kv head, sequence) that serves every q head of the group (in
passes of 4 heads), then a combine block per (q head, seq). Only the splits the live
kv_len needs (`decode_split_rule`) do work; the others exit at once.
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import DECODE_ATTN, DECODE_ATTN_COMBINE, PREFILL_ATTN
from . import KernelCache
from .attention_long import decode_attention_long, uses_long
from .attention_sm90 import prefill_attention_sm90, uses_sm90

#: head dimensions the kernels are compiled for
HEAD_DIMS = (64, 128, 256)
#: query rows per prefill block (4 warps x 16 rows)
PREFILL_QUERY_TILE = 64
ATTN_THREADS = 128
#: the shortest decode split (attention.cu kMinKeysPerSplit): one load round of a block, so
#: a short context runs a few one-round-trip blocks however many splits the grid has
DECODE_MIN_KEYS_PER_SPLIT = 32


def decode_split_rule(kv_len: int, num_splits: int) -> tuple[int, int]:
    """(keys per split, active splits) of a decode launch for one sequence: split i covers
    keys [i * chunk, min((i + 1) * chunk, kv_len)) for i < active; splits >= active are
    empty and write nothing. Depends on (kv_len, num_splits) only, never on the batch."""
    chunk = max(-(-kv_len // num_splits), DECODE_MIN_KEYS_PER_SPLIT)
    return chunk, -(-kv_len // chunk)


def _check_heads(hq: int, hkv: int, head_dim: int, block_size: int) -> None:
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"attention: head_dim={head_dim} unsupported (compiled: {HEAD_DIMS})")
    if hkv < 1 or hq < hkv or hq % hkv:
        raise ValueError(f"attention: hq={hq} must be a positive multiple of hkv={hkv}")
    if block_size < 1:
        raise ValueError(f"attention: block_size={block_size} must be >= 1")


def prefill_attention(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                      v_cache: DevicePtr, block_tables: DevicePtr, cu_q: DevicePtr,
                      kv_lens: DevicePtr, out: DevicePtr, num_seqs: int, hq: int, hkv: int,
                      head_dim: int, block_size: int, max_blocks: int, scale: float,
                      max_q_len: int, sm90: bool | None = None) -> None:
    """Causal attention of packed query chunks (cu_q) against each sequence's cached keys.

    max_q_len bounds every sequence's chunk length; it sizes the grid (a CUDA graph fixes
    it, while cu_q and kv_lens may change between replays within that bound). The Hopper
    wgmma kernel runs where `attention_sm90.uses_sm90` says so; `sm90` forces (True) or
    avoids (False) it.
    """
    _check_heads(hq, hkv, head_dim, block_size)
    if num_seqs < 1 or max_q_len < 1 or max_blocks < 1:
        raise ValueError(f"prefill_attention: need num_seqs, max_q_len, max_blocks >= 1, got "
                         f"{num_seqs}, {max_q_len}, {max_blocks}")
    grid = (hq, -(-max_q_len // PREFILL_QUERY_TILE), num_seqs)
    if grid[1] > 65535:
        raise ValueError(f"prefill_attention: max_q_len={max_q_len} exceeds the grid's y limit "
                         f"({65535 * PREFILL_QUERY_TILE} queries per launch)")
    if sm90 is None:
        sm90 = uses_sm90(kc, head_dim)
    if sm90:
        prefill_attention_sm90(kc, stream, grid, q, k_cache, v_cache, block_tables, cu_q,
                               kv_lens, out, num_seqs, hq, hkv, head_dim, block_size,
                               max_blocks, scale)
        return
    kc.get(PREFILL_ATTN)(stream, grid, ATTN_THREADS, 0, q, k_cache, v_cache, block_tables,
                         cu_q, kv_lens, out, num_seqs, hq, hkv, head_dim, block_size,
                         max_blocks, scale)


def decode_attention(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                     v_cache: DevicePtr, block_tables: DevicePtr, kv_lens: DevicePtr,
                     part_o: DevicePtr, part_ml: DevicePtr, out: DevicePtr, num_seqs: int,
                     hq: int, hkv: int, head_dim: int, block_size: int, max_blocks: int,
                     num_splits: int, scale: float, long: bool | None = None) -> None:
    """One query per sequence: split-K partials into part_o/part_ml, then the combine.

    part_o is f32 [num_seqs, hq, num_splits, head_dim], part_ml f32 [num_seqs, hq,
    num_splits, 2]. num_splits is fixed per captured graph (the grid size); each step's
    kv_len decides how many of them hold keys (`decode_split_rule`), and the combine merges
    only those. The partials run on the long-context tensor-core kernel where
    `attention_long.uses_long` says so for block tables of max_blocks * block_size keys;
    `long` forces (True) or avoids (False) it.
    """
    _check_heads(hq, hkv, head_dim, block_size)
    if num_seqs < 1 or num_splits < 1 or max_blocks < 1:
        raise ValueError(f"decode_attention: need num_seqs, num_splits, max_blocks >= 1, got "
                         f"{num_seqs}, {num_splits}, {max_blocks}")
    if long is None:
        long = uses_long(kc, hq, hkv, head_dim, max_blocks * block_size)
    if long:
        decode_attention_long(kc, stream, q, k_cache, v_cache, block_tables, kv_lens, part_o,
                              part_ml, num_seqs, hq, hkv, head_dim, block_size, max_blocks,
                              num_splits, scale)
    else:
        kc.get(DECODE_ATTN)(stream, (num_splits, hkv, num_seqs), ATTN_THREADS, 0, q, k_cache,
                            v_cache, block_tables, kv_lens, part_o, part_ml, num_seqs, hq, hkv,
                            head_dim, block_size, max_blocks, num_splits, scale)
    kc.get(DECODE_ATTN_COMBINE)(stream, (hq, num_seqs), head_dim, 0, part_o, part_ml,
                                kv_lens, out, num_seqs, hq, head_dim, num_splits)

