"""Weight quantization formats: how a quantized tensor's scales map onto its elements, and
the exact dequantization every kernel, reference and tool agrees on.

FP8 E4M3 weights carry float32 scales in one of three published layouts, all expressed by
one index map so one kernel serves them:

    s(n, k) = scale[(n >> row_shift) * row_stride + (k >> col_shift) * col_stride]

* block (`weight_scale_inv`, `weight_block_size` [128, 128]: the Qwen3 FP8 releases);
* per output channel (`weight_scale` [N] or [N, 1]: compressed-tensors "channel");
* per tensor (`weight_scale` scalar: ModelOpt FP8, compressed-tensors "tensor").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .numerics import e2m1_to_f32, fp8_e4m3_to_f32, unpack_e2m1

#: NVFP4: values per E4M3 group scale
NVFP4_GROUP = 16

#: shift used for "every row (or column) maps to scale row 0": larger than any u32 index
_ALL = 31


@dataclass(frozen=True, slots=True)
class Fp8ScaleMap:
    """The scale index map above; `shape` is the scale tensor's expected shape."""

    row_shift: int
    row_stride: int
    col_shift: int
    col_stride: int
    shape: tuple[int, ...]

    @classmethod
    def block(cls, n: int, k: int, block_rows: int = 128, block_cols: int = 128
              ) -> "Fp8ScaleMap":
        for name, b in (("rows", block_rows), ("cols", block_cols)):
            if b < 16 or b & (b - 1):
                raise ValueError(f"FP8 block {name} must be a power of two >= 16, got {b}")
        rows, cols = -(-n // block_rows), -(-k // block_cols)
        return cls(block_rows.bit_length() - 1, cols, block_cols.bit_length() - 1, 1,
                   (rows, cols))

    @classmethod
    def channel(cls, n: int) -> "Fp8ScaleMap":
        return cls(0, 1, _ALL, 0, (n,))

    @classmethod
    def tensor(cls) -> "Fp8ScaleMap":
        return cls(_ALL, 0, _ALL, 0, ())

    def expand(self, scale: np.ndarray, n: int, k: int) -> np.ndarray:
        """The [n, k] float32 scale of every element (for references and tests)."""
        flat = np.asarray(scale, dtype=np.float32).reshape(-1)
        rows = (np.arange(n, dtype=np.int64) >> self.row_shift) * self.row_stride
        cols = (np.arange(k, dtype=np.int64) >> self.col_shift) * self.col_stride
        return flat[rows[:, None] + cols[None, :]]


def dequantize_fp8(codes: np.ndarray, scale: np.ndarray, smap: Fp8ScaleMap) -> np.ndarray:
    """float64 [n, k] = e4m3(codes) * s(n, k), exact (both factors are float32 values)."""
    n, k = codes.shape
    return (fp8_e4m3_to_f32(codes).astype(np.float64)
            * smap.expand(scale, n, k).astype(np.float64))


def dequantize_nvfp4(packed: np.ndarray, s_codes: np.ndarray,
                     global_scale: float | np.ndarray) -> np.ndarray:
    """float64 [n, k] = e2m1(codes) * e4m3(group scale) * global, exact. `packed` is
    [n, k / 2] (element 2i in the low nibble), `s_codes` E4M3 [n, k / 16], `global_scale` a
    scalar or one value per row ([n]: fused parts keep their own tensor's global)."""
    n = packed.shape[0]
    s = np.repeat(fp8_e4m3_to_f32(s_codes).astype(np.float64), NVFP4_GROUP, axis=1)
    g = np.asarray(global_scale, np.float64)
    g = g.reshape(n, 1) if g.size == n and g.ndim == 1 else g.reshape(())
    return e2m1_to_f32(unpack_e2m1(packed)).astype(np.float64) * s * g


def fused_fp8_scales(layout: str, scales: list[np.ndarray], rows: list[int], k: int,
                     block: tuple[int, int] = (128, 128)) -> tuple[np.ndarray, Fp8ScaleMap]:
    """One scale tensor and map for weights fused by stacking rows (q|k|v, gate|up).

    `scales[i]` is part i's float32 scale in `layout` ('block', 'channel', 'tensor') for
    its `rows[i]` x k weight. Channel scales concatenate. Per-tensor scales of several parts
    become a per-channel vector (each row carries its part's scale). Block scales
    concatenate when every part but the last starts a fresh block row; otherwise they are
    re-laid on the largest power-of-two row block (>= 16) that divides those parts, each
    fine block repeating its part's coarse scale — exact, for 8x the (tiny) scale bytes,
    and the fused GEMV keeps one launch.
    """
    smap = fused_fp8_scale_map(layout, rows, k, block)
    flat = [np.asarray(s, np.float32).reshape(-1) for s in scales]
    if layout == "channel":
        return np.concatenate(flat), smap
    if layout == "tensor":
        if len(flat) == 1:
            return flat[0], smap
        return np.concatenate([np.full(r, s[0], np.float32) for s, r in zip(flat, rows)]), smap
    cols, fine = -(-k // block[1]), 1 << smap.row_shift
    out = [np.repeat(s.reshape(-1, cols), block[0] // fine, axis=0)[:-(-r // fine)]
           for s, r in zip(flat, rows)]
    return np.concatenate(out).reshape(-1), smap


def fused_fp8_scale_map(layout: str, rows: list[int], k: int,
                        block: tuple[int, int] = (128, 128)) -> Fp8ScaleMap:
    """The map `fused_fp8_scales` produces (known from shapes alone, for buffer planning)."""
    n = sum(rows)
    if layout == "channel" or (layout == "tensor" and len(rows) > 1):
        return Fp8ScaleMap.channel(n)
    if layout == "tensor":
        return Fp8ScaleMap.tensor()
    if layout != "block":
        raise ValueError(f"unknown FP8 scale layout {layout!r}")
    fine = block[0]
    while fine > 16 and any(r % fine for r in rows[:-1]):
        fine //= 2
    if any(r % fine for r in rows[:-1]):
        raise ValueError(f"fused parts of {rows} rows do not align to 16-row scale blocks")
    return Fp8ScaleMap.block(n, k, fine, block[1])
