"""Reference for silu_mul_bf16 (kernels/*/common/silu_mul.cu).

gate_up is [rows, 2*inter] = [gate | up]; out[rows, inter] = bf16(bf16(silu(gate)) * up),
silu(g) = g / (1 + exp(-g)) in float32: transformers' `act_fn(gate) * up` in bf16.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import Dim3
from ..kernel_abi import SILU_MUL, SILU_MUL_EARLY
from . import HostMemory, reference


def swiglu_rows(gate_up: np.ndarray, inter: int) -> np.ndarray:
    """bf16 bits [rows, inter] of SwiGLU over bf16 bits [rows, 2 * inter] = [gate | up]."""
    gu = bf16_bits_to_f32(gate_up).reshape(-1, 2 * inter)
    gate, up = gu[:, :inter], gu[:, inter:]
    with np.errstate(over="ignore"):  # exp(-g) -> inf gives silu = -0, as on the GPU
        silu = gate / (np.float32(1.0) + np.exp(-gate))
    return f32_to_bf16_bits(round_bf16(silu) * up)


@reference(SILU_MUL)
@reference(SILU_MUL_EARLY)  # the same values; only its PDL trigger moves
def silu_mul_bf16(mem: HostMemory, grid: Dim3, block: Dim3, gate_up: int, out: int, rows: int,
                  inter: int) -> None:
    bits = swiglu_rows(mem.view(gate_up, np.uint16, rows * 2 * inter), inter)
    mem.view(out, np.uint16, rows * inter)[:] = bits.reshape(-1)
