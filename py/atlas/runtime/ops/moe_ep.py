"""Launch builder for expert parallelism's id rewrite (moe_ep.cu)."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import MOE_EP_LOCALIZE
from . import KernelCache
from ._preconditions import require_aligned, warp_threads

LOCALIZE_MAX_THREADS = 256


def localize_ids(kc: KernelCache, stream: Stream, ids: DevicePtr, rows: int, stride: int,
                 width: int, first: int, count: int) -> None:
    """In place over the first `width` ids of each row of i32 ids [rows, stride]: the local
    index of each expert in [first, first + count), -1 for an expert another rank holds."""
    if first < 0 or count < 1:
        raise ValueError(f"moe_ep_localize: experts [{first}, {first + count}) is empty or "
                         "negative")
    if not 0 < width <= stride:
        raise ValueError(f"moe_ep_localize: width {width} must be in 1..stride {stride}")
    require_aligned("moe_ep_localize", "ids", ids, 4)
    n = rows * width
    if not n:
        return
    threads = warp_threads(n, LOCALIZE_MAX_THREADS)
    kc.get(MOE_EP_LOCALIZE)(stream, -(-n // threads), threads, 0, ids, rows, stride, width,
                            first, count)
