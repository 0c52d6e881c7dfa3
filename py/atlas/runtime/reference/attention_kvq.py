"""Reference for attention over the quantized KV caches (kernels/*/common/attention_kvq.cu).

Specification: the bf16 attention references' (reference/attention.py) on the dequantized
cache (kv_scales f32 [2, hkv]): FP8, k = float32(E4M3 code) * k_scale[h] (v likewise);
NVFP4, k = e2m1(nibble) * (float32(E4M3 group scale) * k_scale[h]). The kernels fold
k_scale into the score scale, a lane's group scale into its partial dot product, and apply
v_scale per key row, which differs from this order by float32 rounding only.
"""

from __future__ import annotations

import numpy as np

from typing import Any, Callable

from ...core.numerics import (bf16_bits_to_f32, e2m1_to_f32, fp8_e4m3_to_f32,
                              unpack_e2m1)
from ..gpu import Dim3, KernelSig
from ..kernel_abi import DECODE_ATTN_FP8, DECODE_ATTN_NVFP4, PREFILL_ATTN_FP8, \
    PREFILL_ATTN_NVFP4
from . import HostMemory, reference
from .attention import _tables, gather_codes, prefill_over_gathered, split_partials


def dequant_fp8_rows(rows: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """FP8 rows uint8 [hkv, L, D] at head scales [hkv] -> float32 [hkv, L, D]."""
    return fp8_e4m3_to_f32(rows) * scale[:, None, None]


def dequant_nvfp4_rows(rows: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """NVFP4 rows uint8 [hkv, L, 9 D / 16] at head scales [hkv] -> float32 [hkv, L, D]."""
    d = rows.shape[-1] * 16 // 9
    values = e2m1_to_f32(unpack_e2m1(rows[..., :d // 2]))
    group = fp8_e4m3_to_f32(rows[..., d // 2:]) * scale[:, None, None]
    return (values.reshape(rows.shape[:-1] + (d // 16, 16)) * group[..., None]).reshape(
        rows.shape[:-1] + (d,))


Dequant = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: per format: its row bytes for a head_dim, and its dequantization
_FORMATS: dict[str, tuple[Callable[[int], int], Dequant]] = {
    "fp8": (lambda d: d, dequant_fp8_rows),
    "nvfp4": (lambda d: d // 2 + d // 16, dequant_nvfp4_rows),
}


def gather_kv_quantized(mem: HostMemory, fmt: str, cache: int, scale: np.ndarray,
                        table: np.ndarray, kv_len: int, hkv: int, block_size: int,
                        head_dim: int) -> np.ndarray:
    """The first kv_len cached tokens of one sequence, dequantized: float32 [hkv, kv_len, D]."""
    row_bytes, dequant = _FORMATS[fmt]
    rows = gather_codes(mem, cache, table, kv_len, hkv, block_size, row_bytes(head_dim),
                        np.uint8)
    return dequant(rows, scale)


def _scales(mem: HostMemory, kv_scales: int, hkv: int) -> np.ndarray:
    return mem.view(kv_scales, np.float32, 2 * hkv).reshape(2, hkv)


def prefill_attn_kvq(fmt: str, mem: HostMemory, q: int, k_cache: int, v_cache: int,
                     kv_scales: int, block_tables: int, cu_q: int, kv_lens: int, out: int,
                     num_seqs: int, hq: int, hkv: int, head_dim: int, block_size: int,
                     max_blocks: int, scale: float) -> None:
    sc = _scales(mem, kv_scales, hkv)
    prefill_over_gathered(
        mem, q, cu_q, block_tables, kv_lens, out, num_seqs, hq, head_dim, max_blocks, scale,
        lambda table, kv_len: (
            gather_kv_quantized(mem, fmt, k_cache, sc[0], table, kv_len, hkv, block_size,
                                head_dim),
            gather_kv_quantized(mem, fmt, v_cache, sc[1], table, kv_len, hkv, block_size,
                                head_dim)))


def decode_attn_kvq(fmt: str, mem: HostMemory, q: int, k_cache: int, v_cache: int,
                    kv_scales: int, block_tables: int, kv_lens: int, part_o: int, part_ml: int,
                    num_seqs: int, hq: int, hkv: int, head_dim: int, block_size: int,
                    max_blocks: int, num_splits: int, scale: float) -> None:
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
        k = gather_kv_quantized(mem, fmt, k_cache, sc[0], tables[b], kv_len, hkv, block_size,
                                head_dim)
        v = gather_kv_quantized(mem, fmt, v_cache, sc[1], tables[b], kv_len, hkv, block_size,
                                head_dim)
        o, ml = split_partials(qf[b], k, v, scale, num_splits)
        po[b, :, :o.shape[1]], pml[b, :, :ml.shape[1]] = o, ml


def _register(fmt: str, prefill_sig: KernelSig, decode_sig: KernelSig) -> None:
    """The prefill and decode references of one format (the kernels' grid is not needed)."""

    def prefill(mem: HostMemory, grid: Dim3, block: Dim3, *args: Any) -> None:
        prefill_attn_kvq(fmt, mem, *args)

    def decode(mem: HostMemory, grid: Dim3, block: Dim3, *args: Any) -> None:
        decode_attn_kvq(fmt, mem, *args)

    reference(prefill_sig)(prefill)
    reference(decode_sig)(decode)


_register("fp8", PREFILL_ATTN_FP8, DECODE_ATTN_FP8)
_register("nvfp4", PREFILL_ATTN_NVFP4, DECODE_ATTN_NVFP4)
