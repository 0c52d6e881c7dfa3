"""The check case of a quantized linear, whatever the format: y = x @ dequant(w).T through
`matmul_quant.linear_quant` (or `linear_silu_quant` with the SwiGLU input), against a
float64 oracle. `mma` cases force the tensor-core GEMV: its register-fed kernel for 1..8
rows (gemv_quant_direct) when `direct` (`staged`: its shared-memory-staged variant, the
gemv_qs_* entry points; `tile_loop` True / False: its tile / pipelined loop, None: the
format's default), else its ring kernel (gemv_mma_quant); the others
force it off: GEMV passes of up to 8 rows or dequantize + GEMM (`gemv_passes` decides).
`weight_inputs` are the weight's host arrays: their bytes are what the device weight
streams, so the case predicts the route the launch builder takes."""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import DEFAULT_TOL, KernelCase, OutputSpec
from ..ops import KernelCache, matmul_quant
from ..ops.routes import KernelRoutes
from .gemv import TENSOR_CORE_K_TOL, random_bf16, swiglu_oracle

#: reference distance of the half-precision-FMA GEMV (gemv_h2.cuh: gemv_nvfp4_h2_*,
#: gemv_fp8_h2_*), relative to the outputs' RMS: each HFMA2 rounds a 16-value group's running
#: half-sum to f16 (half an ulp, 2^-11 relative, ~2^-11 x sqrt(12) of the products' RMS over
#: a group's 8 steps), so over k / 16 random-signed groups the error's RMS is ~2^-11 x
#: sqrt(12 / 16) ~ 2^-11 of the outputs' RMS; 2^-8 is ~9 of those, and a single wrong code
#: (~2 k^-1/2 of the RMS, 3e-2 at k = 4,096) stays well outside it
H2_REF_REL_TOL = 2.0 ** -8

#: the device weight from the case's buffers (p: name -> device pointer)
WeightFn = Callable[[dict[str, DevicePtr]], matmul_quant.QuantWeight]
#: the exact float64 [n, k] weight from the case's host inputs
DequantFn = Callable[[dict[str, np.ndarray]], np.ndarray]


def with_spikes(x: np.ndarray, spikes: Mapping[int, float] | None) -> np.ndarray:
    """x (bf16 bits [m, k]) with column i of every row set to bf16(v) for each i: v of
    `spikes`: the "massive activations" of real decode inputs (thousands and beyond) that
    uniform random x never has."""
    if not spikes:
        return x
    x = x.copy()
    for i, v in spikes.items():
        x[:, i] = f32_to_bf16_bits(np.array([v], np.float32))[0]
    return x


def spikes_tag(spikes: Mapping[int, float] | None) -> str:
    """A case name's mark of `with_spikes` x: its largest magnitude (x-max), or, where every
    set value is below 1 (tiny x), that largest one (x-tiny)."""
    if not spikes:
        return ""
    top = max(abs(v) for v in spikes.values())
    return f" x-{'max' if top >= 1.0 else 'tiny'}{top:.0e}"


def case_routes(direct: bool, e2m1_lut: bool, staged: bool, tile_loop: bool | None,
                narrow: int | None, fp8_core: bool = False, h2: bool = False,
                fp8_h2: bool = False) -> KernelRoutes:
    """The environment's routes with a case's forced choices: a forced `tile_loop` (and no
    `narrow`) keeps the narrow loops off, even under ATLAS_QUANT_NARROW, so the case runs
    the loop its name says; `fp8_core` forces the batch-1 FP8 convert GEMV on (else off),
    `h2` / `fp8_h2` the batch-1 NVFP4 / FP8 half-precision-FMA GEMV (else off)."""
    base = KernelRoutes.from_env()
    if narrow is None and tile_loop is not None:
        narrow = 0
    return dataclasses.replace(base, quant_direct=direct, quant_e2m1_lut=e2m1_lut,
                               quant_staged=staged, quant_tile_loop=tile_loop,
                               quant_narrow=base.quant_narrow if narrow is None else narrow,
                               quant_fp8_core=fp8_core, quant_nvfp4_h2=h2,
                               quant_fp8_h2=fp8_h2)


