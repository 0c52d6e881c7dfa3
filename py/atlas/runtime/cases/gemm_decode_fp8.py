"""Check cases for the decode GEMM on Hopper's FP8 tensor cores (module gemm_decode_fp8,
sm_90a; ops/matmul_fp8_wgmma.py): its three outputs (bf16, f32 logits, the SwiGLU activation
of a fused [gate | up] weight) against the float64 oracle, at both wgmma widths (m <= 4: N =
8; m <= 8: N = 16), every cluster split 1..8 and the rule's own pick, the three FP8 scale
layouts, Qwen3-8B's projection shapes, ragged n, a k ending inside a 128-column tile, x
with massive activations beside ordinary ones in one tile, and the traced twins
(tools/gpu/trace_decode_fp8.py) computing the same product.

Tolerance, per element (`fp8_mma_slack`): Hopper's FP8 MMAs sum a k-tile's products at
reduced precision (about 14 bits, DeepSeek-V3's measurement; each k32 step aligns its products
to the largest and the accumulator keeps ~2^-14 of its value), so an output may move by up to
~2^-12 of sum_k |x_k w_nk| from the exactly rounded sum; the case allows FP8_MMA_REL = 2^-11
of it (gpu195, H100: the largest seen 2^-16, beside a 3e4 activation; TENSOR_CORE_K_TOL * k,
the bf16 tensor cores' allowance, flipped 1 ulp in 3,090 outputs). The x split adds at most
2^-22 of a tile's largest |x| a value (`tests/unit/test_gemm_decode_fp8.py`), far below. A
SwiGLU output gets that slack through the activation's slope on top of gemv_quant_direct's
SWIGLU_REL_TOL allowance for a gate or up one bf16 ulp away. A wrong fragment, scale or tile
moves outputs by O(1) of sum_k |x_k w_nk|."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ...core.quant import dequantize_fp8
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import DEFAULT_TOL, KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul_fp8_wgmma
from ..ops.matmul_fp8_wgmma import Out
from ..ops.matmul_quant import Fp8Weight
from .gemv import TENSOR_CORE_K_TOL, random_bf16, swiglu_oracle
from .gemv_fp8 import random_fp8
from .gemv_quant_direct import SWIGLU_REL_TOL
from .quant_linear import spikes_tag, with_spikes


#: the FP8 MMAs' allowed distance from the exact sum, relative to sum_k |x_k w_nk| (header)
FP8_MMA_REL = 2.0 ** -11


def fp8_mma_slack(x: np.ndarray, w: np.ndarray, swiglu: bool) -> np.ndarray:
    """Per output element, how far the kernel may be from the host reference: FP8_MMA_REL of
    sum_k |x_k w_nk| (x [m, k], w [n, k], float64); `swiglu`: that distance on gate and up
    carried to act = silu(g) u through its slope, |silu'(g) u| d_g + |silu(g)| d_u."""
    d = FP8_MMA_REL * (np.abs(x) @ np.abs(w).T)
    if not swiglu:
        return d
    y = x @ w.T
    inter = y.shape[1] // 2
    g, u, dg, du = y[:, :inter], y[:, inter:], d[:, :inter], d[:, inter:]
    sig = 1.0 / (1.0 + np.exp(-np.clip(g, -60.0, 60.0)))
    return np.abs(sig * (1.0 + g * (1.0 - sig)) * u) * dg + np.abs(g * sig) * du + dg * du


