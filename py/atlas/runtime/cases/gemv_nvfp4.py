"""Check cases for the NVFP4-weight GEMV: every E2M1 code and E4M3 group-scale code range
(subnormal scales included), every M from 1 to 8, ragged N, K whose chunks do not fill the
threads, per-row global scales (fused parts), the fused SwiGLU down projection, the
dequantize kernel and the dequantize + GEMM path for more rows."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ...core.dtype import DType
from ...core.quant import NVFP4_GROUP, dequantize_nvfp4
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache
from ..ops.matmul_nvfp4 import Nvfp4Weight
from .quant_linear import quant_linear_case, spikes_tag


def random_nvfp4(rng: np.random.Generator, n: int, k: int, parts: int = 1
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(packed uint8 [n, k/2] of uniformly random nibbles, E4M3 scale codes [n, k/16] from
    subnormal 2^-9 up to 2^3 (never NaN), float32 row scales: `parts` distinct values over
    consecutive row ranges, sized so outputs stay O(1))."""
    packed = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    sign = rng.integers(0, 2, (n, k // NVFP4_GROUP), dtype=np.uint8) << 7
    s_codes = (rng.integers(1, 0x58, (n, k // NVFP4_GROUP), dtype=np.uint8) | sign)
    s_codes = s_codes.astype(np.uint8)
    bounds = np.linspace(0, n, parts + 1).astype(int)
    row = np.empty(n, np.float32)
    for i in range(parts):
        row[bounds[i]:bounds[i + 1]] = rng.uniform(0.5, 2.0) / (40.0 * k ** 0.5)
    return packed, s_codes, row


def nvfp4_linear_case(rng: np.random.Generator, m: int, n: int, k: int, silu: bool = False,
                      parts: int = 1, mma: bool = False, direct: bool = False,
                      logits: bool = False, e2m1_lut: bool = False,
                      staged: bool = False, tile_loop: bool | None = None,
                      narrow: int | None = None, h2: bool = False,
                      x_spikes: Mapping[int, float] | None = None) -> KernelCase:
    """`mma`: the tensor-core GEMV (module gemv_mma_quant; `direct`: its register-fed
    kernel, module gemv_quant_direct, `e2m1_lut` on its byte-table decode, `staged` its
    shared-memory-staged variant, `tile_loop` True its one-block-per-tile loop, `narrow` 1 / 2
    its narrow pipelined loops), else the CUDA-core route (`h2`, m = 1: its half-precision-FMA
    GEMV, gemv_nvfp4_h2_*; else the f32 one); `logits`: f32 outputs; `x_spikes`: x columns
    set to large values (quant_linear.with_spikes; named by the largest)."""
    packed, s_codes, row = random_nvfp4(rng, n, k, parts)
    variant = ("_lut" if e2m1_lut else f"_n{narrow}" if narrow else "_tile" if tile_loop
               else "")
    direct_kind = "gemv_qd_staged_nvfp4" if staged else f"gemv_qd_nvfp4{variant}"
    kind, module = ((direct_kind, "gemv_quant_direct") if direct or staged else
                    ("gemv_mma_nvfp4", "gemv_mma_quant") if mma else
                    ("gemv_nvfp4_h2" if h2 else "gemv_nvfp4", "gemv_nvfp4"))
    tag = "_silu" if silu else "_f32" if logits else ""
    return quant_linear_case(
        rng, f"{kind}{tag} m{m} n{n} k{k} parts{parts}{spikes_tag(x_spikes)}", module, m, n, k,
        silu, {"w": packed, "s": s_codes, "g": row},
        lambda p: Nvfp4Weight(p["w"], p["s"], p["g"], n, k),
        lambda v: dequantize_nvfp4(v["w"], v["s"], v["g"]), mma or direct or staged,
        direct or staged, logits, e2m1_lut, staged, tile_loop, narrow, h2=h2,
        x_spikes=x_spikes)


def dequant_nvfp4_case(rng: np.random.Generator, n: int, k: int) -> KernelCase:
    packed, s_codes, row = random_nvfp4(rng, n, k, parts=3)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        Nvfp4Weight(p["w"], p["s"], p["g"], n, k).dequant(KernelCache(backend), stream,
                                                          p["out"])

    def oracle(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"out": dequantize_nvfp4(v["w"], v["s"], v["g"])}

    return KernelCase(f"dequant_nvfp4 n{n} k{k}", "gemv_nvfp4",
                      {"w": packed, "s": s_codes, "g": row},
                      {"out": OutputSpec(DType.BF16, (n, k))}, run, oracle)


#: (m, n, k, parts): Qwen3-8B widths (q|k|v fused: 3 parts; gate|up: 2), ragged N, a K of 33
#: chunks (threads partly idle), small K, every M
NVFP4_SHAPES = [(1, 4096, 4096, 1), (1, 6144, 4096, 3), (2, 12288, 4096, 2), (3, 1001, 1056, 1),
                (4, 259, 2048, 2), (5, 130, 4096, 1), (6, 64, 32, 1), (7, 33, 3072, 1),
                (8, 515, 512, 3)]


@kernel_cases("gemv_nvfp4")
def gemv_nvfp4_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = [nvfp4_linear_case(rng, m, n, k, parts=parts) for m, n, k, parts in NVFP4_SHAPES]
    cases += [nvfp4_linear_case(rng, 1, 4096, 12288, silu=True),
              nvfp4_linear_case(rng, 8, 257, 2048, silu=True),
              nvfp4_linear_case(rng, 12, 256, 1024),  # GEMV passes
              nvfp4_linear_case(rng, 61, 384, 1024, silu=True, parts=2),
              nvfp4_linear_case(rng, 72, 256, 1024),  # dequantize + GEMM
              nvfp4_linear_case(rng, 80, 384, 1024, silu=True),
              dequant_nvfp4_case(rng, 300, 1056)]
    return cases

