"""Which weights the batch-1..4 decode attention asks L2 for (ATLAS_ATTN_L2_PREFETCH=1).

After its PDL wait the rope-fused clustered decode attention runs a serial chain of dependent
trips (the qkv row, q/k norm, RoPE, QK, softmax, PV, the cluster merge: ~6-8 us at batch 1,
gpu16's phase trace) with its K/V already loaded, so DRAM idles while the next kernels'
weights wait their turn. Its twin (decode_attn_rope_cluster_l2pf_bf16) spends that idle time
requesting two byte regions into L2 (cp.async.bulk.prefetch.L2: no registers, nothing to
wait for); the model passes the weights the next kernels read, in the order they read them
(o_proj's, then the post-attention block's first), and `plan_l2_regions` turns that list
into what the kernel takes: 16-byte aligned, contiguous neighbours joined, at most
L2_PREFETCH_REGIONS regions, at most a budget of bytes (`l2_prefetch_budget`: a share of the
device's L2, so what is prefetched is still there when its GEMV runs).
"""

from __future__ import annotations

from typing import Iterable

from . import KernelCache
from .routes import DEFAULT_ATTN_L2_PREFETCH_FRACTION

#: (device address, bytes) of a weight buffer (or a part of one) a kernel will read
Region = tuple[int, int]

#: regions the kernel takes (pf0 / pf1 of decode_attn_rope_cluster_l2pf_bf16)
L2_PREFETCH_REGIONS = 2
#: the bulk prefetch's granule: 16-byte aligned addresses, byte counts multiples of 16
L2_PREFETCH_ALIGN = 16
#: the most bytes one region may hold (the kernel's u32 byte count, whole granules)
MAX_REGION_BYTES = (1 << 32) - L2_PREFETCH_ALIGN


def l2_prefetch_budget(kc: KernelCache) -> int:
    """Bytes the attention may ask L2 for: ATLAS_ATTN_L2_PREFETCH_MB MiB when set, else
    DEFAULT_ATTN_L2_PREFETCH_FRACTION of the device's L2 (50 MiB on the H200: 30 MiB)."""
    if kc.routes.attn_l2_prefetch_mb:
        return kc.routes.attn_l2_prefetch_mb << 20
    return int(kc.facts.l2_cache_bytes * DEFAULT_ATTN_L2_PREFETCH_FRACTION)


def plan_l2_regions(regions: Iterable[Region], budget: int,
                    slots: int = L2_PREFETCH_REGIONS) -> tuple[Region, ...]:
    """The regions to request, in the given order (the order the next kernels read them):
    each trimmed to whole 16-byte granules (start rounded up, end down), one that starts
    where the previous ends joined to it, the last cut where `budget` bytes run out; at most
    `slots` of them (what does not fit is left out, never reordered)."""
    if budget < 0 or slots < 1:
        raise ValueError(f"plan_l2_regions: budget={budget} must be >= 0, slots={slots} >= 1")
    align = L2_PREFETCH_ALIGN
    left = budget // align * align
    planned: list[Region] = []
    for ptr, nbytes in regions:
        if ptr < 0 or nbytes < 0:
            raise ValueError(f"plan_l2_regions: region ({ptr:#x}, {nbytes}) is negative")
        start = -(-ptr // align) * align
        end = (ptr + nbytes) // align * align
        if end <= start:
            continue
        if left == 0:
            break
        if planned and sum(planned[-1]) == start and planned[-1][1] < MAX_REGION_BYTES:
            last = planned.pop()
            size = min(end - start, left, MAX_REGION_BYTES - last[1])
            planned.append((last[0], last[1] + size))
        elif len(planned) == slots:
            break
        else:
            size = min(end - start, left, MAX_REGION_BYTES)
            planned.append((start, size))
        left -= size
    return tuple(planned)


def kernel_args(planned: tuple[Region, ...]) -> tuple[int, int, int, int]:
    """pf0, pf0_bytes, pf1, pf1_bytes of the kernel (a missing region: address 0, 0 bytes)."""
    if len(planned) > L2_PREFETCH_REGIONS:
        raise ValueError(f"l2 prefetch: {len(planned)} regions, the kernel takes "
                         f"{L2_PREFETCH_REGIONS}")
    padded = list(planned) + [(0, 0)] * (L2_PREFETCH_REGIONS - len(planned))
    for ptr, nbytes in padded:
        if ptr % L2_PREFETCH_ALIGN or nbytes % L2_PREFETCH_ALIGN or nbytes > MAX_REGION_BYTES:
            raise ValueError(f"l2 prefetch: region ({ptr:#x}, {nbytes}) is not whole "
                             f"{L2_PREFETCH_ALIGN}-byte granules")
    (p0, b0), (p1, b1) = padded
    return p0, b0, p1, b1
