"""Launch builder of the batch-1 decode GEMV on packed half-precision FMAs
(kernels/hopper/common/gemv_h2.cuh): one launch shape for every weight format the kernel
takes (NVFP4: `matmul_nvfp4.gemv_h2`, FP8: `matmul_quant.gemv_fp8_h2`) and its three outputs.
A block owns 4 weight rows (SwiGLU: the gate and up rows of two features), each thread two
16-byte chunks of each row at a time, or 8 rows (four features) and one chunk of each (the
NVFP4 default, `matmul_nvfp4.H2_ROWS`)."""

from __future__ import annotations

from typing import Literal, Mapping

from ..gpu import DevicePtr, KernelSig, Stream
from . import KernelCache
from ._preconditions import require_aligned, warp_threads
from .matmul import GEMV_MAX_THREADS, GEMV_ROWS_PER_BLOCK

#: what an entry point writes: y [1, n] bf16, f32 logits [1, n] (the bf16-rounded sums
#: widened: a quantized LM head), or the SwiGLU activation [1, n / 2] of a fused [gate | up]
H2Out = Literal["bf16", "f32", "swiglu"]


def h2_threads(chunks: int, rows: int = GEMV_ROWS_PER_BLOCK) -> int:
    """Threads per block for rows of `chunks` 16-byte weight chunks: eight weight chunks a
    thread in flight per pass, two of each row in 4-row blocks (gemv_core's kUnroll), one in
    8-row blocks (small blocks, many of them per SM), up to 256 threads; where a row needs
    more than one pass, as few threads as keep every pass full (gpu99: Qwen3-8B's down, 384
    chunks in 8-row blocks, on 256 threads left half of them idle in a second pass and ran
    13.17 us against 11.53 in 4-row blocks on 192)."""
    per_thread = 2 * GEMV_ROWS_PER_BLOCK // rows
    passes = -(-chunks // (per_thread * GEMV_MAX_THREADS))
    return warp_threads(-(-chunks // (per_thread * passes)), GEMV_MAX_THREADS)


def launch_h2(kc: KernelCache, stream: Stream, sigs: Mapping[str, KernelSig], out: H2Out,
              x: DevicePtr, y: DevicePtr, n: int, k: int, chunk_values: int,
              weight: tuple[DevicePtr, ...], tail: tuple[int, ...] = (),
              rows: int = GEMV_ROWS_PER_BLOCK) -> None:
    """One row on the format's entry point for `out` (`sigs`: output -> signature), whose
    arguments are x, the `weight` pointers, y, m = 1, n, k, then `tail` (the format's other
    scalars), in blocks of `rows` weight rows (4, or 8 for the 8-row entry points). The
    weight checked its own preconditions (k, alignment) when it was built."""
    sig = sigs[out]
    if out == "swiglu" and n % 2:
        raise ValueError(f"{sig.func}: the SwiGLU output needs an even n, got [{n}, {k}]")
    require_aligned(sig.func, "x", x, 16)  # 16-byte x loads
    require_aligned(sig.func, "y", y, 4 if out == "f32" else 2)
    blocks = -(-n // rows)  # SwiGLU: rows / 2 features of n / 2 a block, the same
    kc.get(sig)(stream, blocks, h2_threads(k // chunk_values, rows), 0, x, *weight, y, 1, n, k,
                *tail)
