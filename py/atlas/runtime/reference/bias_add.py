"""Reference for bias_add_bf16 (kernels/*/common/bias_add.cu): x [rows, n] += bias [n] in
place, each sum formed in f32 and rounded to bf16 once."""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import BIAS_ADD
from . import HostMemory, reference


@reference(BIAS_ADD)
def bias_add_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, bias: int, rows: int,
                  n: int) -> None:
    view = mem.view(x, np.uint16, rows * n)
    b = bf16_bits_to_f32(mem.view(bias, np.uint16, n))
    view[:] = f32_to_bf16_bits(bf16_bits_to_f32(view).reshape(rows, n) + b).reshape(-1)
