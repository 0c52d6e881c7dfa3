"""Check cases for argmax_f32: ties, NaN, -inf rows, unaligned rows, a Qwen-sized vocabulary,
and rows split over many blocks: ties across chunk boundaries, NaN-only and -inf-only chunks.
Every case also checks that the launch leaves its arrival counters zero (graph replays)."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, argmax
from ..ops.argmax import ARGMAX_CHUNK


def first_max_index(row: np.ndarray) -> int:
    """Lowest index holding the largest non-NaN value; 0 when every value is NaN."""
    if np.isnan(row).all():
        return 0
    return int(np.flatnonzero(row == np.nanmax(row))[0])


def _oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"out": np.array([first_max_index(r) for r in inputs["logits"]], dtype=np.float64),
            "counters": np.zeros(len(inputs["logits"]))}


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


def _chunk_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rows whose answer depends on merging block partials in the right order."""
    c = ARGMAX_CHUNK
    rows = rng.standard_normal((5, n)).astype(np.float32)
    rows[0, [c, c - 1, 2 * c - 1, n - 1]] = 9.0        # tie across a boundary: c - 1 wins
    rows[1, :] = -np.inf
    rows[1, :c] = np.nan                                 # first block sees only NaN
    rows[2, :] = -np.inf                                 # all -inf: index 0
    rows[3, :] = np.nan
    rows[3, n - 1] = -5.0                                # only the last, partial block counts
    rows[4, [2 * c, n - 1]] = 11.0                       # tie between two blocks' maxima
    return rows


def _case(rng: np.random.Generator, name: str, logits: np.ndarray) -> KernelCase:
    rows, n = logits.shape
    partial_bytes, _ = argmax.argmax_scratch_bytes(rows, n)
    inputs = {"logits": logits, "partials": np.full(partial_bytes, 0xFF, dtype=np.uint8),
              "counters": np.zeros(rows, dtype=np.int32)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        argmax.argmax(KernelCache(backend), stream, p["logits"], p["out"], p["partials"],
                      p["counters"], rows, n)

    return KernelCase(name, "argmax", inputs,
                      {"out": OutputSpec(DType.I32, (rows,)),
                       "counters": OutputSpec(DType.I32, (rows,))}, run, _oracle)


@kernel_cases("argmax")
def argmax_cases(rng: np.random.Generator) -> list[KernelCase]:
    random_rows = [(3, 1000), (2, 7), (4, 151936)]  # n = 7: scalar path (rows not 16B aligned)
    cases = [_case(rng, f"argmax_{r}x{n}", rng.standard_normal((r, n)).astype(np.float32) * 5)
             for r, n in random_rows]
    cases += [_case(rng, f"argmax_special_{n}", _special_rows(n)) for n in (64, 1001)]
    # 12293: 4 blocks, the last partial, n odd (scalar loads); 151936: 38 blocks, float4
    cases += [_case(rng, f"argmax_chunks_{n}", _chunk_rows(rng, n)) for n in (12293, 151936)]
    return cases