def gemm_decode_fp8_case(rng: np.random.Generator, layout: str, m: int, n: int, k: int,
                         out: Out = "bf16", split: int | None = None,
                         x_spikes: Mapping[int, float] | None = None,
                         traced: bool = False) -> KernelCase:
    """y = x @ dequant(w).T (`out` 'bf16' / 'f32'), or act = swiglu of it for w = [gate | up]
    ('swiglu', n even), through `matmul_fp8_wgmma.gemm_fp8` at `split` (None: its rule);
    `traced` (bf16, split 1..4): through the traced twin (`gemm_fp8_traced`)."""
    codes, scales, smap = random_fp8(rng, n, k, layout)
    inputs = {"x": with_spikes(random_bf16(rng, (m, k)), x_spikes), "w": codes,
              "s": scales.reshape(-1)}

    def operands(v: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return (bf16_bits_to_f32(v["x"]).astype(np.float64),
                dequantize_fp8(v["w"], v["s"].reshape(smap.shape), smap))

    def product(v: dict[str, np.ndarray]) -> np.ndarray:
        x, w = operands(v)
        return x @ w.T

    if traced:  # the stamps' buffer: an input (uploaded zeroed), never compared
        inputs["trace"] = np.zeros((matmul_fp8_wgmma.grid_blocks(n, split or 1),
                                    matmul_fp8_wgmma.TRACE_WORDS), np.uint64)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        w = Fp8Weight(p["w"], p["s"], n, k, smap)
        if traced:
            matmul_fp8_wgmma.gemm_fp8_traced(KernelCache(backend), stream, p["x"], w, p["y"],
                                             m, split or 1, p["trace"])
        else:
            matmul_fp8_wgmma.gemm_fp8(KernelCache(backend), stream, p["x"], w, p["y"], m,
                                      out, split)

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
    # per element against the host reference; the float64 oracle's scalar bound takes the
    # largest (an output beside a massive activation may move by its share)
    slack = fp8_mma_slack(*operands(inputs), out == "swiglu")
    atol, rtol = DEFAULT_TOL[spec.precision]
    spec.tol = (max(atol, float(slack.max())), rtol)
    label = ("traced " if traced else "") + ("auto" if split is None else f"split{split}")
    return KernelCase(f"gemm_decode_fp8 {out} {layout} {label} m{m} n{n} k{k}"
                      f"{spikes_tag(x_spikes)}", "gemm_decode_fp8", inputs, {"y": spec}, run,
                      oracle, reference_abs_tol=tol, reference_slack={"y": slack})


#: (layout, m, n, k, out, split): Qwen3-8B's qkv / o_proj / down / gate_up + SwiGLU at batch 1
#: and the rule's splits, a wide published shape (k 5,120), ragged n with k ending 16 columns
#: into a tile (1,040), both wgmma widths (m 1..4, 5..8), every split, per-channel and
#: per-tensor scales, logits, SwiGLU on a k that is not a multiple of 128; the last three
#: give each cluster several tiles (the persistent loop and its inbox's reuse) at
#: splits 4, 1 and 3; then Qwen3-8B's down at batch 8 on split 3, 32 k-tiles of 2 KiB x a
#: block (the widest x the launch-sized shared memory takes)
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
    ("channel", 7, 600, 448, "swiglu", None), ("block", 1, 1536, 2048, "swiglu", 2),
    ("block", 2, 16384, 2048, "bf16", 4), ("block", 4, 36864, 1024, "bf16", 1),
    ("block", 8, 12288, 2048, "f32", 3), ("block", 8, 4096, 12288, "bf16", 3)]


@kernel_cases("gemm_decode_fp8")
def gemm_decode_fp8_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = [gemm_decode_fp8_case(rng, *shape) for shape in FP8_WGMMA_SHAPES]
    # massive activations in a tile of ordinary ones (their neighbours lose low bits)
    cases += [gemm_decode_fp8_case(rng, "block", 1, 4096, 4096,
                                   x_spikes={5: 3.0e4, 700: -1.2e4, 4095: 2.5e3}),
              gemm_decode_fp8_case(rng, "block", 3, 2048, 4096, "swiglu",
                                   x_spikes={130: -6.0e4})]
    # the traced twins (tools/gpu/trace_decode_fp8.py) compute the same product
    cases += [gemm_decode_fp8_case(rng, "block", 1, 6144, 4096, split=2, traced=True),
              gemm_decode_fp8_case(rng, "channel", 6, 515, 2048, split=3, traced=True)]
    return cases
