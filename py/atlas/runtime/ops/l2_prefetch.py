"""Weights a latency-bound kernel asks L2 for on behalf of a later projection.

Under programmatic dependent launch only the kernel right after another starts early, so a
projection two launches on streams its weights only once its predecessor ends. The batch-1
decode chain has windows where DRAM sits idle (the attention after the qkv projection waits
on latency, not bytes): a kernel there can request the next layer's first weights into L2
(kernels/hopper/common/l2_prefetch.cuh), and that projection then reads L2. Opt-in
(routes.l2_prefetch_next, ATLAS_L2_PREFETCH_NEXT=1) until measured.
"""

from __future__ import annotations

from typing import NamedTuple

from ..gpu import DevicePtr
from .matmul_quant import Bf16Linear, LinearWeight

#: the most bytes one prefetch asks for: about half the H100 / H200 L2 (50 MB), so the lines
#: survive until their reader whatever else the layer streams
MAX_BYTES = 24 << 20


class L2Prefetch(NamedTuple):
    """`nbytes` (a multiple of 16) at `ptr` (16-byte aligned); (0, 0): nothing."""

    ptr: DevicePtr
    nbytes: int


NONE = L2Prefetch(0, 0)


def weights_of(w: LinearWeight | None) -> L2Prefetch:
    """The prefix of a bf16 weight that one prefetch covers (its first MAX_BYTES; rows are
    streamed in order, so that is what its reader needs first); NONE for a quantized or
    absent weight."""
    if not isinstance(w, Bf16Linear):
        return NONE
    return L2Prefetch(w.ptr, min(w.nbytes, MAX_BYTES) // 16 * 16)
