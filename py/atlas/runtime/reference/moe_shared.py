"""Reference for moe_shared_add_bf16 (kernels/*/common/moe_shared.cu).

out[t] = bf16(routed[t] + bf16(bf16(sigmoid(gate[t * gate_stride])) * shared[t])): the
shared expert of a Qwen2-MoE block, with transformers' bf16 op boundaries (the sigmoid in
float32, then each product and sum rounded to bf16). A null gate (0) is an ungated shared
expert (GLM-4.5): out[t] = bf16(routed[t] + shared[t]).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import Dim3
from ..kernel_abi import MOE_SHARED_ADD
from . import HostMemory, reference


@reference(MOE_SHARED_ADD)
def moe_shared_add_bf16(mem: HostMemory, grid: Dim3, block: Dim3, routed: int, shared: int,
                        gate: int, out: int, tokens: int, hidden: int, gate_stride: int) -> None:
    n = tokens * hidden
    r = bf16_bits_to_f32(mem.view(routed, np.uint16, n)).reshape(tokens, hidden)
    s = bf16_bits_to_f32(mem.view(shared, np.uint16, n)).reshape(tokens, hidden)
    if gate:
        g = mem.view(gate, np.float32, (tokens - 1) * gate_stride + 1)[::gate_stride]
        with np.errstate(over="ignore"):  # exp(-g) -> inf gives a zero scale, as on the GPU
            scale = round_bf16(np.float32(1.0) / (np.float32(1.0) + np.exp(-g)))
        s = round_bf16(scale[:, None] * s)
    summed = r + s
    mem.view(out, np.uint16, n)[:] = f32_to_bf16_bits(summed).reshape(-1)
