"""Launch builder for the SwiGLU activation (silu_mul.cu): out = silu(gate) * up."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import SILU_MUL, SILU_MUL_EARLY
from . import KernelCache
from .early_trigger import triggers_early
from ._preconditions import require_aligned, require_multiple, row_vector_grid

SILU_MUL_MAX_THREADS = 256


def silu_mul(kc: KernelCache, stream: Stream, gate_up: DevicePtr, out: DevicePtr, rows: int,
             inter: int) -> None:
    """gate_up [rows, 2*inter] = [gate | up] (bf16) -> out [rows, inter] (bf16)."""
    require_multiple("silu_mul", "inter", inter, 8)
    require_aligned("silu_mul", "gate_up", gate_up, 16)
    require_aligned("silu_mul", "out", out, 16)
    if not rows:
        return
    grid, threads = row_vector_grid(rows, inter, SILU_MUL_MAX_THREADS)
    sig = SILU_MUL_EARLY if triggers_early(kc, "silu", rows) else SILU_MUL
    kc.get(sig)(stream, grid, threads, 0, gate_up, out, rows, inter)
