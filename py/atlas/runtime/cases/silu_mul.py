"""Check cases for silu_mul_bf16: model widths, odd vector counts, saturating gates."""

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


def _oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    gu = bf16_bits_to_f32(inputs["gate_up"]).astype(np.float64)
    inter = gu.shape[1] // 2
    gate, up = gu[:, :inter], gu[:, inter:]
    silu = gate * (0.5 * (1.0 + np.tanh(0.5 * gate)))  # g * sigmoid(g), overflow-free
    return {"out": round_bf16(silu.astype(np.float32)).astype(np.float64) * up}


def _case(rng: np.random.Generator, rows: int, inter: int) -> KernelCase:
    gate_up = random_bf16(rng, (rows, 2 * inter), 6.0)
    gate_up[0, :2] = f32_to_bf16_bits(np.array([-120.0, 95.0], np.float32))  # exp saturates

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        activation.silu_mul(KernelCache(backend), stream, p["gate_up"], p["out"], rows, inter)

    return KernelCase(f"silu_mul_{rows}x{inter}", "silu_mul", {"gate_up": gate_up},
                      {"out": OutputSpec(DType.BF16, (rows, inter))}, run, _oracle)


@kernel_cases("silu_mul")
def silu_mul_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [_case(rng, rows, inter) for rows, inter in SHAPES]
