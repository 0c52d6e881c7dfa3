"""Launch builder for the shared-expert add (moe_shared.cu): gated, or ungated (GLM-4.5)."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import MOE_SHARED_ADD
from . import KernelCache
from ._preconditions import require_aligned, require_multiple, row_vector_grid

SHARED_ADD_MAX_THREADS = 256


def shared_add(kc: KernelCache, stream: Stream, routed: DevicePtr, shared: DevicePtr,
               gate: DevicePtr, out: DevicePtr, tokens: int, hidden: int,
               gate_stride: int = 1) -> None:
    """out [tokens, hidden] = routed + sigmoid(gate[t * gate_stride]) * shared (bf16, with
    transformers' rounding); gate is f32, or 0 for an ungated shared expert (out = routed +
    shared); out may be routed itself."""
    require_multiple("moe_shared_add", "hidden", hidden, 8)
    if gate_stride < 1:
        raise ValueError(f"moe_shared_add: gate_stride={gate_stride} must be >= 1")
    for name, ptr in (("routed", routed), ("shared", shared), ("out", out)):
        require_aligned("moe_shared_add", name, ptr, 16)
    require_aligned("moe_shared_add", "gate", gate, 4)
    if not tokens:
        return
    grid, threads = row_vector_grid(tokens, hidden, SHARED_ADD_MAX_THREADS)
    kc.get(MOE_SHARED_ADD)(stream, grid, threads, 0, routed, shared, gate, out, tokens, hidden,
                           gate_stride)
