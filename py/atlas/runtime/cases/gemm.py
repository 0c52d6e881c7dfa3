"""Check cases for the tensor-core GEMMs: masked M, N below a tile, K with a partial tile.

The wgmma kernel (module gemm_sm90, sm_90a sets only) gets its own cases, each forcing it
whatever the dispatch rule says: M not a multiple of its 128-row tile (1, 77, 200, 1000) and
more than GROUP_M = 8 row tiles (a partial raster group), N = 16 * odd (a 256-column tile
mostly masked), K ending in a partial 64-column tile or shorter than the pipeline, and the
Qwen3 projections at a few rows (Qwen3-8B's with fewer columns, to keep the host tests fast;
the prefill GEMM family of tools/gpu/bench_kernels.py compares the full shapes with PyTorch).
Its TMA twin (module gemm_sm90_tma) runs its own shapes -- m one short of a tile, one past
it and 2,048 + 65, n past a column tile, k ending inside a k-tile, shorter than the ring and
many laps of it, f32 output -- each through both kernels: against the float64 oracle, and
against gemm_sm90's output bit for bit (the same wgmma sequence over K). Each shape runs
twice: one block a tile, and in clusters of two m-tiles sharing W by multicast ("cluster2":
an odd m-tile count pads the grid with a block wholly past m, and a W half wholly past n is
not copied at n = 16 and n = 528); a few also on the persistent grid, whose blocks run
several tiles through one ring when the tiles outnumber the device's blocks. Its gated
entries (gemm_glu: the gate_up product ending with SwiGLU / GeGLU) run against the oracle and
bit for bit against the plain twin followed by the activation kernel.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from ...core.dtype import DType
from ...core.numerics import f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul
from ..ops.matmul_decode import Glu
from ..ops.routes import KernelRoutes
from .gemm_decode_sm90 import GLU_ACTIVATION, GLU_ORACLE
from .gemv import (TENSOR_CORE_K_TOL, UNFUSED, bf16_values, glu_flip_slack, linear_case,
                   linear_oracle, random_bf16, unrounded_case)

#: (m, n, k, out_f32, skinny): skinny=None lets the dispatch rule choose
GEMM_SHAPES = [
    (17, 576, 192, False, None),
    (100, 256, 576, False, True),
    (130, 144, 208, False, False),
    (257, 384, 1024, True, False),
    (9, 160, 64, True, True),
    (20, 16, 16, False, False),
    (64, 96, 1536, False, None),
    (200, 48, 80, True, True),
    (512, 128, 2048, True, None),  # Qwen3-30B-A3B router logits of a 512-token chunk
]

#: (m, n, k, out_f32) for gemm_sm90
GEMM_SM90_SHAPES = [
    (1, 256, 64, False),        # one row, one exact tile of n and k
    (77, 144, 208, False),      # n = 16 * 9, k = 3.25 k-tiles
    (200, 528, 80, True),       # n = 16 * 33 (3 column tiles, the last 1/16 full), f32 out
    (1000, 272, 1040, False),   # 8 row tiles (the last one 104 rows), k = 16.25 k-tiles
    (1157, 512, 128, False),    # 10 row tiles: one full raster group of 8, one of 2
    (130, 16, 16, False),       # smallest n and k: one k-tile, fewer than the prefetch depth
    (129, 48, 112, True),       # two k-tiles, the last one 48 columns; row 129 alone
    (256, 768, 4096, False),    # exact tiles, a long K (64 k-tiles through the ring)
    (24, 4096, 1024, False),    # Qwen3-0.6B qkv
    (40, 1024, 2048, False),    # Qwen3-0.6B o
    (33, 6144, 1024, True),     # Qwen3-0.6B gate_up, f32 out
    (17, 1024, 3072, False),    # Qwen3-0.6B down
    (20, 1536, 4096, False),    # Qwen3-8B k (qkv, o, gate_up) with a quarter of qkv's n
    (9, 512, 12288, False),     # Qwen3-8B down's k (192 k-tiles)
]


@kernel_cases("gemm")
def gemm_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = []
    for m, n, k, f32, skinny in GEMM_SHAPES:
        tile = {None: "auto", True: "skinny", False: "128x128"}[skinny]
        launch = partial(matmul.gemm, skinny=skinny, sm90=False)
        cases.append(linear_case(rng, f"gemm {tile} m{m} n{n} k{k}{' f32' if f32 else ''}",
                                 "gemm", m, n, k, f32, launch, tensor_core=True))
    # the float32 router's logits of prefill chunks (GLM-4.5-Air: 128 experts, hidden 4096)
    cases += [unrounded_case(rng, "gemm", m, n, k) for m, n, k in [(9, 128, 4096),
                                                                   (300, 160, 5120)]]
    return cases


@kernel_cases("gemm_sm90")
def gemm_sm90_cases(rng: np.random.Generator) -> list[KernelCase]:
    # the cp.async kernel whatever the routes say (the TMA twin's cases are its own)
    launch = partial(matmul.gemm, sm90=True, tma=False)
    return [linear_case(rng, f"gemm_sm90 m{m} n{n} k{k}{' f32' if f32 else ''}", "gemm_sm90",
                        m, n, k, f32, launch, tensor_core=True)
            for m, n, k, f32 in GEMM_SM90_SHAPES]


#: (m, n, k, out_f32) for gemm_sm90_tma (each also through gemm_sm90, same bits)
GEMM_SM90_TMA_SHAPES = [
    (1, 256, 64, False),        # one row: 127 zero-filled A box rows; one exact n and k tile
    (127, 144, 208, False),     # a row short of a tile, n = 16 * 9, k = 3.25 k-tiles < the ring
    (129, 528, 80, True),       # row 129 alone in its tile, 3 column tiles (the last 1/16 full)
    (2113, 528, 1040, False),   # 2,048 + 65 rows: raster groups of 8, 8, 1; 17 k-tiles, k % 64 16
    (130, 16, 16, False),       # smallest n and k: a 256-row W box of 16 rows, one k-tile
    (256, 768, 4096, False),    # exact tiles, 64 k-tiles: 16 laps of the 4-slot ring
    (200, 1536, 4096, True),    # Qwen3-8B's k with f32 output
    (9, 512, 12288, False),     # Qwen3-8B down's k (192 k-tiles)
]
#: (m, n, k, out_f32) also run on the persistent grid: more tiles than an H200 holds blocks
#: (272, 288 in pairs: two or three tiles a block, the ring running on across them), and
#: edges where the grid is the tile count
GEMM_SM90_TMA_PERSISTENT_SHAPES = [
    (2048 + 65, 4096, 208, False),  # 17 x 16 tiles, 3.25 k-tiles a tile (fewer than the ring)
    (1100, 4096, 528, True),        # 9 x 16 tiles, f32, k % 64 = 16 over 9 k-tiles
    (129, 528, 80, False),          # 2 x 3 tiles
    (1, 16, 16, False),             # one row, one column tile of 16
]

#: gemm_sm90's output beside its TMA twin's
CPASYNC = "_cpasync"


def gemm_sm90_tma_case(rng: np.random.Generator, m: int, n: int, k: int, f32: bool,
                       multicast: bool, persistent: bool = False) -> KernelCase:
    """y through the TMA twin (in clusters of two with `multicast`, on the persistent grid
    with `persistent`) and y_cpasync through gemm_sm90, both forced whatever the routes say:
    the oracle for both, and the same bits."""
    inputs = {"x": random_bf16(rng, (m, k)), "w": random_bf16(rng, (n, k), k ** -0.5)}
    spec = OutputSpec(DType.FP32 if f32 else DType.BF16, (m, n), bf16_valued=f32)
    runs = (("y", True), ("y" + CPASYNC, False))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend, replace(KernelRoutes.from_env(),
                                          gemm_tma_persistent=persistent))
        for out, tma in runs:
            matmul.gemm(kc, stream, p["x"], p["w"], p[out], m, n, k, f32, sm90=True, tma=tma,
                        multicast=multicast)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = linear_oracle(x)["y"]
        return {out: y for out, _ in runs}

    label = ("persistent " if persistent else "") + ("cluster2 " if multicast else "")
    return KernelCase(f"gemm_sm90_tma {label}m{m} n{n} k{k}{' f32' if f32 else ''}",
                      "gemm_sm90_tma", inputs, {out: spec for out, _ in runs}, run, oracle,
                      reference_abs_tol=TENSOR_CORE_K_TOL * k, same_bits=(("y", "y" + CPASYNC),))


#: (m, I, k, persistent, glu) for the TMA twin's gated entries (gemm_glu): I past a 128-pair
#: tile (its gate box runs into up rows, its up box past the weight), tiny and raster-group
#: shapes, and the persistent grid with more tiles than an H100 / H200 holds blocks
GEMM_SM90_TMA_GLU_SHAPES = [
    (129, 136, 208, False, Glu.SWIGLU),    # 2 x 2 tiles, I = 128 + 8, k = 3.25 k-tiles
    (2113, 1024, 1040, False, Glu.SWIGLU),  # raster groups 8, 8, 1 of 8 pair tiles, k % 64 16
    (1, 16, 16, False, Glu.SWIGLU),        # one row, I = 16: one k-tile of 16 columns
    (1100, 2080, 208, True, Glu.SWIGLU),   # 9 x 17 = 153 tiles on the persistent grid
    (200, 520, 640, False, Glu.GEGLU),     # Gemma 3's GLU, I past the 4th tile
    (1100, 2080, 208, True, Glu.GEGLU),
]


def gemm_sm90_tma_glu_case(rng: np.random.Generator, m: int, inter: int, k: int,
                           persistent: bool, glu: Glu) -> KernelCase:
    """act = glu(x @ [gate | up].T) through `matmul.gemm_glu`, and through the plain twin
    into gate_up then the activation kernel (act_unfused): the oracle (the float64 product
    rounded to bf16, then the activation) for both, and the same bits."""
    n = 2 * inter
    inputs = {"x": random_bf16(rng, (m, k)), "w": random_bf16(rng, (n, k), 4.0 * k ** -0.5),
              "gate_up": np.zeros((m, n), np.uint16)}
    outputs = {"act": OutputSpec(DType.BF16, (m, inter)),
               "act" + UNFUSED: OutputSpec(DType.BF16, (m, inter))}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend, replace(KernelRoutes.from_env(),
                                          gemm_tma_persistent=persistent))
        matmul.gemm_glu(kc, stream, p["x"], p["w"], p["act"], m, n, k, glu == Glu.GEGLU)
        matmul.gemm(kc, stream, p["x"], p["w"], p["gate_up"], m, n, k, sm90=True, tma=True,
                    multicast=False)
        GLU_ACTIVATION[glu](kc, stream, p["gate_up"], p["act" + UNFUSED], m, inter)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        act = GLU_ORACLE[glu](f32_to_bf16_bits(linear_oracle(x)["y"].astype(np.float32)))
        return {"act": act, "act" + UNFUSED: act}

    slack = glu_flip_slack(bf16_values(inputs["x"]), bf16_values(inputs["w"]), GLU_ORACLE[glu])
    label = "persistent " if persistent else ""
    return KernelCase(f"gemm_sm90_tma {glu.name.lower()} {label}m{m} i{inter} k{k}",
                      "gemm_sm90_tma", inputs, outputs, run, oracle,
                      reference_abs_tol=TENSOR_CORE_K_TOL * k,
                      reference_slack={out: slack for out in outputs},
                      same_bits=(("act", "act" + UNFUSED),))


@kernel_cases("gemm_sm90_tma")
def gemm_sm90_tma_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([gemm_sm90_tma_case(rng, *shape, multicast)
             for multicast in (False, True) for shape in GEMM_SM90_TMA_SHAPES]
            + [gemm_sm90_tma_case(rng, *shape, multicast, persistent=True)
               for multicast in (False, True) for shape in GEMM_SM90_TMA_PERSISTENT_SHAPES]
            + [gemm_sm90_tma_glu_case(rng, *shape) for shape in GEMM_SM90_TMA_GLU_SHAPES])
