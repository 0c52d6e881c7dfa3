"""Launch builders for NVFP4 weights (kernels/hopper/common/gemv_nvfp4.cu).

An NVFP4 weight [n, k] is three device tensors: E2M1 codes packed two a byte [n, k / 2],
E4M3 group scales [n, k / 16] and a float32 scale per output row (the checkpoint's
per-tensor global scale, repeated over that tensor's rows so fused parts keep their own).
`Nvfp4Weight` is a `QuantWeight`: wrap it in `matmul_quant.QuantLinear` for model layers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..gpu import DevicePtr, Stream
from ..kernel_abi import (DEQUANT_NVFP4, GEMV_NVFP4, GEMV_NVFP4_H2, GEMV_NVFP4_H2_F32,
                          GEMV_NVFP4_H2_SWIGLU, GEMV_NVFP4_H2X8, GEMV_NVFP4_H2X8_F32,
                          GEMV_NVFP4_H2X8_SWIGLU, GEMV_NVFP4_SINGLE, GEMV_SILU_NVFP4,
                          GEMV_SILU_NVFP4_SINGLE)
from . import KernelCache, matmul_quant_mma
from .matmul import GEMV_MAX_M, GEMV_MAX_THREADS, GEMV_ROWS_PER_BLOCK
from .matmul_h2 import H2Out, launch_h2

#: values per 16-byte chunk of packed codes (one chunk per thread per row)
CHUNK_VALUES = 32

#: whether NVFP4 products of one row take the half-precision-FMA GEMV (`uses_h2`) unless
#: ATLAS_QUANT_NVFP4_H2 says otherwise. On by estimate, not yet timed (gemv_nvfp4.cu's
#: gemv_nvfp4_h2: ~2.75 issue slots a weight against the 3.9 a weight the SMs can issue at
#: copy bandwidth, in the bf16 GEMV's mould; the tensor-core route streamed 35-50% of copy
#: at gpu21); ATLAS_QUANT_NVFP4_H2=0 restores the tensor-core route, the lead's A/B decides.
H2_BY_DEFAULT = True

#: the half-precision-FMA GEMV's entry points by output: y bf16, f32 logits, SwiGLU act
_H2 = {"bf16": GEMV_NVFP4_H2, "f32": GEMV_NVFP4_H2_F32, "swiglu": GEMV_NVFP4_H2_SWIGLU}
#: ... in 8-row blocks
_H2X8 = {"bf16": GEMV_NVFP4_H2X8, "f32": GEMV_NVFP4_H2X8_F32, "swiglu": GEMV_NVFP4_H2X8_SWIGLU}
#: the half-precision-FMA GEMV's rows a block unless ATLAS_QUANT_H2_ROWS says otherwise: 8
#: (gpu100, Qwen3-8B NVFP4 batch 1 x 512, GPU ms a step, rows 8 / 4 / 8 / 4: 2.395 / 2.554 /
#: 2.386 / 2.555; with the LM head NVFP4 2.235 / 2.405)
H2_ROWS = 8


def uses_h2(kc: KernelCache, w: object, m: int) -> bool:
    """Whether an m-row product of w runs on gemv_nvfp4_h2_*: one row of an NVFP4 weight
    (its preconditions are the weight's own), then the route switch (ATLAS_QUANT_NVFP4_H2
    forces it on / off), else H2_BY_DEFAULT where the loaded set has the module (every
    target builds it; reference backends load none and keep the tensor-core route)."""
    if m != 1 or not isinstance(w, Nvfp4Weight):
        return False
    forced = kc.routes.quant_nvfp4_h2
    if forced is not None:
        return forced
    return H2_BY_DEFAULT and GEMV_NVFP4_H2.module in kc.backend.module_names


def gemv_h2(kc: KernelCache, stream: Stream, x: DevicePtr, w: "Nvfp4Weight", y: DevicePtr,
            out: H2Out = "bf16") -> None:
    """One row on gemv_nvfp4_h2_* (gemv_nvfp4_h2x8_* in 8-row blocks: `H2_ROWS`): y [1, n]
    bf16 (`out` 'bf16'), f32 logits ('f32'), or the SwiGLU activation [1, n / 2] of the
    fused [gate | up] weight ('swiglu', n even)."""
    rows = kc.routes.quant_h2_rows or H2_ROWS
    launch_h2(kc, stream, _H2X8 if rows == 8 else _H2, out, x, y, w.n, w.k, CHUNK_VALUES,
              (w.codes, w.scales, w.row_scales), rows=rows)


@dataclass(frozen=True, slots=True)
class Nvfp4Weight:
    """Device NVFP4 weight: packed codes, E4M3 group scales, float32 row scales."""

    codes: DevicePtr
    scales: DevicePtr
    row_scales: DevicePtr
    n: int
    k: int

    def __post_init__(self) -> None:
        if self.n < 1 or self.k < CHUNK_VALUES or self.k % CHUNK_VALUES:
            raise ValueError(f"NVFP4 weight [{self.n}, {self.k}]: k must be a positive "
                             f"multiple of {CHUNK_VALUES}")
        if self.codes % 16 or self.scales % 2 or self.row_scales % 4:
            raise ValueError(f"NVFP4 weight: codes {self.codes:#x} must be 16-byte, scales "
                             f"{self.scales:#x} 2-byte, row scales {self.row_scales:#x} "
                             "4-byte aligned")

    @property
    def nbytes(self) -> int:
        return self.n * self.k // 2 + self.n * self.k // 16 + 4 * self.n

    def gemv(self, kc: KernelCache, stream: Stream, x: DevicePtr, y: DevicePtr, m: int,
             silu: bool = False) -> None:
        """y[m, n] = x @ dequant(w).T (x = swiglu(gate_up) when `silu`), 1 <= m <= 8."""
        if not 1 <= m <= GEMV_MAX_M:
            raise ValueError(f"gemv_nvfp4: m={m} must be in 1..{GEMV_MAX_M}")
        sig = ((GEMV_SILU_NVFP4_SINGLE if m == 1 else GEMV_SILU_NVFP4) if silu
               else (GEMV_NVFP4_SINGLE if m == 1 else GEMV_NVFP4))
        threads = min(GEMV_MAX_THREADS, max(32, -(-(self.k // CHUNK_VALUES) // 32) * 32))
        kc.get(sig)(stream, -(-self.n // GEMV_ROWS_PER_BLOCK), threads, 0, x, self.codes,
                    self.scales, self.row_scales, y, m, self.n, self.k)

    def dequant(self, kc: KernelCache, stream: Stream, out: DevicePtr) -> None:
        """out[n, k] bf16 = bf16(e2m1 * f32(e4m3(scale) * row scale)), for the GEMM path."""
        chunks = self.n * (self.k // CHUNK_VALUES)
        kc.get(DEQUANT_NVFP4)(stream, -(-chunks // 256), 256, 0, self.codes, self.scales,
                              self.row_scales, out, self.n, self.k)

    def mma(self, kc: KernelCache, stream: Stream, x: DevicePtr, y: DevicePtr, m: int) -> None:
        """The tensor-core GEMV (matmul_quant_mma), 1 <= m <= 64."""
        matmul_quant_mma.gemv_mma(kc, stream, x, self, y, m)
