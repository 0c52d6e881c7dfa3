"""Launch builders for the gates of the hybrid models: the sigmoid output gate of gated full
attention (attn_gate.cu) and the gated RMSNorm of Gated-DeltaNet (gated_rmsnorm.cu)."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import ATTN_GATE, ATTN_GATE_EARLY, GATED_RMSNORM
from . import KernelCache
from .early_trigger import triggers_early
from ._preconditions import require_aligned, require_multiple

GATE_THREADS = 256
#: rows (token, head) per gated-RMSNorm block: one warp each (gated_rmsnorm.cu kRowsPerBlock)
GATED_NORM_ROWS = 4
#: gated_rmsnorm.cu keeps dim / 32 <= kMaxPerLane elements a lane
GATED_NORM_MAX_DIM = 32 * 8


def sigmoid_gate_mul(kc: KernelCache, stream: Stream, x: DevicePtr, gate: DevicePtr,
                     out: DevicePtr, tokens: int, heads: int, head_dim: int, gate_pitch: int,
                     head_pitch: int) -> None:
    """out = x * sigmoid(gate) per head (out may alias x); gate rows gate_pitch apart, heads
    head_pitch apart within a row."""
    if heads < 1 or head_dim < 1 or head_pitch < head_dim or gate_pitch < heads * head_pitch - (
            head_pitch - head_dim):
        raise ValueError(f"sigmoid_gate_mul: bad geometry heads={heads} head_dim={head_dim} "
                         f"gate_pitch={gate_pitch} head_pitch={head_pitch}")
    for name, ptr in (("x", x), ("gate", gate), ("out", out)):
        require_aligned("sigmoid_gate_mul", name, ptr, 2)
    if tokens:
        width = heads * head_dim
        sig = ATTN_GATE_EARLY if triggers_early(kc, "gate", tokens) else ATTN_GATE
        kc.get(sig)(stream, (-(-width // GATE_THREADS), tokens), GATE_THREADS, 0, x, gate, out,
                    tokens, heads, head_dim, gate_pitch, head_pitch)


def gated_rmsnorm(kc: KernelCache, stream: Stream, x: DevicePtr, z: DevicePtr, z_pitch: int,
                  w: DevicePtr, out: DevicePtr, tokens: int, heads: int, dim: int,
                  eps: float) -> None:
    """out [tokens, heads*dim] = RMSNorm(x) * w * silu(z) per (token, head) row."""
    require_multiple("gated_rmsnorm", "dim", dim, 32)
    if dim > GATED_NORM_MAX_DIM:
        raise ValueError(f"gated_rmsnorm: dim={dim} exceeds {GATED_NORM_MAX_DIM}")
    if z_pitch < heads * dim:
        raise ValueError(f"gated_rmsnorm: z_pitch={z_pitch} < heads * dim = {heads * dim}")
    for name, ptr in (("x", x), ("z", z), ("w", w), ("out", out)):
        require_aligned("gated_rmsnorm", name, ptr, 2)
    rows = tokens * heads
    if rows:
        kc.get(GATED_RMSNORM)(stream, -(-rows // GATED_NORM_ROWS), 32 * GATED_NORM_ROWS, 0, x,
                              z, z_pitch, w, out, tokens, heads, dim, eps)
