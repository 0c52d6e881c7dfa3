"""Check cases for bias_add_bf16: the Qwen2 family's qkv widths, one row and batches, a
width that is not a whole block of vectors, sums that cancel and that round up a binade; and
bias_add_f32_bf16 (float32 sums plus the bias, one rounding) at gpt-oss's widths; and the
single-row GEMV that adds the bias itself (gemv_bias_bf16_single), bit for bit the GEMV then
bias_add_bf16."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, bias, matmul
from .gemv import linear_oracle, random_bf16

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


#: (n, k) of the fused GEMV: Qwen2.5-1.5B's qkv (1,536 + 2 x 256 = 2,048 rows, k 1,536),
#: Qwen2.5-0.5B's (1,152 x 896), a width ending inside a block's 4 rows and a row's vector
#: (1,000 = 250 blocks, 125 vectors: n % 8 == 0), Qwen2.5-7B's (4,608 x 3,584)
GEMV_BIAS_SHAPES = [(2048, 1536), (1152, 896), (1000, 264), (4608, 3584)]


def _gemv_bias_case(rng: np.random.Generator, n: int, k: int) -> KernelCase:
    """y = bf16(bf16(x @ w.T) + bias) through gemv_bias_bf16_single, beside the single-row
    GEMV followed by bias_add (y_unfused): the same bits on every backend."""
    inputs = {"x": random_bf16(rng, (1, k)), "w": random_bf16(rng, (n, k), k ** -0.5),
              "bias": random_bf16(rng, (n,), 2.0)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        matmul.gemv_bias(kc, stream, p["x"], p["w"], p["bias"], p["y"], n, k)
        matmul.gemv(kc, stream, p["x"], p["w"], p["y_unfused"], 1, n, k, single=True)
        bias.bias_add(kc, stream, p["y_unfused"], p["bias"], 1, n)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = round_bf16(linear_oracle(x)["y"].astype(np.float32)).astype(np.float64)
        y = y + bf16_bits_to_f32(x["bias"]).astype(np.float64)[None, :]
        return {"y": y, "y_unfused": y}

    spec = OutputSpec(DType.BF16, (1, n))
    return KernelCase(f"gemv_bias single n{n} k{k}", "gemv", inputs,
                      {"y": spec, "y_unfused": spec}, run, oracle,
                      same_bits=(("y", "y_unfused"),))


@kernel_cases("gemv")
def gemv_bias_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [_gemv_bias_case(rng, n, k) for n, k in GEMV_BIAS_SHAPES]


@kernel_cases("bias_add")
def bias_add_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([_case(rng, rows, n) for rows, n in SHAPES]
            + [_f32_case(rng, rows, n) for rows, n in F32_SHAPES])
