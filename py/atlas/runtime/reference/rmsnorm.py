"""Reference for rmsnorm_bf16 / add_rmsnorm_bf16 / rmsnorm_pitched_bf16 / embed_rmsnorm_bf16
and their offset and one-rounding forms (kernels/*/common/rmsnorm.cu).

Specification, in transformers' bf16 numerics (LlamaRMSNorm, Qwen3RMSNorm):
    residual = bf16(residual + delta)                    (add_rmsnorm only, in place)
    out      = bf16(w * bf16(r * rsqrt(mean(r^2) + eps)))
with the mean taken in float32 over the bf16 row. The CUDA kernel sums squares in a
different order, so the two agree to float32 rounding, not always bit for bit. The
*_oneround_* entries (gpt-oss) round once: out = bf16(w * (r * rsqrt(mean(r^2) + eps))).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import Dim3
from ..kernel_abi import (ADD_RMSNORM, ADD_RMSNORM_EARLY, ADD_RMSNORM_LATE, ADD_RMSNORM_OFFSET,
                          ADD_RMSNORM_OFFSET_EARLY, ADD_RMSNORM_OFFSET_LATE, ADD_RMSNORM_ONEROUND,
                          ADD_RMSNORM_ONEROUND_EARLY, EMBED_RMSNORM, EMBED_RMSNORM_LATE,
                          EMBED_RMSNORM_OFFSET, EMBED_RMSNORM_OFFSET_LATE, EMBED_RMSNORM_ONEROUND,
                          NORM_ADD_RMSNORM_OFFSET, RMSNORM, RMSNORM_OFFSET, RMSNORM_ONEROUND,
                          RMSNORM_PITCHED)
from . import HostMemory, reference
from .embedding import embedding_scaled_bf16


def rms_norm_bf16(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """Normalize the last axis of float32 `x` (bf16 values) and scale by `w`; bf16 bits.

    Shared with the q/k norm of the rope kernel, which uses the same two roundings per head.
    """
    x = np.asarray(x, dtype=np.float32)
    mean_sq = np.einsum("...i,...i->...", x, x, dtype=np.float32) / np.float32(x.shape[-1])
    inv_rms = (np.float32(1.0) / np.sqrt(mean_sq + np.float32(eps))).astype(np.float32)
    normed = round_bf16(x * inv_rms[..., None])
    return f32_to_bf16_bits(np.asarray(w, dtype=np.float32) * normed)


def rms_norm_one_round_bf16(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """GptOssRMSNorm: bf16(w * (x * rsqrt(mean(x^2) + eps))), all float32, one rounding;
    bf16 bits."""
    x = np.asarray(x, dtype=np.float32)
    mean_sq = np.einsum("...i,...i->...", x, x, dtype=np.float32) / np.float32(x.shape[-1])
    inv_rms = (np.float32(1.0) / np.sqrt(mean_sq + np.float32(eps))).astype(np.float32)
    return f32_to_bf16_bits(np.asarray(w, dtype=np.float32) * (x * inv_rms[..., None]))


def rms_norm_offset_bf16(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """Zero-centred weights (Qwen3_5RMSNorm): bf16(x * rsqrt(mean(x^2) + eps) * (1 + w)),
    all float32 with one rounding; bf16 bits. Shared with the rope kernel's q/k norm."""
    x = np.asarray(x, dtype=np.float32)
    mean_sq = np.einsum("...i,...i->...", x, x, dtype=np.float32) / np.float32(x.shape[-1])
    inv_rms = (np.float32(1.0) / np.sqrt(mean_sq + np.float32(eps))).astype(np.float32)
    scale = np.float32(1.0) + np.asarray(w, dtype=np.float32)
    return f32_to_bf16_bits((x * inv_rms[..., None]) * scale)


def _rows(mem: HostMemory, ptr: int, rows: int, dim: int) -> np.ndarray:
    return mem.view(ptr, np.uint16, rows * dim).reshape(rows, dim)


def _pitched_rows(mem: HostMemory, ptr: int, rows: int, dim: int, pitch: int) -> np.ndarray:
    """A writable [rows, dim] view of bf16 rows starting `pitch` elements apart."""
    flat = mem.view(ptr, np.uint16, (rows - 1) * pitch + dim)
    return np.lib.stride_tricks.as_strided(flat, (rows, dim), (2 * pitch, 2))


@reference(RMSNORM)
def rmsnorm_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, out: int, rows: int,
                 dim: int, eps: float) -> None:
    xf = bf16_bits_to_f32(_rows(mem, x, rows, dim))
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, dim))
    _rows(mem, out, rows, dim)[:] = rms_norm_bf16(xf, wf, eps)


@reference(RMSNORM_PITCHED)
def rmsnorm_pitched_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, out: int,
                         rows: int, dim: int, pitch: int, eps: float) -> None:
    if not rows:
        return
    xf = bf16_bits_to_f32(_pitched_rows(mem, x, rows, dim, pitch))  # a copy: out may be x
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, dim))
    _pitched_rows(mem, out, rows, dim, pitch)[:] = rms_norm_bf16(xf, wf, eps)


@reference(ADD_RMSNORM)
@reference(ADD_RMSNORM_EARLY)  # the same values; only its PDL trigger moves
@reference(ADD_RMSNORM_LATE)
def add_rmsnorm_bf16(mem: HostMemory, grid: Dim3, block: Dim3, residual: int, delta: int, w: int,
                     out: int, rows: int, dim: int, eps: float) -> None:
    resid = _rows(mem, residual, rows, dim)
    delta_f = bf16_bits_to_f32(_rows(mem, delta, rows, dim))
    summed = f32_to_bf16_bits(bf16_bits_to_f32(resid) + delta_f)
    resid[:] = summed
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, dim))
    _rows(mem, out, rows, dim)[:] = rms_norm_bf16(bf16_bits_to_f32(summed), wf, eps)


