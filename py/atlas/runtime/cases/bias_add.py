"""Check cases for bias_add_bf16: the Qwen2 family's qkv widths, one row and batches, a
width that is not a whole block of vectors, sums that cancel and that round up a binade; and
bias_add_f32_bf16 (float32 sums plus the bias, one rounding) at gpt-oss's widths."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, bias
from .gemv import random_bf16

#: (rows, n): one vector; Qwen2.5-0.5B's qkv width (896 + 2 * 128: 144 vectors); Qwen2.5-7B's
#: (3,584 + 2 * 512: 576 vectors, 3 column blocks) at batch 1 and 5; a prefill-sized chunk
SHAPES = [(1, 8), (3, 1152), (1, 4608), (5, 4608), (64, 1280)]


def _oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = bf16_bits_to_f32(inputs["x"]).astype(np.float64)
    return {"x": x + bf16_bits_to_f32(inputs["bias"]).astype(np.float64)}


def _case(rng: np.random.Generator, rows: int, n: int) -> KernelCase:
    x = random_bf16(rng, (rows, n), 2.0)
    b = random_bf16(rng, (n,), 8.0)
    # exact cancellation, and 1 + 2^-8 (a tie: rounds to even, 1.0) on the first row
    x[0, :2] = f32_to_bf16_bits(np.array([3.5, 1.0], np.float32))
    b[:2] = f32_to_bf16_bits(np.array([-3.5, 2.0 ** -8], np.float32))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        bias.bias_add(KernelCache(backend), stream, p["x"], p["bias"], rows, n)

    return KernelCase(f"bias_add_{rows}x{n}", "bias_add", {"x": x, "bias": b},
                      {"x": OutputSpec(DType.BF16, (rows, n))}, run, _oracle)


#: (rows, n): gpt-oss-20b's qkv (64 + 2 x 8 heads of 64: 5,120) and o_proj (2,880) widths in
#: decode and prefill, the tiny fixture's qkv (512) and one vector
F32_SHAPES = [(1, 5120), (8, 2880), (300, 5120), (3, 512), (1, 8)]


def _f32_case(rng: np.random.Generator, rows: int, n: int) -> KernelCase:
    x = (rng.standard_normal((rows, n)) * 2.0).astype(np.float32)
    b = random_bf16(rng, (n,), 0.5)
    # a sum one f32 ulp past a bf16 rounding midpoint: one rounding goes up, bf16(x) + b
    # (the second rounding bias_add_bf16 would add) would go down
    x[0, 0] = np.float32(1.0) + np.float32(2.0 ** -8) + np.float32(2.0 ** -23)
    b[0] = f32_to_bf16_bits(np.array([0.0], np.float32))[0]

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        bias.bias_add_f32(KernelCache(backend), stream, p["x"], p["bias"], p["out"], rows, n)

    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"out": inputs["x"].astype(np.float64)
                + bf16_bits_to_f32(inputs["bias"]).astype(np.float64)}

    return KernelCase(f"bias_add_f32_{rows}x{n}", "bias_add", {"x": x, "bias": b},
                      {"out": OutputSpec(DType.BF16, (rows, n))}, run, oracle)


@kernel_cases("bias_add")
def bias_add_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([_case(rng, rows, n) for rows, n in SHAPES]
            + [_f32_case(rng, rows, n) for rows, n in F32_SHAPES])
