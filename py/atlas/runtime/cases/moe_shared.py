"""Check cases for moe_shared_add_bf16: model widths, a padded gate stride, saturating gates,
the in-place form (out aliasing routed) the MoE layer uses, and the ungated shared expert
(a null gate: GLM-4.5's)."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, moe_shared
from .gemv import random_bf16

#: (tokens, hidden, gate_stride): one vector, Qwen1.5-MoE 2048 decode, Qwen3-Next 2048 with
#: the 16-column padded gate, a prefill chunk of a width that is not a warp multiple of vectors
SHAPES = [(1, 8, 1), (4, 2048, 1), (8, 2048, 16), (300, 1000, 16)]


#: (tokens, hidden) of the ungated form: GLM-4.5-Air's hidden at decode and in a prefill chunk
UNGATED_SHAPES = [(1, 4096), (130, 4096)]


def _oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    routed = bf16_bits_to_f32(inputs["routed"]).astype(np.float64)
    shared = bf16_bits_to_f32(inputs["shared"]).astype(np.float64)
    if "gate" not in inputs:  # ungated: the bf16 sum (the output's rounding does it)
        return {"routed": routed + shared}
    g = inputs["gate"][:, 0].astype(np.float64)  # only column 0 of the padded gate counts
    scale = round_bf16((0.5 * (1.0 + np.tanh(0.5 * g))).astype(np.float32)).astype(np.float64)
    prod = round_bf16((scale[:, None] * shared).astype(np.float32)).astype(np.float64)
    return {"routed": routed + prod}


def _case(rng: np.random.Generator, tokens: int, hidden: int, stride: int,
          gated: bool = True) -> KernelCase:
    inputs = {"routed": random_bf16(rng, (tokens, hidden), 2.0),
              "shared": random_bf16(rng, (tokens, hidden), 2.0)}
    if gated:
        gate = rng.standard_normal((tokens, stride)).astype(np.float32) * 3
        gate = round_bf16(gate)  # the f32-output linear stores bf16-rounded values
        gate[0, 0] = -120.0  # exp saturates: scale 0
        inputs["gate"] = gate

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        moe_shared.shared_add(KernelCache(backend), stream, p["routed"], p["shared"],
                              p.get("gate", 0), p["routed"], tokens, hidden, stride)

    name = f"moe_shared_add_{tokens}x{hidden}_" + (f"s{stride}" if gated else "ungated")
    return KernelCase(name, "moe_shared", inputs,
                      {"routed": OutputSpec(DType.BF16, (tokens, hidden))}, run, _oracle)


@kernel_cases("moe_shared")
def moe_shared_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([_case(rng, *shape) for shape in SHAPES]
            + [_case(rng, *shape, 1, gated=False) for shape in UNGATED_SHAPES])
