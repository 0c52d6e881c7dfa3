"""Launch builder for the row argmax (argmax.cu): greedy token selection."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import ARGMAX
from . import KernelCache
from ._preconditions import require_aligned, warp_threads

ARGMAX_MAX_THREADS = 1024


def argmax(kc: KernelCache, stream: Stream, logits: DevicePtr, out: DevicePtr, rows: int,
           n: int) -> None:
    """out[r] (i32) = index of the largest logits[r, :n] (f32); lowest index on ties."""
    if n < 1:
        raise ValueError(f"argmax: n={n} must be positive")
    require_aligned("argmax", "logits", logits, 4)
    require_aligned("argmax", "out", out, 4)
    if rows:
        kc.get(ARGMAX)(stream, rows, warp_threads(-(-n // 4), ARGMAX_MAX_THREADS), 0, logits,
                       out, rows, n)
