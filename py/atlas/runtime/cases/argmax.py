"""Check cases for argmax_f32: ties, NaN, -inf rows, unaligned rows, a Qwen-sized vocabulary."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, argmax


def first_max_index(row: np.ndarray) -> int:
    """Lowest index holding the largest non-NaN value; 0 when every value is NaN."""
    if np.isnan(row).all():
        return 0
    return int(np.flatnonzero(row == np.nanmax(row))[0])


def _oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"out": np.array([first_max_index(r) for r in inputs["logits"]], dtype=np.float64)}


def _special_rows(n: int) -> np.ndarray:
    """Rows built to hit each rule: tie, NaN before the max, all -inf, NaN + -inf, all NaN."""
    rows = np.full((5, n), -np.inf, dtype=np.float32)
    rows[0, :] = 0.5
    rows[0, [n // 3, n - 1]] = 7.0
    rows[1, :] = np.linspace(-1, 1, n, dtype=np.float32)
    rows[1, : n // 2] = np.nan
    rows[3, 0] = np.nan
    rows[4, :] = np.nan
    return rows


def _case(rng: np.random.Generator, name: str, logits: np.ndarray) -> KernelCase:
    rows, n = logits.shape

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        argmax.argmax(KernelCache(backend), stream, p["logits"], p["out"], rows, n)

    return KernelCase(name, "argmax", {"logits": logits},
                      {"out": OutputSpec(DType.I32, (rows,))}, run, _oracle)


@kernel_cases("argmax")
def argmax_cases(rng: np.random.Generator) -> list[KernelCase]:
    random_rows = [(3, 1000), (2, 7), (4, 151936)]  # n = 7: scalar path (rows not 16B aligned)
    cases = [_case(rng, f"argmax_{r}x{n}", rng.standard_normal((r, n)).astype(np.float32) * 5)
             for r, n in random_rows]
    cases += [_case(rng, f"argmax_special_{n}", _special_rows(n)) for n in (64, 1001)]
    return cases
