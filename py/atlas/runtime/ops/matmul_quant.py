"""Launch builders for products with quantized weights: y[m, n] = x[m, k] @ dequant(w)[n, k].T.

Every format (FP8 E4M3 here, in any `Fp8ScaleMap` layout; NVFP4 in matmul_nvfp4.py) works
the same way. Decode batches of up to 64 rows take the tensor-core GEMV (matmul_quant_mma:
the quantized bytes stream once for any batch) where the PTX set has it and the weight
meets its preconditions (`uses_mma`); elsewhere they stream the quantized bytes through the
format's CUDA-core GEMV, 8 rows a pass while passes move fewer bytes than the other route
(`gemv_passes`). Larger row counts dequantize the tensor into a bf16 scratch buffer the
caller owns and run the bf16 `linear` on it. The CUDA-core GEMV passes have the same
SwiGLU fusion as the bf16 GEMV; the tensor-core route runs silu_mul first, except where its
register-fed kernel computes the gate_up product and ends it with the SwiGLU instead
(`fuses_swiglu`: the model then runs the down projection on the activation directly).
One row of either format takes the CUDA-core GEMV on packed half-precision FMAs
(`uses_h2`: gemv_h2.cuh, its plain, logits and SwiGLU outputs) unless its switch is off.
Ahead of all of them, where ATLAS_QUANT_FP8_WGMMA=1 switches it on, FP8 products of 1..8 rows
run on Hopper's FP8 tensor cores (matmul_fp8_wgmma: plain, logits and SwiGLU outputs).
`QuantLinear` wraps any format behind the interface of `Bf16Linear`, so model layers never
see the format; its f32 output (a quantized LM head's logits) is the tensor-core GEMVs' or,
one row, the half-precision-FMA GEMV's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...core.quant import Fp8ScaleMap
from ..gpu import DevicePtr, Stream
from ..kernel_abi import (DEQUANT_FP8, GEMV_FP8, GEMV_FP8_CVT_F32_SINGLE, GEMV_FP8_CVT_SINGLE,
                          GEMV_FP8_CVT_SWIGLU_SINGLE, GEMV_FP8_CVT_SWIGLU_X8_SINGLE,
                          GEMV_FP8_CVT_X8_SINGLE, GEMV_FP8_H2,
                          GEMV_FP8_H2_F32, GEMV_FP8_H2_SWIGLU, GEMV_FP8_SINGLE, GEMV_SILU_FP8,
                          GEMV_SILU_FP8_SINGLE, PDL_FENCE)
from . import KernelCache, matmul_fp8_wgmma, matmul_nvfp4, matmul_quant_mma
from .activation import silu_mul
from .matmul import (FUSED_SILU_MAX_K, GEMV_MAX_M, GEMV_MAX_THREADS, GEMV_ROWS_PER_BLOCK,
                     fuses_gate_up_swiglu, linear, linear_silu, linear_swiglu,
                     single_gemv_rows)
from .matmul_h2 import H2Out, launch_h2


@dataclass(frozen=True, slots=True)
class Fp8Weight:
    """A device FP8 weight: codes [n, k] (one byte each), float32 scales, their index map."""

    codes: DevicePtr
    scales: DevicePtr
    n: int
    k: int
    smap: Fp8ScaleMap

    def __post_init__(self) -> None:
        if self.n < 1 or self.k < 16 or self.k % 16:
            raise ValueError(f"FP8 weight [{self.n}, {self.k}]: k must be a positive "
                             "multiple of 16")
        if self.smap.col_stride and self.smap.col_shift < 4:
            raise ValueError("FP8 scale blocks must span at least 16 columns")
        if self.codes % 16:
            raise ValueError(f"FP8 codes pointer {self.codes:#x} is not 16-byte aligned")

    @property
    def map_args(self) -> tuple[int, int, int, int]:
        s = self.smap
        return (s.row_shift, s.row_stride, s.col_shift, s.col_stride)

    @property
    def nbytes(self) -> int:
        shape = self.smap.shape
        return self.n * self.k + 4 * (int(np.prod(shape)) if shape else 1)

    def gemv(self, kc: KernelCache, stream: Stream, x: DevicePtr, y: DevicePtr, m: int,
             silu: bool = False) -> None:
        (gemv_silu_fp8 if silu else gemv_fp8)(kc, stream, x, self, y, m)

    def dequant(self, kc: KernelCache, stream: Stream, out: DevicePtr) -> None:
        dequant_fp8(kc, stream, self, out)

    def mma(self, kc: KernelCache, stream: Stream, x: DevicePtr, y: DevicePtr, m: int) -> None:
        matmul_quant_mma.gemv_mma(kc, stream, x, self, y, m)


def gemv_fp8_threads(k: int, chunks_per_thread: int = 1) -> int:
    """Threads per block: `chunks_per_thread` 16-value chunks of each row per thread (the
    batch-1 convert entry point takes 2: gemv_core's kUnroll, every load slot used, and
    smaller blocks, more of them per SM), up to 256."""
    chunks = -(-(k // 16) // chunks_per_thread)
    return min(GEMV_MAX_THREADS, max(32, -(-chunks // 32) * 32))


#: whether FP8 products of one row take the CUDA-core GEMV on the hardware E4M3 convert
#: (`uses_core_single`) unless ATLAS_QUANT_FP8_CORE says otherwise. On by estimate, not yet
#: timed (gemv_fp8.cu's header: ~3 instructions a weight, 0.5 of them integer, in the bf16
#: GEMV's mould at ~85% of copy; the tensor-core twin measured 57-66% on Qwen3-8B's qkv / o
#: / down at gpu19); the lead's A/B decides.
FP8_CORE_BY_DEFAULT = True


#: whether FP8 products of one row take the half-precision-FMA GEMV (`uses_fp8_h2`) unless
#: ATLAS_QUANT_FP8_H2 says otherwise. Off: measured slower than the convert / tensor-core
#: routes (Qwen3-8B FP8 block batch 1, GPU ms a step: gpu44 3.056 vs 3.027, gpu45 in the
#: other order 3.120 vs 3.041), though it issues ~1.5 slots a weight to the convert GEMV's ~3.
FP8_H2_BY_DEFAULT = False

#: the FP8 half-precision-FMA GEMV's entry points by output
_FP8_H2 = {"bf16": GEMV_FP8_H2, "f32": GEMV_FP8_H2_F32, "swiglu": GEMV_FP8_H2_SWIGLU}


def uses_fp8_h2(kc: KernelCache, w: object, m: int) -> bool:
    """Whether an m-row product of w runs on gemv_fp8_h2_*: one row of an FP8 weight (any
    scale layout: its preconditions are the weight's own), then the route switch
    (ATLAS_QUANT_FP8_H2 forces it on / off), else FP8_H2_BY_DEFAULT where the loaded set has
    the module (every target builds it; reference backends load none)."""
    if m != 1 or not isinstance(w, Fp8Weight):
        return False
    forced = kc.routes.quant_fp8_h2
    if forced is not None:
        return forced
    return FP8_H2_BY_DEFAULT and GEMV_FP8_H2.module in kc.backend.module_names


def gemv_fp8_h2(kc: KernelCache, stream: Stream, x: DevicePtr, w: Fp8Weight, y: DevicePtr,
                out: H2Out = "bf16") -> None:
    """One row on gemv_fp8_h2_*: y [1, n] bf16 (`out` 'bf16'), f32 logits ('f32'), or the
    SwiGLU activation [1, n / 2] of the fused [gate | up] weight ('swiglu', n even)."""
    launch_h2(kc, stream, _FP8_H2, out, x, y, w.n, w.k, 16, (w.codes, w.scales), w.map_args)


def uses_h2(kc: KernelCache, w: object, m: int) -> bool:
    """Whether an m-row product of w runs on the half-precision-FMA GEMV of its format
    (NVFP4: `matmul_nvfp4.uses_h2`, FP8: `uses_fp8_h2`)."""
    return matmul_nvfp4.uses_h2(kc, w, m) or uses_fp8_h2(kc, w, m)


def gemv_h2(kc: KernelCache, stream: Stream, x: DevicePtr, w: "QuantWeight", y: DevicePtr,
            out: H2Out = "bf16") -> None:
    """One row of w (NVFP4 or FP8, `uses_h2`) on its format's half-precision-FMA GEMV."""
    if isinstance(w, Fp8Weight):
        gemv_fp8_h2(kc, stream, x, w, y, out)
    else:
        matmul_nvfp4.gemv_h2(kc, stream, x, w, y, out)


def uses_core_single(kc: KernelCache, w: "QuantWeight", m: int) -> bool:
    """Whether an m-row product of w runs gemv_fp8_cvt_bf16_single (f32 logits:
    gemv_fp8_cvt_f32_single): one row, an FP8 weight
    (any scale layout: the CUDA-core GEMV's preconditions are the weight's own), then the
    route switch (ATLAS_QUANT_FP8_CORE forces it on / off), unset FP8_CORE_BY_DEFAULT where
    the loaded set has the module (reference backends load none); consulted where the
    half-precision-FMA GEMV does not take the row (`uses_fp8_h2`). The [gate | up] product
    that ends with its SwiGLU asks `uses_core_swiglu`."""
    if m != 1 or not isinstance(w, Fp8Weight):
        return False
    forced = kc.routes.quant_fp8_core
    if forced is not None:
        return forced
    return FP8_CORE_BY_DEFAULT and GEMV_FP8_CVT_SINGLE.module in kc.backend.module_names


#: whether the [gate | up] product of one FP8 row ends with its SwiGLU on the convert GEMV
#: (`uses_core_swiglu`) unless ATLAS_QUANT_FP8_CORE_SWIGLU says otherwise, instead of on the
#: tensor-core twin (gemv_qd_fp8_swiglu: Qwen3-8B's 100.7 MB gate_up in 38.9 us at batch 1,
#: ~61% of copy, gpu77, where the convert GEMV streams the down projection at ~89%).
#: Measured (gpu79, 2026-12-04, Qwen3-8B FP8-block batch 1 x 512, GPU ms a step, on / off /
#: on): 2.810 / 3.122 / 2.810, the gate_up 30.7 us on the step's critical path.
FP8_CORE_SWIGLU_BY_DEFAULT = True


def uses_core_swiglu(kc: KernelCache, w: "QuantWeight", m: int) -> bool:
    """Whether the fused [gate | up] product of m rows of w ending with its SwiGLU runs
    gemv_fp8_cvt_swiglu_bf16_single: the convert GEMV takes the row (`uses_core_single`) and
    the route switch (ATLAS_QUANT_FP8_CORE_SWIGLU), unset FP8_CORE_SWIGLU_BY_DEFAULT, says so."""
    if not uses_core_single(kc, w, m):
        return False
    forced = kc.routes.quant_fp8_core_swiglu
    return FP8_CORE_SWIGLU_BY_DEFAULT if forced is None else forced


def _check_rows(name: str, m: int) -> None:
    if not 1 <= m <= GEMV_MAX_M:
        raise ValueError(f"{name}: m={m} must be in 1..{GEMV_MAX_M}")


#: the convert GEMV's entry points by (product, weight rows a block): 8-row twins of the bf16
#: and SwiGLU products where matmul.single_gemv_rows says 8 (ATLAS_GEMV_ROWS, _SWIGLU_ROWS)
_FP8_CVT = {("bf16", 4): GEMV_FP8_CVT_SINGLE, ("swiglu", 4): GEMV_FP8_CVT_SWIGLU_SINGLE,
            ("f32", 4): GEMV_FP8_CVT_F32_SINGLE, ("bf16", 8): GEMV_FP8_CVT_X8_SINGLE,
            ("swiglu", 8): GEMV_FP8_CVT_SWIGLU_X8_SINGLE}


def gemv_fp8(kc: KernelCache, stream: Stream, x: DevicePtr, w: Fp8Weight, y: DevicePtr,
             m: int, single: bool | None = None, cvt: bool = False,
             swiglu: bool = False, out_f32: bool = False) -> None:
    """y[m, n] = x[m, k] @ dequant(w).T for 1 <= m <= 8 (bf16 x and y); `cvt` (m == 1): the
    entry point decoding E4M3 by the hardware convert, two chunks a row per thread; with
    `swiglu` its twin ending the fused [gate | up] product with its SwiGLU (y the activation
    [1, n / 2], two features a block; n even), with `out_f32` its twin writing f32 logits
    (a quantized LM head: the bf16-rounded sums widened)."""
    _check_rows("gemv_fp8", m)
    if out_f32 and (not cvt or swiglu):
        raise ValueError("gemv_fp8: f32 outputs only on the convert entry point, no SwiGLU")
    if cvt:
        if m != 1:
            raise ValueError(f"gemv_fp8: the convert entry point takes m=1, got m={m}")
        if swiglu and w.n % 2:
            raise ValueError(f"gemv_fp8: the SwiGLU entry point needs an even n, got {w.n}")
        product = "swiglu" if swiglu else "f32" if out_f32 else "bf16"
        rows = 8 if ((product, 8) in _FP8_CVT
                     and single_gemv_rows(kc, product == "swiglu", w.k) == 8) else \
            GEMV_ROWS_PER_BLOCK
        kc.get(_FP8_CVT[product, rows])(stream, -(-w.n // rows), gemv_fp8_threads(w.k, 2), 0,
                                        x, w.codes, w.scales, y, m, w.n, w.k, *w.map_args)
        return
    if swiglu:
        raise ValueError("gemv_fp8: only the convert entry point ends with the SwiGLU")
    single = m == 1 if single is None else single
    sig = GEMV_FP8_SINGLE if single else GEMV_FP8
    kc.get(sig)(stream, -(-w.n // GEMV_ROWS_PER_BLOCK), gemv_fp8_threads(w.k), 0, x, w.codes,
                w.scales, y, m, w.n, w.k, *w.map_args)


def gemv_silu_fp8(kc: KernelCache, stream: Stream, gate_up: DevicePtr, w: Fp8Weight,
                  y: DevicePtr, m: int, single: bool | None = None) -> None:
    """y = swiglu(gate_up[m, 2k]) @ dequant(w).T for 1 <= m <= 8, in one launch."""
    _check_rows("gemv_silu_fp8", m)
    single = m == 1 if single is None else single
    sig = GEMV_SILU_FP8_SINGLE if single else GEMV_SILU_FP8
    kc.get(sig)(stream, -(-w.n // GEMV_ROWS_PER_BLOCK), gemv_fp8_threads(w.k), 0, gate_up,
                w.codes, w.scales, y, m, w.n, w.k, *w.map_args)


def dequant_fp8(kc: KernelCache, stream: Stream, w: Fp8Weight, out: DevicePtr) -> None:
    """out[n, k] bf16 = bf16(e4m3(codes) * scale), for the GEMM path."""
    chunks = w.n * (w.k // 16)
    kc.get(DEQUANT_FP8)(stream, -(-chunks // 256), 256, 0, w.codes, w.scales, out, w.n, w.k,
                        *w.map_args)


class QuantWeight(Protocol):
    """What a quantized weight format provides: its GEMV (plain or with the SwiGLU input
    fused) for decode rows, and a dequantize into bf16 [n, k] for the GEMM path."""

    n: int
    k: int

    @property
    def nbytes(self) -> int: ...  # codes and scales: what one GEMV pass streams

    def gemv(self, kc: KernelCache, stream: Stream, x: DevicePtr, y: DevicePtr, m: int,
             silu: bool = False) -> None: ...

    def dequant(self, kc: KernelCache, stream: Stream, out: DevicePtr) -> None: ...

    def mma(self, kc: KernelCache, stream: Stream, x: DevicePtr, y: DevicePtr,
            m: int) -> None: ...  # the tensor-core GEMV, 1 <= m <= 64


def uses_mma(kc: KernelCache, w: QuantWeight, m: int) -> bool:
    """The tensor-core route: switched on (ATLAS_QUANT_MMA), the module loaded (hopper
    sets), a decode batch (m <= 64) and a weight meeting the kernel's preconditions."""
    return (kc.routes.quant_mma and m <= matmul_quant_mma.MMA_QUANT_MAX_M
            and matmul_quant_mma.available(kc) and matmul_quant_mma.supports(w))


def gemv_passes(weight_bytes: int, n: int, k: int, m: int) -> int:
    """How many GEMV launches of up to 8 rows compute m rows; 0: dequantize + GEMM instead.

    Each pass streams the quantized weight once; the GEMM path streams it once, then writes
    and reads a bf16 copy (4 bytes a value). Passes run while they move no more bytes: up to
    40 rows for FP8, 64 for NVFP4 (decode batches), never for prefill chunks."""
    passes = -(-m // GEMV_MAX_M)
    return passes if passes * weight_bytes <= weight_bytes + 4 * n * k else 0


def _gemv_rows(kc: KernelCache, stream: Stream, x: DevicePtr, x_row_bytes: int,
               w: QuantWeight, y: DevicePtr, m: int, silu: bool) -> None:
    for r in range(0, m, GEMV_MAX_M):
        w.gemv(kc, stream, x + r * x_row_bytes, y + r * 2 * w.n, min(GEMV_MAX_M, m - r), silu)


def silu_fused(weight_bytes: int, n: int, k: int, m: int, mma: bool) -> bool:
    """Whether `linear_silu_quant` runs the SwiGLU-fused CUDA-core GEMV passes (else it
    needs an activation scratch)."""
    return not mma and k <= FUSED_SILU_MAX_K and bool(gemv_passes(weight_bytes, n, k, m))


def fuses_swiglu(kc: KernelCache, w: QuantWeight, m: int) -> bool:
    """Whether an m-row product with the fused [gate | up] weight w can end with its SwiGLU
    in the GEMV (`linear_swiglu_quant`): n splits in halves, and one row on the
    half-precision-FMA GEMV (`uses_h2`) or the register-fed tensor-core kernel (1..8 rows,
    loaded, switched on) takes it."""
    return w.n % 2 == 0 and (matmul_fp8_wgmma.uses(kc, w, m) or uses_h2(kc, w, m)
                             or uses_core_swiglu(kc, w, m) or (
        uses_mma(kc, w, m) and matmul_quant_mma.uses_direct(kc, w, m)))


def linear_swiglu_quant(kc: KernelCache, stream: Stream, x: DevicePtr, w: QuantWeight,
                        act: DevicePtr, m: int) -> None:
    """act[m, n / 2] = bf16(bf16(silu(gate)) * up) of [gate | up] = x @ dequant(w).T, in one
    launch: the same values as `linear_quant` then silu_mul. Callers route by
    `fuses_swiglu`; the launch builder checks the kernel's own preconditions."""
    if matmul_fp8_wgmma.uses(kc, w, m):
        matmul_fp8_wgmma.gemm_fp8(kc, stream, x, w, act, m, "swiglu")
        return
    if uses_h2(kc, w, m):
        gemv_h2(kc, stream, x, w, act, "swiglu")
        return
    if uses_core_swiglu(kc, w, m):
        gemv_fp8(kc, stream, x, w, act, m, cvt=True, swiglu=True)
        return
    matmul_quant_mma.gemv_direct_swiglu(kc, stream, x, w, act, m)


def dequantizes(kc: KernelCache, w: QuantWeight, m: int) -> bool:
    """Whether `linear_quant` runs an m-row product by dequantizing w into a bf16 scratch and
    the bf16 GEMM (no GEMV route takes it): then the bf16 GEMM's epilogues apply, the gated
    one included (`QuantLinear.fuses_swiglu`)."""
    return not (matmul_fp8_wgmma.uses(kc, w, m) or uses_h2(kc, w, m)
                or uses_core_single(kc, w, m) or uses_mma(kc, w, m)
                or gemv_passes(w.nbytes, w.n, w.k, m))


def linear_quant(kc: KernelCache, stream: Stream, x: DevicePtr, w: QuantWeight, y: DevicePtr,
                 m: int, scratch: DevicePtr | None = None, mma: bool | None = None) -> None:
    """y = x @ dequant(w).T for any m: 1..8 FP8 rows on the FP8 tensor-core kernel where
    switched on (`matmul_fp8_wgmma.uses`, unless `mma` is True), else one row on the
    half-precision-FMA GEMV (`uses_h2`, likewise), else one FP8 row on the convert GEMV
    (`uses_core_single`, likewise), the tensor-core GEMV (`uses_mma`; `mma` True / False
    forces it on / off), else GEMV passes (`gemv_passes`), else dequantize into `scratch`
    (bf16 [n, k], graph-stable) and the bf16 GEMM."""
    if mma is not True and matmul_fp8_wgmma.uses(kc, w, m):
        matmul_fp8_wgmma.gemm_fp8(kc, stream, x, w, y, m)
        return
    if mma is not True and uses_h2(kc, w, m):
        gemv_h2(kc, stream, x, w, y)
        return
    if mma is not True and uses_core_single(kc, w, m):
        gemv_fp8(kc, stream, x, w, y, m, cvt=True)
        return
    if uses_mma(kc, w, m) if mma is None else mma:
        w.mma(kc, stream, x, y, m)
        return
    if gemv_passes(w.nbytes, w.n, w.k, m):
        _gemv_rows(kc, stream, x, 2 * w.k, w, y, m, silu=False)
        return
    if not scratch:
        raise ValueError(f"quantized linear: m={m} > {GEMV_MAX_M} needs a bf16 [n, k] "
                         "scratch buffer")
    dequant_for_gemm(kc, stream, w, scratch)
    linear(kc, stream, x, scratch, y, m, w.n, w.k)


def dequant_for_gemm(kc: KernelCache, stream: Stream, w: QuantWeight, scratch: DevicePtr
                     ) -> None:
    """w dequantized into `scratch` for a GEMM launched next: then `pdl_fence`, so the GEMM's
    blocks (whose TMA weight tiles are requested before their PDL wait: no kernel writes
    weights) start only once the dequantize has completed and its stores are visible. Without
    it a GEMM block resident under the dequantize's last wave could read scratch rows not yet
    written (session 44, docs/quantization.md)."""
    w.dequant(kc, stream, scratch)
    kc.get(PDL_FENCE)(stream, 1, 32, 0)


def linear_silu_quant(kc: KernelCache, stream: Stream, gate_up: DevicePtr, w: QuantWeight,
                      y: DevicePtr, m: int, act_scratch: DevicePtr | None = None,
                      w_scratch: DevicePtr | None = None, mma: bool | None = None) -> None:
    """The down projection: SwiGLU fused into the CUDA-core GEMV passes for k <= 4096 (as
    the bf16 GEMV, `matmul.FUSED_SILU_MAX_K`: beyond, every block recomputing the whole
    activation row costs more than a silu_mul launch, and the fused kernels' registers
    allow one block per SM), else silu_mul into `act_scratch` ([m, k] bf16) and
    `linear_quant` (tensor-core GEMV, GEMV passes or through `w_scratch`); `mma` as for
    `linear_quant`."""
    mma = uses_mma(kc, w, m) if mma is None else mma
    if silu_fused(w.nbytes, w.n, w.k, m, mma) and not matmul_fp8_wgmma.uses(kc, w, m):
        _gemv_rows(kc, stream, gate_up, 4 * w.k, w, y, m, silu=True)
        return
    if not act_scratch:
        raise ValueError(f"quantized linear_silu: m={m} needs an activation scratch buffer")
    silu_mul(kc, stream, gate_up, act_scratch, m, w.k)
    linear_quant(kc, stream, act_scratch, w, y, m, w_scratch, mma)


@dataclass(frozen=True, slots=True)
class Bf16Linear:
    """A bf16 weight [n, k] behind the same interface as the quantized ones."""

    ptr: DevicePtr
    n: int
    k: int

    @property
    def nbytes(self) -> int:
        """What one GEMV pass streams (LinearWeight.nbytes)."""
        return 2 * self.n * self.k

    def scratch_bytes(self, m: int) -> int:
        return 0

    def fuses_swiglu(self, kc: KernelCache, m: int, gelu: bool = False) -> bool:
        """Whether, as a fused [gate | up] weight, an m-row product ends with the SwiGLU
        (`matmul.fuses_gate_up_swiglu`: one row, or decode batches on the decode GEMM;
        `gelu`: the tanh-GELU GLU, on the same routes); otherwise gate_up ends in memory and
        the down GEMV may fuse the SwiGLU instead."""
        return fuses_gate_up_swiglu(kc, m, self.n, self.k, gelu)

    def linear_swiglu(self, kc: KernelCache, stream: Stream, x: DevicePtr, act: DevicePtr,
                      m: int, gelu: bool = False, w_scratch: DevicePtr | None = None) -> None:
        """act = swiglu(x @ [gate | up].T) (`gelu`: the tanh-GELU GLU) in one launch
        (`fuses_swiglu` must hold; a bf16 weight needs no `w_scratch`)."""
        linear_swiglu(kc, stream, x, self.ptr, act, m, self.n, self.k, gelu)

    def linear(self, kc: KernelCache, stream: Stream, x: DevicePtr, y: DevicePtr, m: int,
               out_f32: bool = False, w_scratch: DevicePtr | None = None) -> None:
        linear(kc, stream, x, self.ptr, y, m, self.n, self.k, out_f32)

    def linear_silu(self, kc: KernelCache, stream: Stream, gate_up: DevicePtr, y: DevicePtr,
                    m: int, act_scratch: DevicePtr | None = None,
                    w_scratch: DevicePtr | None = None) -> None:
        linear_silu(kc, stream, gate_up, self.ptr, y, m, self.n, self.k, scratch=act_scratch)


@dataclass(frozen=True, slots=True)
class QuantLinear:
    """A quantized weight (FP8, NVFP4): the GEMV reads its codes for decode batches; larger
    row counts dequantize it into the caller's bf16 [n, k] scratch first."""

    w: QuantWeight

    @property
    def n(self) -> int:
        return self.w.n

    @property
    def k(self) -> int:
        return self.w.k

    @property
    def nbytes(self) -> int:
        """What one GEMV pass streams (codes and scales)."""
        return self.w.nbytes

    def scratch_bytes(self, m: int) -> int:
        return 0 if gemv_passes(self.nbytes, self.n, self.k, m) else 2 * self.n * self.k

    def fuses_swiglu(self, kc: KernelCache, m: int, gelu: bool = False) -> bool:
        """Whether, as a fused [gate | up] weight, an m-row product can end with the SwiGLU
        (`linear_swiglu`): on a quantized GEMV (`matmul_quant.fuses_swiglu`; none ends with
        the tanh-GELU GLU), or, where the product dequantizes into the bf16 scratch
        (`dequantizes`), wherever the bf16 GEMM ends with the activation (the prefill GEMM's
        gated entries, `matmul.fuses_gate_up_swiglu`)."""
        if dequantizes(kc, self.w, m):
            return fuses_gate_up_swiglu(kc, m, self.w.n, self.w.k, gelu)
        return not gelu and fuses_swiglu(kc, self.w, m)

    def linear_swiglu(self, kc: KernelCache, stream: Stream, x: DevicePtr, act: DevicePtr,
                      m: int, gelu: bool = False, w_scratch: DevicePtr | None = None) -> None:
        """act = swiglu(x @ [gate | up].T) (`fuses_swiglu` must hold): one quantized GEMV
        launch, or the weight dequantized into `w_scratch` (bf16 [n, k]) and the bf16 GEMM's
        gated launch."""
        if dequantizes(kc, self.w, m):
            if not w_scratch:
                raise ValueError(f"quantized linear_swiglu: m={m} needs a bf16 [n, k] scratch")
            dequant_for_gemm(kc, stream, self.w, w_scratch)
            linear_swiglu(kc, stream, x, w_scratch, act, m, self.w.n, self.w.k, gelu)
            return
        if gelu:
            raise ValueError("linear_swiglu: no quantized GEMV ends with the GELU GLU")
        linear_swiglu_quant(kc, stream, x, self.w, act, m)

    def linear(self, kc: KernelCache, stream: Stream, x: DevicePtr, y: DevicePtr, m: int,
               out_f32: bool = False, w_scratch: DevicePtr | None = None) -> None:
        """y = x @ dequant(w).T; `out_f32`: f32 logits of a quantized LM head (the bf16-
        rounded sums widened, any m, on the tensor-core GEMVs or, one row, the
        half-precision-FMA GEMV or FP8's convert GEMV: never a bf16 copy of the
        vocabulary-sized weight)."""
        if out_f32:
            if matmul_fp8_wgmma.uses(kc, self.w, m):
                matmul_fp8_wgmma.gemm_fp8(kc, stream, x, self.w, y, m, "f32")
                return
            if uses_h2(kc, self.w, m):
                gemv_h2(kc, stream, x, self.w, y, "f32")
                return
            if uses_core_single(kc, self.w, m):
                gemv_fp8(kc, stream, x, self.w, y, m, cvt=True, out_f32=True)
                return
            matmul_quant_mma.gemv_logits(kc, stream, x, self.w, y, m)
            return
        linear_quant(kc, stream, x, self.w, y, m, w_scratch)

    def linear_silu(self, kc: KernelCache, stream: Stream, gate_up: DevicePtr, y: DevicePtr,
                    m: int, act_scratch: DevicePtr | None = None,
                    w_scratch: DevicePtr | None = None) -> None:
        linear_silu_quant(kc, stream, gate_up, self.w, y, m, act_scratch, w_scratch)


#: what a model layer holds for a projection: it calls linear() / linear_silu() and never
#: needs to know the weight format
LinearWeight = Bf16Linear | QuantLinear
