"""Reference for attention over the FP8 KV cache (kernels/*/common/attention_kvq.cu).

Specification: the bf16 attention references' (reference/attention.py) on the dequantized
cache, k = float32(E4M3 code) * k_scale[h] and v = float32(code) * v_scale[h] (kv_scales
f32 [2, hkv]). The kernels fold k_scale into the score scale and apply v_scale per key row,
which differs from this order by float32 rounding only.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, fp8_e4m3_to_f32
from ..gpu import Dim3
from ..kernel_abi import DECODE_ATTN_FP8, PREFILL_ATTN_FP8
from . import HostMemory, reference
from .attention import _tables, causal_attention, gather_codes, split_partials


def gather_kv_fp8(mem: HostMemory, cache: int, scale: np.ndarray, table: np.ndarray,
                  kv_len: int, hkv: int, block_size: int, head_dim: int) -> np.ndarray:
    """The first kv_len cached tokens of one sequence, dequantized: float32 [hkv, kv_len, D]."""
    codes = gather_codes(mem, cache, table, kv_len, hkv, block_size, head_dim, np.uint8)
    return fp8_e4m3_to_f32(codes) * scale[:, None, None]


def _scales(mem: HostMemory, kv_scales: int, hkv: int) -> np.ndarray:
    return mem.view(kv_scales, np.float32, 2 * hkv).reshape(2, hkv)


@reference(PREFILL_ATTN_FP8)
def prefill_attn_fp8(mem: HostMemory, grid: Dim3, block: Dim3, q: int, k_cache: int,
                     v_cache: int, kv_scales: int, block_tables: int, cu_q: int, kv_lens: int,
                     out: int, num_seqs: int, hq: int, hkv: int, head_dim: int,
                     block_size: int, max_blocks: int, scale: float) -> None:
    cu = mem.view(cu_q, np.int32, num_seqs + 1).astype(np.int64)
    tables, lens = _tables(mem, block_tables, kv_lens, num_seqs, max_blocks)
    sc = _scales(mem, kv_scales, hkv)
    total = int(cu[-1])
    qf = bf16_bits_to_f32(mem.view(q, np.uint16, total * hq * head_dim)).reshape(
        total, hq, head_dim)
    o = mem.view(out, np.uint16, total * hq * head_dim).reshape(total, hq, head_dim)
    for b in range(num_seqs):
        lo, hi, kv_len = int(cu[b]), int(cu[b + 1]), int(lens[b])
        if hi == lo:
            continue
        if kv_len < hi - lo:
            raise ValueError(f"sequence {b}: kv_len {kv_len} < q_len {hi - lo} (the chunk's "
                             f"keys must already be in the cache)")
        k = gather_kv_fp8(mem, k_cache, sc[0], tables[b], kv_len, hkv, block_size, head_dim)
        v = gather_kv_fp8(mem, v_cache, sc[1], tables[b], kv_len, hkv, block_size, head_dim)
        positions = np.arange(kv_len - (hi - lo), kv_len)
        o[lo:hi] = f32_to_bf16_bits(causal_attention(qf[lo:hi], k, v, positions, scale))


@reference(DECODE_ATTN_FP8)
def decode_attn_fp8(mem: HostMemory, grid: Dim3, block: Dim3, q: int, k_cache: int,
                    v_cache: int, kv_scales: int, block_tables: int, kv_lens: int, part_o: int,
                    part_ml: int, num_seqs: int, hq: int, hkv: int, head_dim: int,
                    block_size: int, max_blocks: int, num_splits: int, scale: float) -> None:
    tables, lens = _tables(mem, block_tables, kv_lens, num_seqs, max_blocks)
    sc = _scales(mem, kv_scales, hkv)
    qf = bf16_bits_to_f32(mem.view(q, np.uint16, num_seqs * hq * head_dim)).reshape(
        num_seqs, hq, head_dim)
    po = mem.view(part_o, np.float32, num_seqs * hq * num_splits * head_dim).reshape(
        num_seqs, hq, num_splits, head_dim)
    pml = mem.view(part_ml, np.float32, num_seqs * hq * num_splits * 2).reshape(
        num_seqs, hq, num_splits, 2)
    for b in range(num_seqs):
        kv_len = int(lens[b])
        k = gather_kv_fp8(mem, k_cache, sc[0], tables[b], kv_len, hkv, block_size, head_dim)
        v = gather_kv_fp8(mem, v_cache, sc[1], tables[b], kv_len, hkv, block_size, head_dim)
        o, ml = split_partials(qf[b], k, v, scale, num_splits)
        po[b, :, :o.shape[1]], pml[b, :, :ml.shape[1]] = o, ml