@reference(RMSNORM_OFFSET)
def rmsnorm_offset_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, out: int,
                        rows: int, dim: int, eps: float) -> None:
    xf = bf16_bits_to_f32(_rows(mem, x, rows, dim))
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, dim))
    _rows(mem, out, rows, dim)[:] = rms_norm_offset_bf16(xf, wf, eps)


@reference(ADD_RMSNORM_OFFSET)
@reference(ADD_RMSNORM_OFFSET_EARLY)
@reference(ADD_RMSNORM_OFFSET_LATE)
def add_rmsnorm_offset_bf16(mem: HostMemory, grid: Dim3, block: Dim3, residual: int, delta: int,
                            w: int, out: int, rows: int, dim: int, eps: float,
                            delta_bits: np.ndarray | None = None) -> None:
    """`delta_bits`: the delta rows to add instead of the ones at `delta` (the fused entry's
    normalized delta)."""
    resid = _rows(mem, residual, rows, dim)
    d = _rows(mem, delta, rows, dim) if delta_bits is None else delta_bits
    summed = f32_to_bf16_bits(bf16_bits_to_f32(resid) + bf16_bits_to_f32(d))
    resid[:] = summed
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, dim))
    _rows(mem, out, rows, dim)[:] = rms_norm_offset_bf16(bf16_bits_to_f32(summed), wf, eps)


@reference(RMSNORM_ONEROUND)
def rmsnorm_oneround_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, out: int,
                          rows: int, dim: int, eps: float) -> None:
    xf = bf16_bits_to_f32(_rows(mem, x, rows, dim))
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, dim))
    _rows(mem, out, rows, dim)[:] = rms_norm_one_round_bf16(xf, wf, eps)


@reference(ADD_RMSNORM_ONEROUND)
@reference(ADD_RMSNORM_ONEROUND_EARLY)
def add_rmsnorm_oneround_bf16(mem: HostMemory, grid: Dim3, block: Dim3, residual: int,
                              delta: int, w: int, out: int, rows: int, dim: int,
                              eps: float) -> None:
    resid = _rows(mem, residual, rows, dim)
    summed = f32_to_bf16_bits(bf16_bits_to_f32(resid)
                              + bf16_bits_to_f32(_rows(mem, delta, rows, dim)))
    resid[:] = summed
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, dim))
    _rows(mem, out, rows, dim)[:] = rms_norm_one_round_bf16(bf16_bits_to_f32(summed), wf, eps)


@reference(NORM_ADD_RMSNORM_OFFSET)
def norm_add_rmsnorm_offset_bf16(mem: HostMemory, grid: Dim3, block: Dim3, residual: int,
                                 delta: int, w_delta: int, w: int, out: int, rows: int, dim: int,
                                 eps: float) -> None:
    wd = bf16_bits_to_f32(mem.view(w_delta, np.uint16, dim))
    normed = rms_norm_offset_bf16(bf16_bits_to_f32(_rows(mem, delta, rows, dim)), wd, eps)
    add_rmsnorm_offset_bf16(mem, grid, block, residual, delta, w, out, rows, dim, eps, normed)


def _embed_rmsnorm(norm, mem: HostMemory, grid: Dim3, block: Dim3, ids: int, table: int,
                   residual: int, w: int, out: int, rows: int, dim: int, vocab: int,
                   scale: float, eps: float) -> None:
    """The embedding lookup into `residual` (the scaled entry's rounding: times 1 is exact),
    then `norm` (one of the plain entries' references) of it into `out`."""
    embedding_scaled_bf16(mem, grid, block, ids, table, residual, rows, dim, vocab, scale)
    norm(mem, grid, block, residual, w, out, rows, dim, eps)


@reference(EMBED_RMSNORM)
@reference(EMBED_RMSNORM_LATE)
def embed_rmsnorm_bf16(mem: HostMemory, grid: Dim3, block: Dim3, ids: int, table: int,
                       residual: int, w: int, out: int, rows: int, dim: int, vocab: int,
                       scale: float, eps: float) -> None:
    _embed_rmsnorm(rmsnorm_bf16, mem, grid, block, ids, table, residual, w, out, rows, dim,
                   vocab, scale, eps)


@reference(EMBED_RMSNORM_OFFSET)
@reference(EMBED_RMSNORM_OFFSET_LATE)
def embed_rmsnorm_offset_bf16(mem: HostMemory, grid: Dim3, block: Dim3, ids: int, table: int,
                              residual: int, w: int, out: int, rows: int, dim: int, vocab: int,
                              scale: float, eps: float) -> None:
    _embed_rmsnorm(rmsnorm_offset_bf16, mem, grid, block, ids, table, residual, w, out, rows,
                   dim, vocab, scale, eps)


@reference(EMBED_RMSNORM_ONEROUND)
def embed_rmsnorm_oneround_bf16(mem: HostMemory, grid: Dim3, block: Dim3, ids: int, table: int,
                                residual: int, w: int, out: int, rows: int, dim: int,
                                vocab: int, scale: float, eps: float) -> None:
    _embed_rmsnorm(rmsnorm_oneround_bf16, mem, grid, block, ids, table, residual, w, out, rows,
                   dim, vocab, scale, eps)
