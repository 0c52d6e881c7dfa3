"""Check cases for the decode GEMM's tuned launches (ops/decode_gemm_tune.py): decode_gemm with
neither split nor block shape forced, on a device through a fresh in-memory tuning table, so
every candidate (split, warpgroups) of the key is timed on the case's own operands, each
writing the output, before the chosen one writes it last: the output must still be the float64
oracle's. Widths 16 .. 256, a partial last tile, f32 logits and the SwiGLU epilogue. On the
host backend (no device timing) the same cases run the model's pick.
"""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul_decode
from ..ops.decode_gemm_tune import DecodeGemmTuner, TuneTable
from .gemv import TENSOR_CORE_K_TOL, linear_oracle, random_bf16, swiglu_oracle

#: (m, n, k, out_f32, swiglu): n is 2 I for the SwiGLU
TUNED_SHAPES = [
    (64, 4096, 4096, False, False),     # Qwen3-8B o_proj at 64 rows: 16 candidates
    (13, 1000, 1024, False, False),     # N 16, n past the last tile, splits up to 4
    (40, 1536, 2048, True, False),      # f32 output (the LM head's), N 64
    (64, 2 * 640, 2048, False, True),   # the SwiGLU epilogue
    (200, 384, 768, False, False),      # N 256
]


def tuned_case(rng: np.random.Generator, m: int, n: int, k: int, f32: bool,
               swiglu: bool) -> KernelCase:
    """y (act with `swiglu`) through decode_gemm's tuner on the TMA kernel."""
    scale = (4.0 if swiglu else 1.0) * k ** -0.5
    inputs = {"x": random_bf16(rng, (m, k)), "w": random_bf16(rng, (n, k), scale)}
    name = "act" if swiglu else "y"
    spec = OutputSpec(DType.FP32 if f32 else DType.BF16, (m, n // 2 if swiglu else n),
                      bf16_valued=f32)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        # a fresh table (not the user's file): every candidate runs, every time
        kc.decode_tune = DecodeGemmTuner.open(backend, kc.facts, kc.routes, TuneTable(None))
        matmul_decode.decode_gemm(kc, stream, p["x"], p["w"], p[name], m, n, k, f32,
                                  glu=swiglu, tma=True)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = linear_oracle(x)["y"]
        return {name: swiglu_oracle(f32_to_bf16_bits(y.astype(np.float32))) if swiglu else y}

    kind = f"swiglu m{m} i{n // 2}" if swiglu else f"m{m} n{n}"
    return KernelCase(f"gemm_decode_tma tuned {kind} k{k}{' f32' if f32 else ''}",
                      "gemm_decode_tma", inputs, {name: spec}, run, oracle,
                      reference_abs_tol=TENSOR_CORE_K_TOL * k, capturable=False)


@kernel_cases("gemm_decode_tma")
def gemm_decode_tuned_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [tuned_case(rng, *shape) for shape in TUNED_SHAPES]
