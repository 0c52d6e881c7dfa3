"""Check cases for fill_normal_bf16: against the float64 formula (the integer hash is exact,
so every element must land within bf16 rounding of its oracle value), lengths that are not
a block multiple, a grid-stride tail (more elements than one launch's threads), and an
affine (mean, std) like the RMSNorm weights' 1 + 0.1 z."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, fill_random
from ..reference.fill_random import uniforms

#: (n, key, mean, std); 1,100,003 > FILL_MAX_BLOCKS * FILL_THREADS: the grid-stride tail
SHAPES = [(1, 0, 0.0, 1.0), (1000, 12345, 0.0, 0.02), (1_100_003, 2 ** 63 + 7, 1.0, 0.1)]


def _oracle(key: int, n: int, mean: float, std: float) -> np.ndarray:
    u1, u2 = uniforms(key, n)
    return mean + std * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


def _case(n: int, key: int, mean: float, std: float) -> KernelCase:
    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        fill_random.fill_normal(KernelCache(backend), stream, p["out"], n, key, mean, std)

    # bf16 rounding of values up to ~6 std: 2^-8 relative, plus float32 transcendentals
    tol = (std * 1e-5, 2 ** -8)
    return KernelCase(f"fill_normal_{n}_k{key % 1000}", "fill_random", {},
                      {"out": OutputSpec(DType.BF16, (n,), tol=tol)}, run,
                      lambda _inputs: {"out": _oracle(key, n, mean, std)})


@kernel_cases("fill_random")
def fill_random_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [_case(*shape) for shape in SHAPES]
