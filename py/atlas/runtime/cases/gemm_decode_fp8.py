"""Check cases for the decode GEMM on Hopper's FP8 tensor cores (module gemm_decode_fp8,
sm_90a; ops/matmul_fp8_wgmma.py): its three outputs (bf16, f32 logits, the SwiGLU activation
of a fused [gate | up] weight) against the float64 oracle, at both wgmma widths (m <= 4: N =
8; m <= 8: N = 16), every cluster split 1..8 and the rule's own pick, the three FP8 scale
layouts, Qwen3-8B's projection shapes, ragged n, a k ending inside a 128-column tile, and x
with massive activations beside ordinary ones in one tile.

Tolerance: the kernel's x is exact (hi + mid / 16, the kernel's header) except below ~2^-13 of
its tile's largest |x|, and each k-tile's 128 products are summed by the tensor cores at
reduced precision (~2^-14 of the tile's partial sum) before the f32 total: the tensor-core
allowance TENSOR_CORE_K_TOL * k of the other tensor-core GEMVs covers both with a wide margin
(a wrong fragment, scale or tile moves outputs by O(1)); the SwiGLU output gets
gemv_quant_direct's SWIGLU_REL_TOL allowance for a gate or up one bf16 ulp away."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ...core.quant import dequantize_fp8
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul_fp8_wgmma
from ..ops.matmul_fp8_wgmma import Out
from ..ops.matmul_quant import Fp8Weight
from .gemv import TENSOR_CORE_K_TOL, random_bf16, swiglu_oracle
from .gemv_fp8 import random_fp8
from .gemv_quant_direct import SWIGLU_REL_TOL
from .quant_linear import spikes_tag, with_spikes


def gemm_decode_fp8_case(rng: np.random.Generator, layout: str, m: int, n: int, k: int,
                         out: Out = "bf16", split: int | None = None,
                         x_spikes: Mapping[int, float] | None = None) -> KernelCase:
    """y = x @ dequant(w).T (`out` 'bf16' / 'f32'), or act = swiglu of it for w = [gate | up]
    ('swiglu', n even), through `matmul_fp8_wgmma.gemm_fp8` at `split` (None: its rule)."""
    codes, scales, smap = random_fp8(rng, n, k, layout)
    inputs = {"x": with_spikes(random_bf16(rng, (m, k)), x_spikes), "w": codes,
              "s": scales.reshape(-1)}

    def product(v: dict[str, np.ndarray]) -> np.ndarray:
        w = dequantize_fp8(v["w"], v["s"].reshape(smap.shape), smap)
        return bf16_bits_to_f32(v["x"]).astype(np.float64) @ w.T

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        matmul_fp8_wgmma.gemm_fp8(KernelCache(backend), stream, p["x"],
                                  Fp8Weight(p["w"], p["s"], n, k, smap), p["y"], m, out, split)

    if out == "swiglu":
        def oracle(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            gate_up = f32_to_bf16_bits(round_bf16(product(v).astype(np.float32)))
            return {"y": swiglu_oracle(gate_up)}

        big = float(np.abs(product(inputs)).max())
        spec, tol = OutputSpec(DType.BF16, (m, n // 2)), SWIGLU_REL_TOL * big * big
    else:
        def oracle(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {"y": product(v)}

        spec = (OutputSpec(DType.FP32, (m, n), bf16_valued=True) if out == "f32"
                else OutputSpec(DType.BF16, (m, n)))
        tol = TENSOR_CORE_K_TOL * k
    label = "auto" if split is None else f"split{split}"
    return KernelCase(f"gemm_decode_fp8 {out} {layout} {label} m{m} n{n} k{k}"
                      f"{spikes_tag(x_spikes)}", "gemm_decode_fp8", inputs, {"y": spec}, run,
                      oracle, reference_abs_tol=tol)


#: (layout, m, n, k, out, split): Qwen3-8B's qkv / o_proj / down / gate_up + SwiGLU at batch 1
#: and the rule's splits, a wide published shape (k 5,120), ragged n with k ending 16 columns
#: into a tile (1,040), both wgmma widths (m 1..4, 5..8), every split, per-channel and
#: per-tensor scales, logits, SwiGLU on a k that is not a multiple of 128
FP8_WGMMA_SHAPES: list[tuple[str, int, int, int, Out, int | None]] = [
    ("block", 1, 6144, 4096, "bf16", None), ("block", 1, 4096, 4096, "bf16", None),
    ("block", 1, 4096, 12288, "bf16", None), ("block", 1, 24576, 4096, "swiglu", None),
    ("block", 1, 25600, 5120, "bf16", None), ("block", 3, 1001, 1040, "bf16", None),
    ("block", 4, 2048, 4096, "bf16", 1), ("block", 2, 640, 2048, "bf16", 2),
    ("channel", 4, 259, 2048, "bf16", 3), ("tensor", 2, 515, 1024, "bf16", 4),
    ("block", 5, 130, 1344, "bf16", 5), ("block", 8, 300, 4096, "bf16", 6),
    ("block", 6, 1024, 3584, "bf16", 7), ("block", 7, 513, 4096, "bf16", 8),
    ("block", 8, 4096, 4096, "bf16", None), ("block", 1, 9001, 4096, "f32", None),
    ("channel", 6, 515, 1024, "f32", 2), ("block", 2, 3072, 2048, "swiglu", 3),
    ("channel", 7, 600, 448, "swiglu", None), ("block", 1, 1536, 2048, "swiglu", 2)]


@kernel_cases("gemm_decode_fp8")
def gemm_decode_fp8_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = [gemm_decode_fp8_case(rng, *shape) for shape in FP8_WGMMA_SHAPES]
    # massive activations in a tile of ordinary ones (their neighbours lose low bits)
    cases += [gemm_decode_fp8_case(rng, "block", 1, 4096, 4096,
                                   x_spikes={5: 3.0e4, 700: -1.2e4, 4095: 2.5e3}),
              gemm_decode_fp8_case(rng, "block", 3, 2048, 4096, "swiglu",
                                   x_spikes={130: -6.0e4})]
    return cases
