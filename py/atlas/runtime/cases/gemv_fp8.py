"""Check cases for the FP8-weight GEMV: the three scale layouts (128x128 blocks, per channel,
per tensor), every M from 1 to 8, ragged N and partial scale blocks, the fused SwiGLU down
projection, the dequantize kernel and the GEMM fallback for more rows."""

from __future__ import annotations

import numpy as np

from typing import Mapping

from ...core.dtype import DType
from ...core.quant import Fp8ScaleMap, dequantize_fp8
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul_quant
from ..ops.matmul_quant import Fp8Weight
from .quant_linear import quant_linear_case, spikes_tag


def random_fp8(rng: np.random.Generator, n: int, k: int, layout: str
               ) -> tuple[np.ndarray, np.ndarray, Fp8ScaleMap]:
    """Uniformly random E4M3 codes (every finite code, subnormals and both zeros included;
    NaN codes 0x7F / 0xFF become 0x7E / 0xFE) and positive scales that keep outputs O(1):
    (codes uint8 [n, k], scales float32, map)."""
    smap = {"block": lambda: Fp8ScaleMap.block(n, k), "channel": lambda: Fp8ScaleMap.channel(n),
            "tensor": Fp8ScaleMap.tensor}[layout]()
    codes = rng.integers(0, 256, (n, k), dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] ^= 1
    scales = (rng.uniform(0.5, 2.0, smap.shape or (1,)) / (150.0 * k ** 0.5)).astype(np.float32)
    return codes, scales.reshape(smap.shape), smap


def fp8_linear_case(rng: np.random.Generator, layout: str, m: int, n: int, k: int,
                    silu: bool = False, mma: bool = False, direct: bool = False,
                    logits: bool = False, staged: bool = False,
                    tile_loop: bool | None = None, narrow: int | None = None,
                    core: bool = False, h2: bool = False,
                    x_spikes: Mapping[int, float] | None = None, rows: int = 4) -> KernelCase:
    """`core` (m = 1): the CUDA-core GEMV decoding by the hardware convert
    (gemv_fp8_cvt_bf16_single, routes.quant_fp8_core); `h2` (m = 1): the half-precision-FMA
    GEMV (gemv_fp8_h2_*, routes.quant_fp8_h2; `x_spikes`: x columns set to large or tiny
    values, quant_linear.with_spikes); `mma`: the tensor-core GEMV (module
    gemv_mma_quant; `direct`: its register-fed kernel, module gemv_quant_direct, `staged` its
    shared-memory-staged variant, `tile_loop` False its pipelined loop, `narrow` 1 / 2 its
    narrow pipelined loops), else the CUDA-core route; `logits`: f32 outputs; `rows` 8 (with
    `core`): the convert GEMV's 8-row twin (routes.gemv_rows)."""
    codes, scales, smap = random_fp8(rng, n, k, layout)
    loop = f"_n{narrow}" if narrow else "_pipe" if tile_loop is False else ""
    kind, module = ((f"gemv_qd{'_staged' if staged else ''}_fp8{loop}", "gemv_quant_direct")
                    if direct or staged else
                    ("gemv_mma_fp8", "gemv_mma_quant") if mma else
                    (f"gemv_fp8_cvt{'_x8' if rows == 8 else ''}", "gemv_fp8") if core else
                    ("gemv_fp8 h2", "gemv_fp8") if h2 else ("gemv_fp8", "gemv_fp8"))
    tag = "_silu" if silu else "_f32" if logits else ""
    return quant_linear_case(
        rng, f"{kind}{tag} {layout} m{m} n{n} k{k}{spikes_tag(x_spikes)}", module, m, n, k, silu,
        {"w": codes, "s": scales.reshape(-1)}, lambda p: Fp8Weight(p["w"], p["s"], n, k, smap),
        lambda v: dequantize_fp8(v["w"], v["s"].reshape(smap.shape), smap),
        mma or direct or staged, direct or staged, logits, staged=staged, tile_loop=tile_loop,
        narrow=narrow, fp8_core=core, fp8_h2=h2, x_spikes=x_spikes, rows=rows)


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


#: (layout, n, k) of the batch-1 convert GEMV's cases: Qwen3-8B's qkv, o_proj and down (k =
#: 12288: 256 threads, a second pass over K with half of them idle), ragged N with a K
#: ending inside a 128-column block, one 32-thread block (k = 512), the other layouts
FP8_CORE_SHAPES = [("block", 6144, 4096), ("block", 4096, 4096), ("block", 4096, 12288),
                   ("block", 1001, 1040), ("block", 67, 512), ("channel", 515, 3072),
                   ("tensor", 130, 2048)]

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
              fp8_linear_case(rng, "block", 12, 256, 1024),  # two GEMV passes
              fp8_linear_case(rng, "block", 16, 384, 1024, silu=True),
              fp8_linear_case(rng, "block", 40, 256, 1024),  # dequantize + GEMM
              fp8_linear_case(rng, "channel", 48, 384, 1024, silu=True),
              dequant_case(rng, 300, 1040)]
    cases += [fp8_linear_case(rng, layout, 1, n, k, core=True)
              for layout, n, k in FP8_CORE_SHAPES]
    # its f32 twin (a quantized LM head's logits): vocabulary-like ragged N, the 8B's K, and
    # the per-channel layout
    # ... in 8-row blocks (ATLAS_GEMV_ROWS=8)
    cases += [fp8_linear_case(rng, layout, 1, n, k, core=True, rows=8)
              for layout, n, k in (("block", 6144, 4096), ("block", 4096, 12288),
                                   ("block", 1001, 1040), ("channel", 515, 3072))]
    cases += [fp8_linear_case(rng, "block", 1, 9001, 4096, core=True, logits=True),
              fp8_linear_case(rng, "channel", 1, 515, 1024, core=True, logits=True)]
    return cases
