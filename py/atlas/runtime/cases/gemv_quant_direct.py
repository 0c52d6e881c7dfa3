"""Check cases for the register-fed quantized decode GEMV (gemv_quant_direct.cu): both
formats at every batch size 1..8, the three FP8 scale layouts, the Qwen3-8B projections and
other published widths (hidden 2,048 / 5,120 / 8,192), ragged N (a last block with rows past
n), K splitting unevenly over the 8 warps (a warp with no steps, step counts not a multiple
of the 4-step load batch) and the down projection (silu_mul, then this GEMV); and the gate_up
product ending with its SwiGLU (`_swiglu` entry points) at every batch size, ragged feature
counts (a last block with features past n / 2) and FP8 block rows shared by gate and up.
Tile counts past two per SM (Qwen3-8B's qkv and gate_up, the LOOPING_* shapes, the logits)
make the blocks of the persistent grid loop over several tiles, a ragged one last, with the
next tile's loads in flight during a tile's reduction (ops/matmul_quant_mma.direct_blocks)."""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ...core.quant import dequantize_fp8, dequantize_nvfp4
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import DEFAULT_TOL, KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul_quant
from ..ops.matmul_nvfp4 import Nvfp4Weight
from ..ops.matmul_quant import Fp8Weight
from .gemv import random_bf16, swiglu_oracle
from .gemv_fp8 import fp8_linear_case, random_fp8
from .gemv_mma_quant import tensor_core_cases
from .gemv_nvfp4 import nvfp4_linear_case, random_nvfp4
from .quant_linear import (H2_REF_REL_TOL, case_routes, quant_linear_case, spikes_tag,
                           with_spikes)

#: the SwiGLU of a product whose bf16 gate / up may round one ulp (2^-8 relative) away from
#: the exactly rounded sum's (tensor-core accumulation order): the output moves by at most
#: |silu'(g)| |u| d_g + |silu(g)| d_u <= 2.2 x 2^-8 |g| |u|; the case allows 2^-6 G^2 with G
#: the largest |gate_up| (far below what a wrong fragment, row or scale gives: O(G^2))
SWIGLU_REL_TOL = 2.0 ** -6