def quant_linear_case(rng: np.random.Generator, name: str, module: str, m: int, n: int,
                      k: int, silu: bool, weight_inputs: dict[str, np.ndarray],
                      weight: WeightFn, dequant: DequantFn, mma: bool = False,
                      direct: bool = False, logits: bool = False,
                      e2m1_lut: bool = False, staged: bool = False,
                      tile_loop: bool | None = None, narrow: int | None = None,
                      fp8_core: bool = False, h2: bool = False, fp8_h2: bool = False,
                      x_spikes: Mapping[int, float] | None = None, rows: int = 4) -> KernelCase:
    """`fp8_core`: one FP8 row on the CUDA-core convert GEMV (routes.quant_fp8_core); `h2` /
    `fp8_h2`: one NVFP4 / FP8 row on the half-precision-FMA GEMV (routes.quant_nvfp4_h2 /
    quant_fp8_h2, logits included);
    `logits`: f32 outputs (a quantized LM head: `QuantLinear.linear(out_f32=True)`, the
    tensor-core GEMVs' `_f32` entry points, any m); `e2m1_lut`: the register-fed kernel's
    NVFP4 byte-table entry points (routes.quant_e2m1_lut); `narrow` 1 / 2: its narrow
    pipelined loops (routes.quant_narrow; None with a forced `tile_loop`: neither);
    `x_spikes`: x columns set to large values (`with_spikes`)."""
    x_name = "gate_up" if silu else "x"
    x = random_bf16(rng, (m, 2 * k if silu else k), 4.0 if silu else 1.0)
    inputs = {x_name: with_spikes(x, x_spikes), **weight_inputs}
    wbytes = sum(a.nbytes for a in weight_inputs.values())
    gemm = not mma and not logits and not matmul_quant.gemv_passes(wbytes, n, k, m)
    if gemm:
        inputs["scratch"] = np.zeros((n, k), np.uint16)
    if silu and not matmul_quant.silu_fused(wbytes, n, k, m, mma):
        inputs["act"] = np.zeros((m, k), np.uint16)

    routes = dataclasses.replace(
        case_routes(direct, e2m1_lut, staged, tile_loop, narrow, fp8_core, h2, fp8_h2),
        gemv_rows=rows, gemv_swiglu_rows=rows)  # 8: the batch-1 CUDA-core GEMVs' 8-row twins

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend, routes)
        if logits:
            matmul_quant.QuantLinear(weight(p)).linear(kc, stream, p["x"], p["y"], m,
                                                       out_f32=True)
        elif silu:
            matmul_quant.linear_silu_quant(kc, stream, p["gate_up"], weight(p), p["y"], m,
                                           p.get("act"), p.get("scratch"), mma)
        else:
            matmul_quant.linear_quant(kc, stream, p["x"], weight(p), p["y"], m,
                                      p.get("scratch"), mma)

    def oracle(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xf = swiglu_oracle(v["gate_up"]) if silu else bf16_bits_to_f32(v["x"]).astype(np.float64)
        w = dequant(v)
        if gemm:  # the GEMM path's specification: weights dequantized to bf16 first
            w = round_bf16(w.astype(np.float32)).astype(np.float64)
        return {"y": xf @ w.T}

    out = (OutputSpec(DType.FP32, (m, n), bf16_valued=True) if logits
           else OutputSpec(DType.BF16, (m, n)))
    ref_tol = TENSOR_CORE_K_TOL * k if gemm or mma or logits else 0.0
    if h2 or fp8_h2:
        y = oracle(inputs)["y"]
        ref_tol = max(ref_tol, H2_REF_REL_TOL * float(np.sqrt(np.mean(y * y))))
    if h2 or fp8_h2:  # a massive x's f16 product sets its lane's rounding step (NVFP4: ~4 at
        # x ~ 6.5e4 below the 2^16 guard; FP8: x from 16 on, scaled), an error every output of
        # the chunk carries, RMS-relative, so the oracle's bound is too (gpu45: an NVFP4
        # output of -0.139 near cancellation came out -0.099 beside x = 65,280)
        atol, rtol = DEFAULT_TOL[out.precision]
        out.tol = (max(atol, ref_tol), rtol)
    return KernelCase(name, module, inputs, {"y": out}, run, oracle, reference_abs_tol=ref_tol)
