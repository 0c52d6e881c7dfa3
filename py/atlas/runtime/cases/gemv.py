"""Check cases for the decode GEMV: ragged N, every interesting M, short and long K."""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul

#: launch(kc, stream, x, w, y, m, n, k, out_f32)
Launcher = Callable[[KernelCache, Stream, DevicePtr, DevicePtr, DevicePtr, int, int, int, bool],
                    None]


def random_bf16(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0
                ) -> np.ndarray:
    """Uniform(-scale, scale) values rounded to bf16 (uint16 bits); never all zeros."""
    return f32_to_bf16_bits(rng.uniform(-scale, scale, shape).astype(np.float32))


def linear_oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float64 x @ w.T from the bf16 inputs."""
    x = bf16_bits_to_f32(inputs["x"]).astype(np.float64)
    w = bf16_bits_to_f32(inputs["w"]).astype(np.float64)
    return {"y": x @ w.T}


def linear_case(rng: np.random.Generator, name: str, module: str, m: int, n: int, k: int,
                out_f32: bool, launch: Launcher) -> KernelCase:
    """A y = x @ w.T case; w is scaled by 1/sqrt(k) so outputs stay O(1) for every k."""
    inputs = {"x": random_bf16(rng, (m, k)), "w": random_bf16(rng, (n, k), k ** -0.5)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        launch(KernelCache(backend), stream, p["x"], p["w"], p["y"], m, n, k, out_f32)

    out = OutputSpec(DType.FP32 if out_f32 else DType.BF16, (m, n), bf16_valued=out_f32)
    return KernelCase(name, module, inputs, {"y": out}, run, linear_oracle)


#: (m, n, k, out_f32): SmolLM2/Qwen3 widths, N not a multiple of the 4-row block, K from
#: 192 (one partial chunk per thread) to 12288 (down_proj), every M from 1 to 8
GEMV_SHAPES = [
    (1, 576, 576, False),
    (3, 1001, 192, False),
    (8, 384, 1536, False),
    (5, 961, 576, True),
    (1, 2048, 4096, False),
    (2, 130, 12288, False),
    (4, 515, 1024, True),
    (6, 64, 3072, False),
    (7, 33, 2048, False),
]


@kernel_cases("gemv")
def gemv_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = [linear_case(rng, f"gemv m{m} n{n} k{k}{' f32' if f32 else ''}", "gemv", m, n, k,
                         f32, matmul.gemv)
             for m, n, k, f32 in GEMV_SHAPES]
    # the general entry point with one row (linear sends m=1 to the single-row kernel)
    general = partial(matmul.gemv, single=False)
    cases += [linear_case(rng, f"gemv general m1 n{n} k{k}{' f32' if f32 else ''}", "gemv", 1,
                          n, k, f32, general)
              for n, k, f32 in [(517, 1024, False), (300, 576, True)]]
    return cases
