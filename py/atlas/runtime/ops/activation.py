"""Launch builders for the gated activations (silu_mul.cu): out = act(gate) * up, act SiLU
(SwiGLU) or the tanh GELU (GeGLU, Gemma)."""

from __future__ import annotations

from ..gpu import DevicePtr, KernelSig, Stream
from ..kernel_abi import GELU_TANH_MUL, SILU_MUL, SILU_MUL_EARLY
from . import KernelCache
from .early_trigger import triggers_early
from ._preconditions import require_aligned, require_multiple, row_vector_grid

SILU_MUL_MAX_THREADS = 256


def _gated(kc: KernelCache, stream: Stream, op: str, sig: KernelSig, gate_up: DevicePtr,
           out: DevicePtr, rows: int, inter: int) -> None:
    """One gated-activation launch: gate_up [rows, 2*inter] = [gate | up] (bf16) -> out
    [rows, inter] (bf16), a thread a 16-byte vector."""
    require_multiple(op, "inter", inter, 8)
    require_aligned(op, "gate_up", gate_up, 16)
    require_aligned(op, "out", out, 16)
    if not rows:
        return
    grid, threads = row_vector_grid(rows, inter, SILU_MUL_MAX_THREADS)
    kc.get(sig)(stream, grid, threads, 0, gate_up, out, rows, inter)


def silu_mul(kc: KernelCache, stream: Stream, gate_up: DevicePtr, out: DevicePtr, rows: int,
             inter: int) -> None:
    """gate_up [rows, 2*inter] = [gate | up] (bf16) -> out [rows, inter] = silu(gate) * up."""
    sig = SILU_MUL_EARLY if triggers_early(kc, "silu", rows) else SILU_MUL
    _gated(kc, stream, "silu_mul", sig, gate_up, out, rows, inter)


def gelu_tanh_mul(kc: KernelCache, stream: Stream, gate_up: DevicePtr, out: DevicePtr,
                  rows: int, inter: int) -> None:
    """gate_up [rows, 2*inter] = [gate | up] (bf16) -> out [rows, inter] = gelu_tanh(gate) *
    up (bf16), silu_mul's layout and grid."""
    _gated(kc, stream, "gelu_tanh_mul", GELU_TANH_MUL, gate_up, out, rows, inter)
