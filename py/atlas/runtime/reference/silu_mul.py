"""Reference for silu_mul_bf16 and gelu_tanh_mul_bf16 (kernels/*/common/silu_mul.cu).

gate_up is [rows, 2*inter] = [gate | up]; out[rows, inter] = bf16(bf16(act(gate)) * up),
act = silu(g) = g / (1 + exp(-g)), or PyTorch's tanh GELU 0.5 g (1 + tanh(sqrt(2 / pi) (g +
0.044715 g^3))) (Gemma), in float32: transformers' `act_fn(gate) * up` in bf16.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import Dim3
from ..kernel_abi import GELU_TANH_MUL, SILU_MUL, SILU_MUL_EARLY
from . import HostMemory, reference


def swiglu_rows(gate_up: np.ndarray, inter: int) -> np.ndarray:
    """bf16 bits [rows, inter] of SwiGLU over bf16 bits [rows, 2 * inter] = [gate | up]."""
    gu = bf16_bits_to_f32(gate_up).reshape(-1, 2 * inter)
    gate, up = gu[:, :inter], gu[:, inter:]
    with np.errstate(over="ignore"):  # exp(-g) -> inf gives silu = -0, as on the GPU
        silu = gate / (np.float32(1.0) + np.exp(-gate))
    return f32_to_bf16_bits(round_bf16(silu) * up)


def geglu_tanh_rows(gate_up: np.ndarray, inter: int) -> np.ndarray:
    """bf16 bits [rows, inter] of the tanh-GELU GLU over bf16 bits [rows, 2 * inter]."""
    gu = bf16_bits_to_f32(gate_up).reshape(-1, 2 * inter)
    gate, up = gu[:, :inter], gu[:, inter:]
    inner = np.float32(0.7978845608028654) * (gate + np.float32(0.044715) * gate * gate * gate)
    gelu = np.float32(0.5) * gate * (np.float32(1.0) + np.tanh(inner))
    return f32_to_bf16_bits(round_bf16(gelu) * up)


@reference(GELU_TANH_MUL)
def gelu_tanh_mul_bf16(mem: HostMemory, grid: Dim3, block: Dim3, gate_up: int, out: int,
                       rows: int, inter: int) -> None:
    bits = geglu_tanh_rows(mem.view(gate_up, np.uint16, rows * 2 * inter), inter)
    mem.view(out, np.uint16, rows * inter)[:] = bits.reshape(-1)


@reference(SILU_MUL)
@reference(SILU_MUL_EARLY)  # the same values; only its PDL trigger moves
def silu_mul_bf16(mem: HostMemory, grid: Dim3, block: Dim3, gate_up: int, out: int, rows: int,
                  inter: int) -> None:
    bits = swiglu_rows(mem.view(gate_up, np.uint16, rows * 2 * inter), inter)
    mem.view(out, np.uint16, rows * inter)[:] = bits.reshape(-1)
