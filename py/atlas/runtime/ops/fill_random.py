"""Launch builder for the synthetic-weight fill (fill_random.cu)."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import FILL_NORMAL
from . import KernelCache
from ._preconditions import require_aligned

FILL_THREADS = 256
#: grid-stride loop: enough blocks to fill every SM several times over, no more
FILL_MAX_BLOCKS = 4096


def fill_normal(kc: KernelCache, stream: Stream, out: DevicePtr, n: int, key: int,
                mean: float, std: float) -> None:
    """out bf16 [n] = mean + std * N(0, 1), a pure function of (key, element index)."""
    if not 0 <= n < 2 ** 32:
        raise ValueError(f"fill_normal: n={n} must be below 2^32 (one launch per tensor)")
    if not 0 <= key < 2 ** 64:
        raise ValueError(f"fill_normal: key={key} must be a 64-bit unsigned integer")
    require_aligned("fill_normal", "out", out, 2)
    if not n:
        return
    blocks = min(FILL_MAX_BLOCKS, -(-n // FILL_THREADS))
    kc.get(FILL_NORMAL)(stream, blocks, FILL_THREADS, 0, out, n, key & 0xFFFFFFFF, key >> 32,
                        mean, std)
