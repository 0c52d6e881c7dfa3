"""Reference for sigmoid_gate_mul_bf16 (kernels/*/common/attn_gate.cu).

The output gate of gated full attention (Qwen3.5, Qwen3-Next), in transformers' bf16 ops:
    out[t, h*D + d] = bf16(x[t, h*D + d] * bf16(sigmoid(gate[t * gate_pitch + h * head_pitch + d])))
out may alias x (each element is read before it is written, by the same thread).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import Dim3
from ..kernel_abi import ATTN_GATE, ATTN_GATE_EARLY
from . import HostMemory, reference


def sigmoid_bf16(x: np.ndarray) -> np.ndarray:
    """bf16(sigmoid(x)) as float32, sigmoid evaluated in f32 (torch's bf16 sigmoid)."""
    x = np.asarray(x, dtype=np.float32)
    return round_bf16((np.float32(1.0) / (np.float32(1.0) + np.exp(-x))).astype(np.float32))


@reference(ATTN_GATE)
@reference(ATTN_GATE_EARLY)  # the same values; only its PDL trigger moves
def sigmoid_gate_mul_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, gate: int, out: int,
                          tokens: int, heads: int, head_dim: int, gate_pitch: int,
                          head_pitch: int) -> None:
    width = heads * head_dim
    xf = bf16_bits_to_f32(mem.view(x, np.uint16, tokens * width)).reshape(tokens, heads,
                                                                          head_dim)
    grow = mem.view(gate, np.uint16, (tokens - 1) * gate_pitch + (heads - 1) * head_pitch
                    + head_dim)
    idx = (np.arange(tokens)[:, None, None] * gate_pitch
           + np.arange(heads)[None, :, None] * head_pitch + np.arange(head_dim)[None, None, :])
    gf = bf16_bits_to_f32(grow[idx])
    mem.view(out, np.uint16, tokens * width)[:] = f32_to_bf16_bits(
        xf * sigmoid_bf16(gf)).reshape(-1)
