"""Reference for bias_add_bf16 (kernels/*/common/bias_add.cu): x [rows, n] += bias [n] in
place, each sum formed in f32 and rounded to bf16 once; and bias_add_f32_bf16: out bf16 =
bf16(x + bias) for float32 x (a projection's unrounded sums), one rounding."""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import BIAS_ADD, BIAS_ADD_F32
from . import HostMemory, reference


@reference(BIAS_ADD)
def bias_add_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, bias: int, rows: int,
                  n: int) -> None:
    view = mem.view(x, np.uint16, rows * n)
    b = bf16_bits_to_f32(mem.view(bias, np.uint16, n))
    view[:] = f32_to_bf16_bits(bf16_bits_to_f32(view).reshape(rows, n) + b).reshape(-1)


@reference(BIAS_ADD_F32)
def bias_add_f32_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, bias: int, out: int,
                      rows: int, n: int) -> None:
    b = bf16_bits_to_f32(mem.view(bias, np.uint16, n))
    sums = mem.view(x, np.float32, rows * n).reshape(rows, n)
    mem.view(out, np.uint16, rows * n)[:] = f32_to_bf16_bits(sums + b).reshape(-1)
