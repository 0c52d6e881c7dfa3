"""Check cases for the FP8-weight GEMV: the three scale layouts (128x128 blocks, per channel,
per tensor), every M from 1 to 8, ragged N and partial scale blocks, the fused SwiGLU down
projection, the dequantize kernel and the GEMM fallback for more rows."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_fp8_e4m3, round_bf16
from ...core.quant import Fp8ScaleMap, dequantize_fp8
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul_quant
from ..ops.matmul_quant import Fp8Weight
from .gemv import TENSOR_CORE_K_TOL, random_bf16, swiglu_oracle


def random_fp8(rng: np.random.Generator, n: int, k: int, layout: str
               ) -> tuple[np.ndarray, np.ndarray, Fp8ScaleMap]:
    """Codes spanning E4M3's range (subnormals included) and positive scales that keep
    outputs O(1): (codes uint8 [n, k], scales float32, map)."""
    smap = {"block": lambda: Fp8ScaleMap.block(n, k), "channel": lambda: Fp8ScaleMap.channel(n),
            "tensor": Fp8ScaleMap.tensor}[layout]()
    codes = f32_to_fp8_e4m3(rng.standard_normal((n, k)).astype(np.float32) * 60.0)
    scales = (rng.uniform(0.5, 2.0, smap.shape or (1,)) / (60.0 * k ** 0.5)).astype(np.float32)
    return codes, scales.reshape(smap.shape), smap


def fp8_linear_case(rng: np.random.Generator, layout: str, m: int, n: int, k: int,
                    silu: bool = False) -> KernelCase:
    codes, scales, smap = random_fp8(rng, n, k, layout)
    x_name = "gate_up" if silu else "x"
    x = random_bf16(rng, (m, 2 * k if silu else k), 4.0 if silu else 1.0)
    inputs = {x_name: x, "w": codes, "s": scales.reshape(-1)}
    outputs = {"y": OutputSpec(DType.BF16, (m, n))}
    gemm = m > matmul_quant.GEMV_MAX_M
    if gemm:
        inputs["scratch"] = np.zeros((n, k), np.uint16)
        if silu:
            inputs["act"] = np.zeros((m, k), np.uint16)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        w = Fp8Weight(p["w"], p["s"], n, k, smap)
        if silu:
            matmul_quant.linear_silu_quant(kc, stream, p["gate_up"], w, p["y"], m,
                                           p.get("act"), p.get("scratch"))
        else:
            matmul_quant.linear_quant(kc, stream, p["x"], w, p["y"], m, p.get("scratch"))

    def oracle(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xf = swiglu_oracle(v["gate_up"]) if silu else bf16_bits_to_f32(v["x"]).astype(np.float64)
        w = dequantize_fp8(v["w"], v["s"].reshape(smap.shape), smap)
        if gemm:  # the GEMM path's specification: weights dequantized to bf16 first
            w = round_bf16(w.astype(np.float32)).astype(np.float64)
        return {"y": xf @ w.T}

    name = f"gemv_fp8{'_silu' if silu else ''} {layout} m{m} n{n} k{k}"
    return KernelCase(name, "gemv_fp8", inputs, outputs, run, oracle,
                      reference_abs_tol=TENSOR_CORE_K_TOL * k if gemm else 0.0)


def dequant_case(rng: np.random.Generator, n: int, k: int) -> KernelCase:
    codes, scales, smap = random_fp8(rng, n, k, "block")

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        matmul_quant.dequant_fp8(KernelCache(backend), stream,
                                 Fp8Weight(p["w"], p["s"], n, k, smap), p["out"])

    def oracle(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"out": dequantize_fp8(v["w"], v["s"].reshape(smap.shape), smap)}

    return KernelCase(f"dequant_fp8 block n{n} k{k}", "gemv_fp8",
                      {"w": codes, "s": scales.reshape(-1)},
                      {"out": OutputSpec(DType.BF16, (n, k))}, run, oracle)


#: (layout, m, n, k): Qwen3-8B and -0.6B projection widths, ragged N, a K that ends inside a
#: 128-column scale block (k = 1040), N not a multiple of the 128-row blocks, every M
FP8_SHAPES = [("block", 1, 4096, 4096), ("block", 3, 1001, 1040), ("block", 8, 259, 2048),
              ("channel", 1, 2048, 1024), ("channel", 5, 130, 4096), ("tensor", 2, 515, 512),
              ("tensor", 7, 33, 3072), ("block", 4, 6144, 4096), ("block", 6, 64, 16)]


@kernel_cases("gemv_fp8")
def gemv_fp8_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = [fp8_linear_case(rng, *shape) for shape in FP8_SHAPES]
    cases += [fp8_linear_case(rng, "block", 1, 1024, 3072, silu=True),
              fp8_linear_case(rng, "channel", 8, 257, 2048, silu=True),
              fp8_linear_case(rng, "block", 12, 256, 1024),
              fp8_linear_case(rng, "block", 16, 384, 1024, silu=True),
              dequant_case(rng, 300, 1040)]
    return cases
