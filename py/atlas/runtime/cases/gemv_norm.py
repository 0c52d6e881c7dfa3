"""Check cases for batch 1's add_rmsnorm folded into the GEMV after it (gemv.cu
gemv_add_rmsnorm_*, ops/matmul.gemv_add_rmsnorm): residual_out = bf16(residual + delta), x =
RMSNorm(residual_out) * w (or * (1 + w)), then y = x @ W.T or act = swiglu(x @ [gate | up].T).
Each also runs its unfused twin, add_rmsnorm on a copy of the residual then the single-row
GEMV (or the SwiGLU GEMV), and the two must hold the same bits: the kernel forms x with
add_rmsnorm's arithmetic and summation order (gemv_core.cuh AddNormX). Selected by
`check_kernels.py -m gemv -k norm`."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul, norm
from ..reference.rmsnorm import rms_norm_bf16, rms_norm_offset_bf16
from .gemv import UNFUSED, random_bf16, swiglu_oracle

EPS = 1e-6


def gemv_norm_case(rng: np.random.Generator, n: int, k: int, swiglu: bool = False,
                   offset: bool = False) -> KernelCase:
    """One row through `gemv_add_rmsnorm` and through add_rmsnorm + the GEMV (the twin's
    residual copy `residual_ref`, its normed row `normed`): the residual sum and the
    products bit for bit equal, against a float64 oracle over the bf16 x."""
    inputs = {"residual": random_bf16(rng, (1, k), 4.0), "delta": random_bf16(rng, (1, k)),
              "norm_w": random_bf16(rng, (k,), 1.0 if offset else 2.0),
              "w": random_bf16(rng, (n, k), k ** -0.5)}
    inputs["residual_ref"] = inputs["residual"].copy()
    inputs["normed"] = np.zeros((1, k), np.uint16)
    y = "act" if swiglu else "y"
    width = n // 2 if swiglu else n
    outputs = {"residual": OutputSpec(DType.BF16, (1, k)),
               "residual_out": OutputSpec(DType.BF16, (1, k)),
               "residual_ref": OutputSpec(DType.BF16, (1, k)),
               y: OutputSpec(DType.BF16, (1, width)),
               y + UNFUSED: OutputSpec(DType.BF16, (1, width))}
    inputs["residual_out"] = np.zeros((1, k), np.uint16)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        spec = matmul.GemvNorm(p["residual"], p["delta"], p["norm_w"], p["residual_out"], EPS,
                               offset)
        matmul.gemv_add_rmsnorm(kc, stream, spec, p["w"], p[y], n, k, swiglu)
        norm.add_rmsnorm(kc, stream, p["residual_ref"], p["delta"], p["norm_w"], p["normed"], 1,
                         k, EPS, offset)
        if swiglu:
            matmul.gemv_swiglu(kc, stream, p["normed"], p["w"], p[y + UNFUSED], 1, n, k)
        else:
            matmul.gemv(kc, stream, p["normed"], p["w"], p[y + UNFUSED], 1, n, k, single=True)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        r = f32_to_bf16_bits(bf16_bits_to_f32(x["residual"]) + bf16_bits_to_f32(x["delta"]))
        rf = bf16_bits_to_f32(r)
        wf = bf16_bits_to_f32(x["norm_w"])
        xs = (rms_norm_offset_bf16 if offset else rms_norm_bf16)(rf, wf, EPS)
        prod = bf16_bits_to_f32(xs).astype(np.float64) @ bf16_bits_to_f32(x["w"]).astype(
            np.float64).T
        out = swiglu_oracle(f32_to_bf16_bits(prod.astype(np.float32))) if swiglu else prod
        return {"residual": bf16_bits_to_f32(x["residual"]), "residual_out": rf,
                "residual_ref": rf, y: out, y + UNFUSED: out}

    name = f"gemv norm{' swiglu' if swiglu else ''}{' offset' if offset else ''} n{n} k{k}"
    return KernelCase(name, "gemv", inputs, outputs, run, oracle,
                      same_bits=(("residual_out", "residual_ref"), (y, y + UNFUSED)))


#: (n, k, swiglu, offset): Qwen3.5-35B-A3B's Gated-DeltaNet in_proj slice (k = 2,048: one
#: vector a thread, 8 warps), Qwen3-8B's qkv (k = 4,096: two a thread) and a gate_up slice,
#: Qwen3-0.6B (k = 1,024: 128 threads) zero-centred, SmolLM2's k = 576 (72 vectors: a partial
#: warp) with an odd feature count, k = 5,120 (three a thread, the last round partial) and the
#: largest row (k = 8,192: four a thread, 32 warps' sums)
GEMV_NORM_SHAPES = [(1544, 2048, False, True), (6144, 4096, False, False),
                    (3072, 4096, True, False), (1024, 1024, True, True), (1002, 576, True, False),
                    (515, 5120, False, False), (64, 8192, False, True)]


@kernel_cases("gemv")
def gemv_norm_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [gemv_norm_case(rng, n, k, swiglu, offset) for n, k, swiglu, offset in
            GEMV_NORM_SHAPES]