def swiglu_case(rng: np.random.Generator, fmt: str, m: int, inter: int, k: int,
                e2m1_lut: bool = False, staged: bool = False,
                tile_loop: bool | None = None, narrow: int | None = None,
                h2: bool = False, x_spikes: Mapping[int, float] | None = None,
                core: bool = False, rows: int = 4) -> KernelCase:
    """act = swiglu(x @ dequant(w).T) for a fused [gate | up] weight w [2 inter, k] through
    `matmul_quant.linear_swiglu_quant` (forced onto gemv_quant_direct; `e2m1_lut`: its NVFP4
    byte-table entry point; `staged`: its shared-memory-staged variant; `tile_loop`: forces
    the tile / pipelined loop, None the format's default; `narrow` 1 / 2: a narrow pipelined
    loop; `h2`, m = 1: the format's half-precision-FMA GEMV instead (gemv_nvfp4.cu /
    gemv_fp8.cu gemv_*_h2_swiglu_bf16); `core`, FP8, m = 1: the convert GEMV's twin
    (gemv_fp8_cvt_swiglu_bf16_single, routes.quant_fp8_core_swiglu; `rows` 8: its 8-row twin,
    routes.gemv_swiglu_rows); `x_spikes`:
    x columns set to large values, quant_linear.with_spikes), against float64:
    the product rounded to bf16, then silu_mul's rounding (swiglu_oracle)."""
    n = 2 * inter
    if fmt == "nvfp4":
        packed, s_codes, row = random_nvfp4(rng, n, k, parts=2)
        weights = {"w": packed, "s": s_codes, "g": row}

        def weight(p: dict[str, DevicePtr]) -> matmul_quant.QuantWeight:
            return Nvfp4Weight(p["w"], p["s"], p["g"], n, k)

        def dequant(v: dict[str, np.ndarray]) -> np.ndarray:
            return dequantize_nvfp4(v["w"], v["s"], v["g"])
    else:
        codes, scales, smap = random_fp8(rng, n, k, fmt)
        weights = {"w": codes, "s": scales.reshape(-1)}

        def weight(p: dict[str, DevicePtr]) -> matmul_quant.QuantWeight:
            return Fp8Weight(p["w"], p["s"], n, k, smap)

        def dequant(v: dict[str, np.ndarray]) -> np.ndarray:
            return dequantize_fp8(v["w"], v["s"].reshape(smap.shape), smap)

    inputs = {"x": with_spikes(random_bf16(rng, (m, k)), x_spikes), **weights}

    def product(v: dict[str, np.ndarray]) -> np.ndarray:
        return bf16_bits_to_f32(v["x"]).astype(np.float64) @ dequant(v).T

    nvfp4 = fmt == "nvfp4"
    routes = case_routes(True, e2m1_lut, staged, tile_loop, narrow, core and not nvfp4,
                         h2=h2 and nvfp4, fp8_h2=h2 and not nvfp4)
    routes = dataclasses.replace(routes, quant_fp8_core_swiglu=core and not nvfp4,
                                 gemv_rows=rows, gemv_swiglu_rows=rows)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        matmul_quant.linear_swiglu_quant(KernelCache(backend, routes), stream, p["x"],
                                         weight(p), p["act"], m)

    def oracle(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        gate_up = f32_to_bf16_bits(round_bf16(product(v).astype(np.float32)))
        return {"act": swiglu_oracle(gate_up)}

    gate_up = product(inputs)
    big = float(np.abs(gate_up).max())
    act = OutputSpec(DType.BF16, (m, inter))
    if h2:  # the f16 group sums (both formats): gate and up within 2^-8 of their RMS (as
        # quant_linear's H2_REF_REL_TOL), moving the act by up to 2.2 big times that (NVFP4
        # too: gpu97's per-factory inputs put an x = 3e5 spike's act 3.0 off float64, the
        # kernel equal to its host reference bit for bit)
        atol, rtol = DEFAULT_TOL[DType.BF16]
        rms = float(np.sqrt(np.mean(gate_up * gate_up)))
        act.tol = (max(atol, 2.2 * H2_REF_REL_TOL * big * rms), rtol)
    loop = f"_n{narrow}" if narrow else {None: "", True: "_tile", False: "_pipe"}[tile_loop]
    cvt = "gemv_fp8_cvt" + ("_x8" if rows == 8 else "")
    kind = ("gemv_nvfp4_h2" if nvfp4 else "gemv_fp8 h2") if h2 else cvt if core \
        else (f"gemv_qd{'_staged' if staged else ''}_"
              f"{'nvfp4' if nvfp4 else 'fp8'}{'_lut' if e2m1_lut else ''}{loop}")
    module = ("gemv_nvfp4" if nvfp4 else "gemv_fp8") if h2 or core else "gemv_quant_direct"
    return KernelCase(f"{kind}_swiglu {'' if nvfp4 else fmt + ' '}m{m} inter{inter} "
                      f"k{k}{spikes_tag(x_spikes)}", module,
                      inputs, {"act": act},
                      run, oracle, reference_abs_tol=SWIGLU_REL_TOL * big * big)

#: (layout, m, n, k)
FP8_DIRECT_SHAPES = [("block", 1, 6144, 4096), ("block", 1, 4096, 4096),
                     ("block", 1, 24576, 4096), ("block", 1, 4096, 12288),
                     ("block", 1, 2560, 2048), ("block", 2, 8192, 8192),
                     ("block", 3, 1001, 5120), ("channel", 4, 259, 2048),
                     ("tensor", 5, 33, 64), ("block", 6, 130, 1344),
                     ("channel", 7, 300, 448), ("block", 8, 515, 1536)]
#: (m, n, k, parts)
NVFP4_DIRECT_SHAPES = [(1, 6144, 4096, 3), (1, 4096, 4096, 1), (1, 12288, 4096, 2),
                       (1, 4096, 12288, 1), (1, 2560, 2048, 1), (2, 8192, 8192, 1),
                       (3, 1001, 5120, 3), (4, 259, 2048, 2), (5, 33, 128, 1),
                       (6, 130, 1408, 2), (7, 300, 384, 1), (8, 515, 1536, 3)]
#: more than two 16-row tiles per SM of an H200 (132 SMs), so each block loops over 2-3
#: tiles: a ragged last tile, K over the 8 warps in uneven step counts (some none), batch
#: rows up to 8; the SwiGLU ones in 8-feature tiles, likewise ((format, m, inter, k))
LOOPING_FP8_SHAPES = [("block", 8, 4300, 1088), ("channel", 1, 6000, 448)]
LOOPING_NVFP4_SHAPES = [(7, 4500, 640, 2), (2, 4230, 1152, 1)]
LOOPING_SWIGLU_SHAPES = [("nvfp4", 3, 2201, 640), ("block", 1, 4500, 1024)]


def nvfp4_every_scale_case(rng: np.random.Generator, m: int, n: int, k: int,
                           staged: bool = False, narrow: int | None = None,
                           h2: bool = False) -> KernelCase:
    """The NVFP4 decode at the ends of its range: group scale codes cycling through every
    non-NaN E4M3 code (zero, negative zero, subnormals, 448, negatives) under random codes,
    so the scaled bf16 pairs (group scale * 2^119, e2m1 * 2^-126 with 0.5 a subnormal) and
    their products meet their extremes; the row scale keeps outputs O(1)."""
    packed = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    s_codes = codes[rng.permutation(n * (k // 16)) % codes.size].reshape(n, k // 16)
    row = np.full(n, 1.0 / (448.0 * 6.0 * k ** 0.5), np.float32)
    kind = "gemv_nvfp4_h2" if h2 else (
        f"gemv_qd{'_staged' if staged else ''}_nvfp4{f'_n{narrow}' if narrow else ''}")
    return quant_linear_case(
        rng, f"{kind} every-scale m{m} n{n} k{k}",
        "gemv_nvfp4" if h2 else "gemv_quant_direct", m, n, k, False,
        {"w": packed, "s": s_codes, "g": row},
        lambda p: Nvfp4Weight(p["w"], p["s"], p["g"], n, k),
        lambda v: dequantize_nvfp4(v["w"], v["s"], v["g"]), mma=not h2, direct=not h2,
        staged=staged, narrow=narrow, h2=h2)


@kernel_cases("gemv_quant_direct")
def gemv_quant_direct_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = tensor_core_cases(rng, FP8_DIRECT_SHAPES + LOOPING_FP8_SHAPES,
                              NVFP4_DIRECT_SHAPES + LOOPING_NVFP4_SHAPES, 4, direct=True)
    # f32 logits (a quantized LM head): a vocabulary-like n at batch 1, ragged rows, m = 8
    cases += [fp8_linear_case(rng, "block", 1, 20000, 1024, direct=True, logits=True),
              nvfp4_linear_case(rng, 1, 20000, 1024, direct=True, logits=True),
              fp8_linear_case(rng, "block", 8, 1001, 2048, direct=True, logits=True),
              nvfp4_linear_case(rng, 5, 300, 1408, parts=2, direct=True, logits=True)]
    cases += [nvfp4_every_scale_case(rng, 1, 4096, 4096), nvfp4_every_scale_case(rng, 6, 130, 1408)]
    # the byte-table decode's entry points (ATLAS_QUANT_E2M1_LUT=1, the A/B of the bit moves)
    cases += [nvfp4_linear_case(rng, m, n, k, parts=parts, direct=True, e2m1_lut=True)
              for m, n, k, parts in ((1, 4096, 4096, 1), (3, 1001, 5120, 3), (8, 515, 1536, 2))]
    cases += [nvfp4_linear_case(rng, 2, 300, 1408, parts=2, direct=True, logits=True,
                                e2m1_lut=True),
              swiglu_case(rng, "nvfp4", 1, 4096, 4096, e2m1_lut=True),
              swiglu_case(rng, "nvfp4", 5, 203, 1408, e2m1_lut=True)]
    # gate_up + SwiGLU: Qwen3-8B (FP8 inter 12,288), every batch size, ragged features (past the
    # last 8-feature block), 128-row FP8 blocks straddling the gate / up boundary (inter 200)
    cases += [swiglu_case(rng, fmt, m, inter, k) for fmt, m, inter, k in (
        ("block", 1, 12288, 4096), ("nvfp4", 1, 4096, 4096), ("block", 3, 200, 1024),
        ("channel", 8, 77, 448), ("tensor", 2, 64, 64), ("nvfp4", 5, 203, 1408),
        ("nvfp4", 8, 96, 128), ("block", 6, 1000, 2048), *LOOPING_SWIGLU_SHAPES)]
    return cases + other_loop_cases(rng) + staged_cases(rng) + narrow_cases(rng)


def other_loop_cases(rng: np.random.Generator) -> list[KernelCase]:
    """Each format on the loop it does not default to (ATLAS_QUANT_TILE_LOOP): FP8 pipelined
    (`gemv_qd_fp8_pipe_*`), NVFP4 one block per tile (`gemv_qd_nvfp4_tile_*`), at Qwen3-8B's
    qkv / down, ragged rows and K over the warps in uneven step counts, f32 logits, SwiGLU."""
    def fp8(m: int, n: int, k: int, layout: str = "block", logits: bool = False) -> KernelCase:
        return fp8_linear_case(rng, layout, m, n, k, direct=True, logits=logits,
                               tile_loop=False)

    def nvfp4(m: int, n: int, k: int, logits: bool = False) -> KernelCase:
        return nvfp4_linear_case(rng, m, n, k, parts=2, direct=True, logits=logits,
                                 tile_loop=True)

    return [fp8(1, 6144, 4096), fp8(1, 4096, 12288), fp8(3, 1001, 5120), fp8(8, 515, 1536),
            fp8(4, 259, 2048, "channel"), fp8(1, 20000, 1024, logits=True),
            nvfp4(1, 6144, 4096), nvfp4(1, 4096, 12288), nvfp4(3, 1001, 5120),
            nvfp4(8, 515, 1536), nvfp4(5, 33, 128), nvfp4(1, 20000, 1024, logits=True),
            swiglu_case(rng, "block", 1, 12288, 4096, tile_loop=False),
            swiglu_case(rng, "nvfp4", 1, 12288, 4096, tile_loop=True),
            swiglu_case(rng, "nvfp4", 5, 203, 1408, tile_loop=True)]


#: the staged variant's shapes: Qwen3-8B's projections (qkv 384 tiles: the 132 blocks loop
#: over 2-3; o; down with 6 NVFP4 / 12 FP8 units a tile), a K whose last unit is partial
#: (NVFP4 k 1,280 = 10 steps: warps 10..15 idle; FP8 k 1,088 = 17 steps), ragged n, several
#: tiles a block with batch rows up to 8; ((format, m, n, k))
STAGED_SHAPES = [("block", 1, 6144, 4096), ("nvfp4", 1, 6144, 4096), ("block", 1, 4096, 4096),
                 ("nvfp4", 1, 4096, 12288), ("block", 1, 4096, 12288), ("nvfp4", 3, 1001, 1280),
                 ("block", 8, 4300, 1088), ("channel", 2, 259, 2048), ("tensor", 5, 33, 64),
                 ("nvfp4", 8, 4500, 768), ("nvfp4", 2, 70, 256)]
#: f32 logits of a vocabulary-like n (20,000 rows: 1,250 tiles, ~10 a block) and a ragged one
STAGED_LOGITS_SHAPES = [("block", 1, 20000, 1024), ("nvfp4", 1, 20000, 1024),
                        ("nvfp4", 5, 300, 1536)]
#: gate_up + SwiGLU ((format, m, inter, k)): Qwen3-8B's, ragged features, FP8 blocks of 128
#: rows straddling the gate / up boundary (inter 200)
STAGED_SWIGLU_SHAPES = [("block", 1, 12288, 4096), ("nvfp4", 1, 12288, 4096),
                        ("nvfp4", 5, 203, 1536), ("block", 3, 200, 1024), ("channel", 8, 77, 448)]


def staged_cases(rng: np.random.Generator) -> list[KernelCase]:
    """The shared-memory-staged variant (gemv_qs_*): the linear shapes above, f32 logits of a
    vocabulary-like n (72+ tiles a block), gate_up + SwiGLU, and NVFP4's extreme scales."""
    cases = [nvfp4_linear_case(rng, m, n, k, parts=2, logits=logits, staged=True)
             if fmt == "nvfp4" else fp8_linear_case(rng, fmt, m, n, k, logits=logits, staged=True)
             for shapes, logits in ((STAGED_SHAPES, False), (STAGED_LOGITS_SHAPES, True))
             for fmt, m, n, k in shapes]
    cases += [swiglu_case(rng, fmt, m, inter, k, staged=True)
              for fmt, m, inter, k in STAGED_SWIGLU_SHAPES]
    return cases + [nvfp4_every_scale_case(rng, 1, 4096, 4096, staged=True)]



#: the narrow loops' shapes (ATLAS_QUANT_NARROW=1 / 2): Qwen3-8B's qkv / o / down (a warp's
#: 4 / 12 steps: several batches a tile), ragged rows, K over the warps in uneven step counts
#: (odd counts: a partial last batch on n2), batch rows up to 8; ((format, m, n, k)), NVFP4
#: weights in 1-3 parts (row-scale segments)
NARROW_SHAPES = [("nvfp4", 1, 6144, 4096), ("nvfp4", 1, 4096, 4096), ("nvfp4", 1, 4096, 12288),
                 ("nvfp4", 3, 1001, 5120), ("nvfp4", 8, 515, 1536), ("nvfp4", 5, 33, 128),
                 ("block", 1, 6144, 4096), ("block", 1, 4096, 12288), ("block", 3, 1001, 5120),
                 ("channel", 4, 259, 2048), ("tensor", 8, 33, 64), ("block", 6, 130, 1344)]
#: f32 logits: a vocabulary-like n (1,250 tiles) at batch 1, a ragged one at 5 rows
NARROW_LOGITS_SHAPES = [("nvfp4", 1, 20000, 1024), ("block", 5, 1001, 2048)]
#: gate_up + SwiGLU ((format, m, inter, k)): Qwen3-8B's, ragged features, FP8 blocks of 128
#: rows straddling the gate / up boundary (inter 200)
NARROW_SWIGLU_SHAPES = [("nvfp4", 1, 12288, 4096), ("block", 1, 12288, 4096),
                        ("nvfp4", 5, 203, 1408), ("block", 3, 200, 1024)]


def narrow_cases(rng: np.random.Generator) -> list[KernelCase]:
    """Both formats on the narrow pipelined loops (one / two steps a load batch, four / three
    blocks an SM): the NARROW_* shapes and NVFP4's extreme scales, each loop."""
    cases: list[KernelCase] = []
    for narrow in (1, 2):
        cases += [nvfp4_linear_case(rng, m, n, k, parts=1 + n % 3, direct=True, logits=logits,
                                    narrow=narrow)
                  if fmt == "nvfp4" else
                  fp8_linear_case(rng, fmt, m, n, k, direct=True, logits=logits, narrow=narrow)
                  for shapes, logits in ((NARROW_SHAPES, False), (NARROW_LOGITS_SHAPES, True))
                  for fmt, m, n, k in shapes]
        cases += [swiglu_case(rng, fmt, m, inter, k, narrow=narrow)
                  for fmt, m, inter, k in NARROW_SWIGLU_SHAPES]
        cases.append(nvfp4_every_scale_case(rng, 1, 4096, 4096, narrow=narrow))
    return cases


#: the batch-1 half-precision-FMA GEMV's shapes ((n, k, parts)): Qwen3-8B's qkv (3 row-scale
#: parts), o and down (k 12,288: 192 threads, two chunks each), ragged n (a last block with
#: rows past n), a K whose chunks leave a thread's second chunk (and some threads) idle
#: (k 1,056 = 33 chunks), the smallest K (one chunk), one chunk pair a thread exactly (k
#: 16,384: 256 threads) and a second pass of the loop over part of the threads (k 20,512)
H2_SHAPES = [(6144, 4096, 3), (4096, 4096, 1), (4096, 12288, 1), (1001, 1056, 2),
             (130, 32, 1), (259, 2048, 2), (33, 16384, 1), (40, 20512, 1)]


#: the half-precision-FMA GEMV's range guard (gemv_nvfp4.cu): x columns -> values. Under 2^16
#: (5,000, 60,000 and bf16's largest below, 65,280) the guard stays off (exponent 0: lane
#: sums up to 0.75 x 65,280 in f16, the unguarded bits); from 2^16 on it scales x. At k
#: 20,512 (256 threads, chunk c on thread c % 256, 641 chunks) thread 5 meets 10^5 in its
#: first chunk (exponent 1), -7e4 in its second (kept) and 3e9 in its third, the loop's
#: second pass (rise to 17, its sums rescaled); thread 9 starts at -2.5e6 and carries its
#: exponent into an ordinary chunk; the logits meet exactly 2^16; bf16's largest finite
#: (3.39e38 rounds to it) the top exponent.
H2_SPIKES_OFF = {100: 5000.0, 1234: -60000.0, 3000: 65280.0, 3001: -5000.0}
H2_SPIKES_LOOP = {32 * 5 + 3: 1e5, 32 * 261 + 10: -7e4, 32 * 517 + 31: 3e9, 32 * 9: -2.5e6,
                  4000: 60000.0}
H2_SPIKES_LOGITS = {7: 2e5, 2048: -1e7, 4095: 65536.0}
H2_SPIKES_SWIGLU = {0: 1e5, 700: -3e5, 1407: 5000.0}
H2_SPIKES_EXTREME = {500: 3.38e38, 501: -1e30, 1000: 65000.0}


@kernel_cases("gemv_nvfp4")
def gemv_nvfp4_h2_cases(rng: np.random.Generator) -> list[KernelCase]:
    """gemv_nvfp4_h2_*: the shapes above, f32 logits (a vocabulary-like n and a ragged one),
    the extreme group scales (every E4M3 code), gate_up + SwiGLU (Qwen3-8B's, ragged
    features, an odd feature count: a block's second feature past the end), and x with
    massive activations (H2_SPIKES_*: the range guard off and on, each entry point)."""
    cases = [nvfp4_linear_case(rng, 1, n, k, parts=parts, h2=True) for n, k, parts in H2_SHAPES]
    cases += [nvfp4_linear_case(rng, 1, 20000, 1024, logits=True, h2=True),
              nvfp4_linear_case(rng, 1, 301, 4096, parts=2, logits=True, h2=True),
              nvfp4_every_scale_case(rng, 1, 4096, 4096, h2=True),
              nvfp4_every_scale_case(rng, 1, 130, 1408, h2=True)]
    cases += [swiglu_case(rng, "nvfp4", 1, inter, k, h2=True)
              for inter, k in ((12288, 4096), (203, 1408), (77, 4096), (1, 64))]
    return cases + [
        nvfp4_linear_case(rng, 1, 4096, 4096, h2=True, x_spikes=H2_SPIKES_OFF),
        nvfp4_linear_case(rng, 1, 259, 20512, parts=2, h2=True, x_spikes=H2_SPIKES_LOOP),
        nvfp4_linear_case(rng, 1, 301, 4096, logits=True, h2=True, x_spikes=H2_SPIKES_LOGITS),
        nvfp4_linear_case(rng, 1, 130, 1408, h2=True, x_spikes=H2_SPIKES_EXTREME),
        swiglu_case(rng, "nvfp4", 1, 203, 1408, h2=True, x_spikes=H2_SPIKES_SWIGLU)]


#: the FP8 half-precision-FMA GEMV's shapes ((layout, n, k)): Qwen3-8B's qkv, o and down (k
#: 12,288: 256 threads, a second pass over K on half of them), ragged odd n with a K ending
#: inside a 128-column block (k 1,040 = 65 chunks: a thread's second chunk, and some threads,
#: idle), K not a multiple of the block's stride (k 20,496 = 1,281 chunks over 256 threads
#: two at a time: a third pass on one thread), the smallest K (one chunk), the other layouts
FP8_H2_SHAPES = [("block", 6144, 4096), ("block", 4096, 4096), ("block", 4096, 12288),
                 ("block", 1001, 1040), ("block", 259, 20496), ("block", 67, 16),
                 ("channel", 515, 3072), ("tensor", 130, 2048)]

#: the FP8 kernel's range guard (gemv_fp8.cu Fp8H2: from |x| >= 16 on): x columns -> values.
#: Below 16 (15.94, bf16's largest) the guard stays off; 16 exactly raises it; 200-300 (past
#: where a single f16 product of 448 overflows, ~146). At k 20,496 (256 threads, chunk c of
#: 16 values on thread c % 256) thread 5 meets 10^5 in its first chunk, -7e4 in its second
#: (kept) and 3e9 in its third (the loop's second pass: its sums rescaled); thread 9 starts
#: at -2.5e6 and carries its exponent into ordinary chunks; bf16's largest finite (3.39e38)
#: the top exponent.
FP8_H2_SPIKES_OFF = {100: 15.9375, 1234: -15.0, 3000: 12.5, 3001: -7.0}
FP8_H2_SPIKES_MID = {5: 200.0, 2000: -300.0, 4095: 16.0, 1000: 150.0}
FP8_H2_SPIKES_LOOP = {16 * 5 + 3: 1e5, 16 * 261 + 10: -7e4, 16 * 517 + 15: 3e9, 16 * 9: -2.5e6,
                      4000: 250.0}
FP8_H2_SPIKES_LOGITS = {7: 2e5, 2048: -1e7, 4095: 65536.0}
FP8_H2_SPIKES_SWIGLU = {0: 1e5, 700: -3e5, 1407: 500.0}
FP8_H2_SPIKES_EXTREME = {500: 3.38e38, 501: -1e30, 1000: 65000.0}
#: tiny x: every third column of the first 2,048 at 2^-16 .. 2^-26 (f16 subnormals from
#: 2^-14 down: the conversion and the products round to multiples of 2^-24), signs mixed
FP8_H2_TINY = {i: (-1.0) ** i * 2.0 ** -(16 + i % 11) for i in range(0, 2048, 3)}


@kernel_cases("gemv_fp8")
def gemv_fp8_h2_cases(rng: np.random.Generator) -> list[KernelCase]:
    """gemv_fp8_h2_*: the shapes above, f32 logits (a vocabulary-like n and a ragged one),
    gate_up + SwiGLU (Qwen3-8B's, an odd feature count: a block's second feature past the
    end, 128-row blocks straddling gate and up, each layout), x with massive activations
    (FP8_H2_SPIKES_*: the range guard off and on, each entry point) and tiny x."""
    cases = [fp8_linear_case(rng, layout, 1, n, k, h2=True) for layout, n, k in FP8_H2_SHAPES]
    cases += [fp8_linear_case(rng, "block", 1, 20000, 1024, logits=True, h2=True),
              fp8_linear_case(rng, "channel", 1, 301, 4096, logits=True, h2=True)]
    cases += [swiglu_case(rng, layout, 1, inter, k, h2=True)
              for layout, inter, k in (("block", 12288, 4096), ("block", 203, 1408),
                                       ("block", 200, 1024), ("channel", 77, 4096),
                                       ("tensor", 1, 64))]
    return cases + [
        fp8_linear_case(rng, "block", 1, 4096, 4096, h2=True, x_spikes=FP8_H2_SPIKES_OFF),
        fp8_linear_case(rng, "block", 1, 1001, 4096, h2=True, x_spikes=FP8_H2_SPIKES_MID),
        fp8_linear_case(rng, "block", 1, 259, 20496, h2=True, x_spikes=FP8_H2_SPIKES_LOOP),
        fp8_linear_case(rng, "channel", 1, 301, 4096, logits=True, h2=True,
                        x_spikes=FP8_H2_SPIKES_LOGITS),
        fp8_linear_case(rng, "block", 1, 130, 1408, h2=True, x_spikes=FP8_H2_SPIKES_EXTREME),
        fp8_linear_case(rng, "block", 1, 259, 4096, h2=True, x_spikes=FP8_H2_TINY),
        swiglu_case(rng, "block", 1, 203, 1408, h2=True, x_spikes=FP8_H2_SPIKES_SWIGLU)]


#: the convert GEMV's SwiGLU twin ((layout, inter, k)): Qwen3-8B's gate_up, an odd feature
#: count (a block's second feature past the end) with a K ending inside a 128-column block,
#: 128-row scale blocks straddling gate and up (inter 200), one 32-thread block (k 512),
#: k 12,288 (256 threads, a second pass over K), the other layouts
FP8_CORE_SWIGLU_SHAPES = [("block", 12288, 4096), ("block", 203, 1040), ("block", 200, 1024),
                          ("block", 64, 512), ("block", 100, 12288), ("channel", 77, 4096),
                          ("tensor", 1, 64)]


@kernel_cases("gemv_fp8")
def gemv_fp8_cvt_swiglu_cases(rng: np.random.Generator) -> list[KernelCase]:
    """gemv_fp8_cvt_swiglu_bf16_single over FP8_CORE_SWIGLU_SHAPES."""
    return ([swiglu_case(rng, layout, 1, inter, k, core=True)
             for layout, inter, k in FP8_CORE_SWIGLU_SHAPES]
            # ... in 8-row blocks (ATLAS_GEMV_ROWS=8): Qwen3-8B's, scale blocks straddling
            # gate and up, a second pass over K, an inter that leaves the last block short
            + [swiglu_case(rng, "block", 1, inter, k, core=True, rows=8)
               for inter, k in ((12288, 4096), (200, 1024), (100, 12288), (203, 1040))])
