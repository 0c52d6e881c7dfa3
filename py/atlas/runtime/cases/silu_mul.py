"""Check cases for silu_mul_bf16 and gelu_tanh_mul_bf16: model widths, odd vector counts,
saturating gates."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, activation
from .gemv import random_bf16

#: (rows, inter): one vector, SmolLM2 1536, 125 vectors (not a warp multiple), 2 column tiles
SHAPES = [(1, 8), (3, 1536), (4, 1000), (2, 4104)]


def _act(gate: np.ndarray, gelu: bool) -> np.ndarray:
    """float64 SiLU (g * sigmoid(g), overflow-free) or tanh GELU of the gates."""
    if gelu:
        return 0.5 * gate * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (gate + 0.044715 * gate ** 3)))
    return gate * (0.5 * (1.0 + np.tanh(0.5 * gate)))


def _case(rng: np.random.Generator, rows: int, inter: int, gelu: bool = False) -> KernelCase:
    gate_up = random_bf16(rng, (rows, 2 * inter), 6.0)
    gate_up[0, :2] = f32_to_bf16_bits(np.array([-120.0, 95.0], np.float32))  # exp saturates
    launch = activation.gelu_tanh_mul if gelu else activation.silu_mul

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        launch(KernelCache(backend), stream, p["gate_up"], p["out"], rows, inter)

    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        gu = bf16_bits_to_f32(inputs["gate_up"]).astype(np.float64)
        gate, up = gu[:, :inter], gu[:, inter:]
        return {"out": round_bf16(_act(gate, gelu).astype(np.float32)).astype(np.float64) * up}

    name = "gelu_tanh_mul" if gelu else "silu_mul"
    return KernelCase(f"{name}_{rows}x{inter}", "silu_mul", {"gate_up": gate_up},
                      {"out": OutputSpec(DType.BF16, (rows, inter))}, run, oracle)


@kernel_cases("silu_mul")
def silu_mul_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [_case(rng, rows, inter, gelu) for gelu in (False, True) for rows, inter in SHAPES]
