"""Check cases for the decode GEMV: ragged N, every interesting M, short and long K; and the
down projection with SwiGLU fused in (gemv_silu), which also runs its unfused twin (silu_mul,
then gemv) into `<output>_unfused` so a device run can assert the two agree bit for bit."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Callable

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, activation, matmul
from ..ops.routes import KernelRoutes

#: suffix of an output written by the unfused path of a fused kernel's case: the device
#: check requires it to equal the fused output bit for bit
UNFUSED = "_unfused"

#: launch(kc, stream, x, w, y, m, n, k, out_f32)
Launcher = Callable[[KernelCache, Stream, DevicePtr, DevicePtr, DevicePtr, int, int, int, bool],
                    None]


def gemv_cache(backend: GpuBackend, ring: bool, stages: int | None = None) -> KernelCache:
    """A kernel cache whose m-row GEMVs take the ring kernel (`ring`, one row too, with
    `stages` tiles a thread; None: the plan's rule) or the register-tiled gemv_bf16 whatever
    ATLAS_GEMV_RING says: each path's cases check it under every setting."""
    return KernelCache(backend, routes=replace(KernelRoutes.from_env(), gemv_ring=ring,
                                               gemv_ring_single=ring, gemv_ring_stages=stages))


def ring_gemv(stages: int | None, kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr,
              y: DevicePtr, m: int, n: int, k: int, out_f32: bool) -> None:
    """`matmul.gemv` on the ring kernel with `stages` (a `Launcher` once bound)."""
    matmul.gemv(gemv_cache(kc.backend, True, stages), stream, x, w, y, m, n, k, out_f32,
                single=False)


def x8_gemv(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr, m: int,
            n: int, k: int, out_f32: bool) -> None:
    """`matmul.gemv` of one row in 8-row blocks (routes.gemv_rows 8: gemv_bf16_x8_single)."""
    kc8 = KernelCache(kc.backend, routes=replace(KernelRoutes.from_env(), gemv_rows=8,
                                                 gemv_ring_single=False))
    matmul.gemv(kc8, stream, x, w, y, m, n, k, out_f32)


def lean_gemv(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr,
              m: int, n: int, k: int, out_f32: bool) -> None:
    """`matmul.gemv` of one row on the 48-register twin (routes.gemv_lean: gemv_bf16_lean_single),
    whatever the launch's waves."""
    lean = KernelCache(kc.backend, routes=replace(KernelRoutes.from_env(), gemv_lean=True,
                                                  gemv_ring_single=False))
    matmul.gemv(lean, stream, x, w, y, m, n, k, out_f32)


def tiled_gemv(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr,
               m: int, n: int, k: int, out_f32: bool) -> None:
    """`matmul.gemv` with 2..8 rows on the register-tiled kernel (a `Launcher`)."""
    matmul.gemv(gemv_cache(kc.backend, False), stream, x, w, y, m, n, k, out_f32)


def random_bf16(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0
                ) -> np.ndarray:
    """Uniform(-scale, scale) values rounded to bf16 (uint16 bits); never all zeros."""
    return f32_to_bf16_bits(rng.uniform(-scale, scale, shape).astype(np.float32))


def linear_oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float64 x @ w.T from the bf16 inputs."""
    x = bf16_bits_to_f32(inputs["x"]).astype(np.float64)
    w = bf16_bits_to_f32(inputs["w"]).astype(np.float64)
    return {"y": x @ w.T}


#: per unit of K, the absolute error a tensor-core kernel may add over the exactly rounded
#: sum of O(1) outputs. Measured on the H200 (2026-11-30): gemm_sm90 at k = 12,288 put one
#: element of 4,608 4 bf16 ulps (3.9e-3) from it, 3.5e-3 from float64, the size of the
#: GEMV's own bf16 rounding error there; the tensor cores' f32 accumulation is not the
#: CUDA cores' round-to-nearest-even FMA chain.
TENSOR_CORE_K_TOL = 2.0 ** -22


def linear_case(rng: np.random.Generator, name: str, module: str, m: int, n: int, k: int,
                out_f32: bool, launch: Launcher, tensor_core: bool = False) -> KernelCase:
    """A y = x @ w.T case; w is scaled by 1/sqrt(k) so outputs stay O(1) for every k.
    `tensor_core` cases may differ from the host reference by TENSOR_CORE_K_TOL * k more."""
    inputs = {"x": random_bf16(rng, (m, k)), "w": random_bf16(rng, (n, k), k ** -0.5)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        launch(KernelCache(backend), stream, p["x"], p["w"], p["y"], m, n, k, out_f32)

    out = OutputSpec(DType.FP32 if out_f32 else DType.BF16, (m, n), bf16_valued=out_f32)
    return KernelCase(name, module, inputs, {"y": out}, run, linear_oracle,
                      reference_abs_tol=TENSOR_CORE_K_TOL * k if tensor_core else 0.0)


def unrounded_case(rng: np.random.Generator, module: str, m: int, n: int, k: int) -> KernelCase:
    """`matmul.linear_f32_unrounded`'s float32 sums (a float32 router's logits), compared at
    float32 precision: the f32 accumulation order may differ from the reference's by
    TENSOR_CORE_K_TOL * k, as a tensor-core GEMM's."""
    inputs = {"x": random_bf16(rng, (m, k)), "w": random_bf16(rng, (n, k), k ** -0.5)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        matmul.linear_f32_unrounded(KernelCache(backend), stream, p["x"], p["w"], p["y"], m, n,
                                    k)

    return KernelCase(f"{module} f32 unrounded m{m} n{n} k{k}", module, inputs,
                      {"y": OutputSpec(DType.FP32, (m, n))}, run, linear_oracle,
                      reference_abs_tol=TENSOR_CORE_K_TOL * k)


#: (m, n, k) of the unrounded f32 GEMV: GLM-4.5-Air's router (128 experts, hidden 4096) at
#: batch 1 and 8, a ragged n, and 20 rows of an 8-expert router (n not a multiple of 16: the
#: GEMV 8 rows at a time)
GEMV_UNROUNDED_SHAPES = [(1, 128, 4096), (8, 128, 4096), (3, 33, 576), (20, 8, 128)]


#: (m, n, k, out_f32): SmolLM2/Qwen3 widths, N not a multiple of the 4-row block, K from
#: 192 (one partial chunk per thread) to 12288 (down_proj), every M from 1 to 8
GEMV_SHAPES = [
    (1, 576, 576, False),
    (3, 1001, 192, False),
    (8, 384, 1536, False),
    (5, 961, 576, True),
    (1, 2048, 4096, False),
    (2, 130, 12288, False),
    (4, 515, 1024, True),
    (6, 64, 3072, False),
    (7, 33, 2048, False),
]


#: (m, n, k, out_f32, stages) on the ring kernel (gemv_ring.cuh), H200 plan: Qwen3-8B's qkv at
#: K = 3's 4 rows (264 blocks, ~6 groups a block, one tile each, 2 stages); its down projection
#: (3 tiles a group, ~4 groups a block); an LM-head-like ragged n with f32 logits (5,003 groups
#: on 528 blocks of 128 threads: ~10 a block through 3 slots, the partial-sum buffers
#: alternating); a ragged k (3 tiles a group, the last 226 chunks wide) on 3 stages; k = 192
#: (threads past the row's 24 chunks); fewer groups than blocks; one row, and 8
GEMV_RING_SHAPES = [
    (4, 6144, 4096, False, None),
    (4, 4096, 12288, False, None),
    (3, 20011, 1024, True, 3),
    (5, 1000, 10000, False, 3),
    (7, 1001, 192, False, 2),
    (2, 33, 2048, True, None),
    (1, 4099, 4096, False, 3),
    (8, 961, 576, True, None),
]


@kernel_cases("gemv")
def gemv_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = [linear_case(rng, f"gemv m{m} n{n} k{k}{' f32' if f32 else ''}", "gemv", m, n, k,
                         f32, tiled_gemv)
             for m, n, k, f32 in GEMV_SHAPES]
    cases += [linear_case(rng, f"gemv ring{s or ''} m{m} n{n} k{k}{' f32' if f32 else ''}",
                          "gemv", m, n, k, f32, partial(ring_gemv, s))
              for m, n, k, f32, s in GEMV_RING_SHAPES]
    # the general entry point with one row (linear sends m=1 to the single-row kernel)
    general = partial(matmul.gemv, single=False)
    cases += [linear_case(rng, f"gemv general m1 n{n} k{k}{' f32' if f32 else ''}", "gemv", 1,
                          n, k, f32, general)
              for n, k, f32 in [(517, 1024, False), (300, 576, True)]]
    # one row in 8-row blocks: a ragged n (the last block's rows past it), Qwen3-8B's k, and a
    # k of a partial warp
    cases += [linear_case(rng, f"gemv x8 m1 n{n} k{k}", "gemv", 1, n, k, False, x8_gemv)
              for n, k in [(1001, 2048), (4099, 4096), (33, 576)]]
    # ... and on the 48-register twin: Qwen3-4B's down (k 9,728: 256 threads, a partial third
    # pass), a ragged n at Qwen3-30B-A3B's k, a partial warp
    cases += [linear_case(rng, f"gemv lean m1 n{n} k{k}", "gemv", 1, n, k, False, lean_gemv)
              for n, k in [(2560, 9728), (1001, 2048), (33, 576)]]
    cases += [unrounded_case(rng, "gemv", *shape) for shape in GEMV_UNROUNDED_SHAPES]
    return cases


# ---- down projection with SwiGLU fused in ------------------------------------------------
def geglu_oracle(gate_up: np.ndarray) -> np.ndarray:
    """bf16(bf16(gelu_tanh(gate)) * up) from bf16 bits [m, 2k], the GELU in float64;
    returned as float64 [m, k]."""
    gu = bf16_bits_to_f32(gate_up).astype(np.float64)
    k = gu.shape[1] // 2
    gate, up = gu[:, :k], gu[:, k:]
    inner = np.sqrt(2.0 / np.pi) * (gate + 0.044715 * gate ** 3)
    gelu = round_bf16((0.5 * gate * (1.0 + np.tanh(inner))).astype(np.float32))
    return round_bf16((gelu.astype(np.float64) * up).astype(np.float32)).astype(np.float64)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """bf16 bits as float64 values (exact)."""
    return bf16_bits_to_f32(bits).astype(np.float64)


def glu_flip_slack(x: np.ndarray, w: np.ndarray, act_of: Callable[[np.ndarray], np.ndarray]
                   ) -> np.ndarray:
    """How far a gated product's act [m, I] may be from the host reference's. x [m, k] and the
    [gate | up] weight w [2 I, k] hold bf16 values (float64); act_of maps the product's bf16
    bits [m, 2 I] to act. The device's f32 sums (tensor cores, split-K partials) run in another
    order than the host's, so a gate or up sum within their rounding noise of a bf16 rounding
    tie may round to the other neighbour; the GLU's slope then carries that ulp into act
    (several act ulps where the SiLU's or tanh GELU's negative tail is small but steep). The
    noise is taken as (k / 8) 2^-24 |x w|_2: an f32 rounding of a partial sum of |x w|_2's
    size every 8 terms of K, all one way (a tensor core adds each k16 step's products to its
    accumulator truncating), twice over. Per element: the change of act when each such sum
    takes its other neighbour."""
    y = x @ w.T
    noise = x.shape[1] / 8 * 2.0 ** -24 * np.sqrt((x * x) @ (w * w).T)
    bits = f32_to_bf16_bits(y.astype(np.float32))
    r = bf16_bits_to_f32(bits).astype(np.float64)
    toward = np.where(np.abs(y) > np.abs(r), 1, -1).astype(np.int32)
    alt_bits = (bits.astype(np.int32) + toward).astype(np.uint16)
    alt = bf16_bits_to_f32(alt_bits).astype(np.float64)
    near = (r != 0) & (np.abs(y - (r + alt) / 2) <= noise)
    base = act_of(bits)
    inter = y.shape[1] // 2
    slack = np.zeros_like(base)
    for half in (slice(0, inter), slice(inter, 2 * inter)):
        flipped = bits.copy()
        flipped[:, half] = np.where(near[:, half], alt_bits[:, half], bits[:, half])
        slack += np.abs(act_of(flipped) - base)
    return slack


def swiglu_oracle(gate_up: np.ndarray) -> np.ndarray:
    """bf16(bf16(silu(gate)) * up) from bf16 bits [m, 2k], silu in float64 (sigmoid through
    tanh, which cannot overflow); returned as float64 [m, k]."""
    gu = bf16_bits_to_f32(gate_up).astype(np.float64)
    k = gu.shape[1] // 2
    gate, up = gu[:, :k], gu[:, k:]
    silu = round_bf16((gate * (0.5 + 0.5 * np.tanh(0.5 * gate))).astype(np.float32))
    return round_bf16((silu.astype(np.float64) * up).astype(np.float32)).astype(np.float64)


def silu_linear_case(rng: np.random.Generator, name: str, m: int, n: int, k: int,
                     single: bool | None = None,
                     cache: Callable[[GpuBackend], KernelCache] = KernelCache) -> KernelCase:
    """y = swiglu(gate_up) @ w.T through `gemv_silu` (`single` picks the entry point; None:
    by m) for m <= 8, or for m > 8 through `linear_silu`'s silu_mul + GEMM fallback, whose
    scratch is checked too, on the routes of `cache(backend)` (the prefetching or the ring
    kernels whatever the environment says). (The fused kernel is called directly: which
    shapes `linear_silu` fuses is a tuning choice that must not decide what is tested.)"""
    gate_up = random_bf16(rng, (m, 2 * k), 4.0)
    gate_up[0, :2] = f32_to_bf16_bits(np.array([-120.0, 95.0], np.float32))  # exp saturates
    inputs = {"gate_up": gate_up, "w": random_bf16(rng, (n, k), k ** -0.5)}
    outputs = {"y": OutputSpec(DType.BF16, (m, n))}
    fused = m <= matmul.GEMV_MAX_M
    if fused:  # the unfused twin: silu_mul into x, then the plain GEMV
        inputs["x"] = np.zeros((m, k), np.uint16)
        outputs["y" + UNFUSED] = OutputSpec(DType.BF16, (m, n))
    else:
        outputs["scratch"] = OutputSpec(DType.BF16, (m, k))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = cache(backend)
        if not fused:
            matmul.linear_silu(kc, stream, p["gate_up"], p["w"], p["y"], m, n, k,
                               scratch=p["scratch"])
            return
        matmul.gemv_silu(kc, stream, p["gate_up"], p["w"], p["y"], m, n, k, single=single)
        activation.silu_mul(kc, stream, p["gate_up"], p["x"], m, k)
        matmul.gemv(kc, stream, p["x"], p["w"], p["y" + UNFUSED], m, n, k,
                    single=m == 1 if single is None else single)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        act = swiglu_oracle(x["gate_up"])
        y = act @ bf16_bits_to_f32(x["w"]).astype(np.float64).T
        return {"y": y, "y" + UNFUSED: y, "scratch": act}

    return KernelCase(name, "gemv", inputs, outputs, run, oracle)


#: (m, n, k): Qwen3-0.6B and SmolLM2 down projections at batch 1, M of 2, 3, 5 and 8 with
#: ragged N, a K of 1000 (125 chunks: a partial last warp) and K = 128 (16 chunks)
GEMV_SILU_SHAPES = [(1, 1024, 3072), (1, 576, 1536), (2, 130, 1000), (5, 257, 2048),
                    (8, 64, 4096), (3, 33, 128)]


#: (m, n, k) of the m-row SwiGLU down projection on the ring and the register-tiled kernels:
#: Qwen3-0.6B's at K = 3's 4 rows (k <= FUSED_SILU_MAX_K: fused), 7 rows with a ragged n and
#: the partial last warp of k = 1000, and 3 rows over 3 tiles a group
GEMV_SILU_RING_SHAPES = [(4, 1024, 3072), (7, 257, 1000), (3, 130, 10000)]


@kernel_cases("gemv")
def gemv_silu_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = [silu_linear_case(rng, f"gemv_silu m{m} n{n} k{k}", m, n, k)
             for m, n, k in GEMV_SILU_SHAPES]
    cases.append(silu_linear_case(rng, "gemv_silu general m1 n300 k576", 1, 300, 576,
                                  single=False))
    # 2..8 rows on each of the m-row kernels, whichever ATLAS_GEMV_RING picks
    for ring in (True, False):
        cases += [silu_linear_case(rng, f"gemv_silu {'ring' if ring else 'tiled'} m{m} n{n} "
                                   f"k{k}", m, n, k, cache=partial(gemv_cache, ring=ring))
                  for m, n, k in GEMV_SILU_RING_SHAPES]
    # beyond the GEMV: silu_mul into the caller's scratch, then the GEMM
    cases.append(silu_linear_case(rng, "linear_silu fallback m12 n256 k1024", 12, 256, 1024))
    return cases
