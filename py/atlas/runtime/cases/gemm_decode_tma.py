"""Check cases for the TMA decode GEMM (module gemm_decode_tma, sm_90a): every shape of the
cp.async kernel's cases (cases/gemm_decode_sm90.py: every wgmma width with partial batches,
n past the last tile, k ending inside a k-tile and inside the ring's depth, several laps of
the ring, f32 logits, every split incl. ranks without k-tiles or batch rows, the Qwen3
slices, two-warpgroup blocks, the SwiGLU and GeGLU entries), each run through both kernels: the TMA
kernel's output against the float64 oracle, and against the cp.async kernel's (same split,
same block shape) bit for bit -- the two differ only in how bytes reach shared memory. Plus
what only the TMA kernel allows: two-warpgroup blocks at N = 16, boxes whose rows run
past both m and n while k ends inside a box, and the clusters of 3, 5, 6 and 7 (against the
oracle alone: the cp.async kernel has only the powers of two), at edge shapes and at the
narrow projections the split rule gives them with ATLAS_DECODE_GEMM_ANY_SPLIT=1. And the
persistent entries (gemm_decode_tma_*_persistent*: clusters looping over tiles) against the
oracle and bit for bit against the one-tile entry of the same split and block shape, at cluster
counts that give each cluster several tiles, one, or none, and through the route's own grid.
The gated (SwiGLU, GeGLU) TMA outputs equal the unfused pair's bits through that chain: the
cp.async kernel's gated entry is checked against its plain product then the activation
(cases/gemm_decode_sm90.py), and each persistent entry against the one-tile entry.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

import numpy as np

from ...core.dtype import DType
from ...core.numerics import f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul_decode
from ..ops.matmul_decode import Glu
from ..ops.routes import DECODE_GEMM_SPLITS, KernelRoutes
from .gemm_decode_sm90 import (GEMM_DECODE_GEGLU_SHAPES, GEMM_DECODE_SHAPES,
                               GEMM_DECODE_SWIGLU_SHAPES, GEMM_DECODE_WIDE_SHAPES, GLU_ORACLE)
from .gemv import TENSOR_CORE_K_TOL, bf16_values, glu_flip_slack, linear_oracle, random_bf16

#: the cp.async kernel's output beside the TMA kernel's
CPASYNC = "_cpasync"

#: (m, n, k, out_f32, split, wide) only the TMA kernel runs (two warpgroups at N = 16) or
#: that stress its boxes: rows past m and n in one box, k % 64 = 8 in a deep ring
GEMM_DECODE_TMA_SHAPES = [
    (8, 200, 4096, False, 1, True),     # N 16 on two warpgroups, 5.8 laps of an 11-slot ring
    (16, 72, 520, True, 2, True),       # N 16 two warpgroups in a cluster, 8 rows past n
    (3, 20, 8200, False, 4, False),     # 3 of 16 box rows, 20 of 64 weight rows, k % 64 = 8
    (255, 130, 72, False, 1, True),     # N 256, the last x row, k = 1.125 k-tiles
]

#: the same fields at the cluster sizes only the TMA kernel has: ranks of unequal k-tiles and
#: batch rows, ranks with none of either, and the narrow projections those splits are for
GEMM_DECODE_TMA_ODD_SHAPES = [
    (37, 200, 256, False, 3, True),     # k-tiles 4 = 1 + 1 + 2, rows 12 + 12 + 13, n past a tile
    (5, 72, 520, True, 5, False),       # f32, k-tiles 9 = 1 + 2 + 2 + 2 + 2, one row a rank
    (20, 130, 384, False, 6, True),     # one k-tile a rank, N 32 on two warpgroups
    (3, 64, 256, False, 7, False),      # 4 k-tiles and 3 rows over 7 ranks: ranks own neither
    (129, 96, 1024, True, 3, True),     # N 256 in a cluster of 3
    (64, 4096, 4096, False, 3, True),   # Qwen3-8B o_proj at 64 rows: 96 blocks
    (64, 4096, 12288, False, 3, True),  # Qwen3-8B down at 64 rows
    (16, 4096, 4096, False, 3, False),  # Qwen3-8B o_proj at 16 rows: 192 blocks
    (64, 2560, 4096, False, 6, True),   # Qwen3-4B o_proj: 20 tiles x 6
    (32, 2048, 4096, False, 7, True),   # Qwen3-30B-A3B o_proj: 16 tiles x 7
]
#: (m, I, k, split, wide) SwiGLU entries at those cluster sizes
GEMM_DECODE_TMA_ODD_SWIGLU_SHAPES = [
    (64, 96, 640, 3, True),             # k-tiles 10 = 3 + 3 + 4, I past the tile's pairs
    (9, 40, 1024, 5, False),            # N 16 on one warpgroup, I below a tile
]
#: ... and GeGLU entries (Gemma 3), every odd cluster size
GEMM_DECODE_TMA_ODD_GEGLU_SHAPES = [
    (64, 104, 640, 3, True),            # k-tiles 10 = 3 + 3 + 4, I past the tile's pairs
    (9, 40, 1024, 5, False),            # N 16 on one warpgroup, I below a tile
    (17, 72, 1152, 6, False),           # Gemma 3 1B's k: 18 k-tiles = 3 a rank, N 32
    (128, 136, 2560, 7, True),          # Gemma 3 4B's k over 7 ranks, N 128
]

#: (m, n, k, out_f32, split, wide, glu, clusters) the persistent entries run at `clusters`
#: clusters (launch_pick's override; None: the route's own grid, persistent_launch_grid, at
#: shapes whose one-tile grid runs several waves). Every block shape's partial-tile layout:
#: past the ring (two warpgroups, N <= 64) or over its top 1, 2 or 3 slots (the others)
GEMM_DECODE_TMA_PERSISTENT_SHAPES = [
    (64, 1000, 4096, False, 1, True, False, 3),    # 8 tiles: 3 + 3 + 2, 8 laps of the ring each
    (17, 600, 520, True, 2, True, False, 2),       # k % 64 = 8: 4 + 5 k-tiles of a 10-slot ring
    (1, 300, 8200, False, 2, False, False, 1),     # one cluster, 5 tiles; partial over slot 10
    (256, 520, 1000, False, 1, True, False, 2),    # N 256: the partial over slots 1..3 of 4
    (200, 300, 640, False, 2, False, False, 2),    # N 256 one warpgroup: over slots 3, 4 of 5
    (100, 700, 384, True, 1, False, False, 4),     # N 128 f32: 11 tiles, over slot 3 of 4
    (64, 640, 1024, False, 2, True, False, 8),     # 5 tiles, 8 clusters: 3 without a tile
    (3, 400, 64, False, 2, True, False, 2),        # one k-tile: rank 0 has none, each tile
    (64, 2000, 1024, False, 2, True, True, 3),     # SwiGLU I = 1000: 16 tiles, I past a tile
    (9, 600, 4096, False, 1, False, True, 2),      # SwiGLU N 16 one warpgroup: 10 tiles
    (256, 400, 640, False, 2, True, True, 1),      # SwiGLU N 256: 4 tiles in one cluster
    (64, 10000, 1024, False, 2, True, True, None),  # the route: 79 tiles x 2 > 132 blocks
    (9, 20000, 256, True, 1, False, False, None),  # the route: 313 tiles > 264 pair blocks
    (64, 2080, 640, False, 2, True, Glu.GEGLU, 3),   # GeGLU I = 1040: 17 tiles, I past one
    (16, 520, 2560, False, 1, False, Glu.GEGLU, 2),  # GeGLU N 16 one warpgroup: 9 tiles
    (256, 400, 640, False, 2, True, Glu.GEGLU, 1),   # GeGLU N 256: 4 tiles in one cluster
    (64, 10000, 1024, False, 2, True, Glu.GEGLU, None),  # GeGLU through the route
]
#: the one-tile entry's output beside the persistent one's
ONE_TILE = "_one_tile"

#: (m, n, k, out_f32, wide, glu, blocks) the stream-K entries run at `blocks` blocks (None:
#: streamk_blocks, the route's): ranges inside one tile, over several, blocks without units,
#: owners adding one to many partials, k ending inside a k-tile, every width up to 128
GEMM_DECODE_TMA_STREAMK_SHAPES = [
    (64, 1000, 4096, False, True, Glu.NONE, 11),      # 8 tiles x 64 k-tiles over 11 blocks
    (17, 600, 520, True, True, Glu.NONE, 7),          # f32, k % 64 = 8: 5 x 9 units over 7
    (3, 300, 8200, False, False, Glu.NONE, 13),       # N 16 one warpgroup: 5 x 129 over 13
    (128, 520, 1000, False, True, Glu.NONE, 9),       # N 128 two warpgroups (4-slot ring)
    (100, 700, 384, False, False, Glu.NONE, 20),      # N 128 one warpgroup (3 slots): 11 x 6
    (64, 200, 4096, False, True, Glu.NONE, 40),       # 2 tiles over 40 blocks: 19 partials each
    (5, 64, 256, False, True, Glu.NONE, 9),           # 4 units, 9 blocks: 5 without one
    (64, 2000, 1024, False, True, Glu.SWIGLU, 13),    # SwiGLU I = 1000: 16 x 16 over 13
    (9, 600, 4096, False, False, Glu.SWIGLU, 17),     # SwiGLU N 16 one warpgroup
    (64, 2080, 640, False, True, Glu.GEGLU, 11),      # GeGLU I = 1040
    (64, 6144, 4096, False, True, Glu.NONE, None),    # Qwen3-8B qkv at 64 rows, the route
    (64, 4096, 12288, False, True, Glu.NONE, None),   # Qwen3-8B down at 64 rows
    (64, 24576, 4096, False, True, Glu.SWIGLU, None),  # Qwen3-8B gate_up + SwiGLU at 64
    (32, 4096, 4096, False, False, Glu.NONE, None),   # o_proj at 32 rows, one warpgroup
]
#: the second stream-K launch's output and the flags after both
AGAIN, FLAGS = "_again", "flags"


def _split(kc: KernelCache, m: int, n: int, k: int, split: int | None,
           groups: int) -> int:
    """The split both kernels run: the forced one, else the rule's for the TMA block shape."""
    if split is not None:
        return split
    return matmul_decode.decode_split(m, n, k, kc.facts.sm_count, kc.routes.decode_gemm_split,
                                      groups)


def gated_inputs(rng: np.random.Generator, m: int, n: int, k: int,
                 glu: Glu) -> tuple[dict[str, np.ndarray], str, int]:
    """x and w of a case, its output's name (act for a gated product) and columns (I = n / 2
    for one): a gated product's w is scaled by 4 / sqrt(k), so its gates reach the
    activation's curve."""
    scale = (4.0 if glu else 1.0) * k ** -0.5
    inputs = {"x": random_bf16(rng, (m, k)), "w": random_bf16(rng, (n, k), scale)}
    return inputs, "act" if glu else "y", n // 2 if glu else n


def gated_oracle(x: dict[str, np.ndarray], glu: Glu) -> np.ndarray:
    """The float64 product, through the activation of its bf16 values where `glu`."""
    y = linear_oracle(x)["y"]
    return GLU_ORACLE[glu](f32_to_bf16_bits(y.astype(np.float32))) if glu else y


def gated_slack(inputs: dict[str, np.ndarray], glu: Glu, outputs: Iterable[str]
                ) -> dict[str, np.ndarray]:
    """Each gated output's reference slack (gemv.glu_flip_slack); none for a plain product."""
    if not glu:
        return {}
    slack = glu_flip_slack(bf16_values(inputs["x"]), bf16_values(inputs["w"]), GLU_ORACLE[glu])
    return {out: slack for out in outputs}


def gemm_decode_tma_case(rng: np.random.Generator, m: int, n: int, k: int, f32: bool,
                         split: int | None, wide: bool = False,
                         glu: Glu = Glu.NONE) -> KernelCase:
    """y (act with `glu`, n = 2 I) through the TMA kernel, and the same through the
    cp.async kernel at the same split and warpgroups where it has that split: the oracle for
    both, same bits."""
    glu = Glu(glu)
    inputs, name, cols = gated_inputs(rng, m, n, k, glu)
    spec = OutputSpec(DType.FP32 if f32 else DType.BF16, (m, cols), bf16_valued=f32)
    groups = matmul_decode.decode_groups(m, wide, tma=True)
    # (output, kernel): the cp.async kernel beside the TMA one where it has the split
    runs = [(name, True)] + ([(name + CPASYNC, False)]
                             if split is None or split in DECODE_GEMM_SPLITS else [])

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        s = _split(kc, m, n, k, split, groups)
        for out, tma in runs:
            matmul_decode.decode_gemm(kc, stream, p["x"], p["w"], p[out], m, n, k, f32,
                                      split=s, wide=groups == 2, glu=glu, tma=tma)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = gated_oracle(x, glu)
        return {out: y for out, _ in runs}

    label = ("wide " if wide else "") + ("auto" if split is None else f"split{split}")
    kind = f"{glu.name.lower()} {label} m{m} i{n // 2}" if glu else f"{label} m{m} n{n}"
    return KernelCase(f"gemm_decode_tma {kind} k{k}{' f32' if f32 else ''}",
                      "gemm_decode_tma", inputs, {out: spec for out, _ in runs}, run,
                      oracle, reference_abs_tol=TENSOR_CORE_K_TOL * k,
                      reference_slack=gated_slack(inputs, glu, (out for out, _ in runs)),
                      same_bits=((name, name + CPASYNC),) if len(runs) == 2 else ())


def gemm_decode_tma_persistent_case(rng: np.random.Generator, m: int, n: int, k: int,
                                    f32: bool, split: int, wide: bool, glu: Glu,
                                    clusters: int | None) -> KernelCase:
    """y (act with `glu`, n = 2 I) through the persistent entry at `clusters` clusters
    (None: decode_gemm under the persistent route, which must pick that form at these shapes:
    tests/unit/test_gemm_decode_tma.py), and through the one-tile entry of the same split and
    warpgroups: the oracle for both, same bits."""
    glu = Glu(glu)
    inputs, name, cols = gated_inputs(rng, m, n, k, glu)
    spec = OutputSpec(DType.FP32 if f32 else DType.BF16, (m, cols), bf16_valued=f32)
    groups = matmul_decode.decode_groups(m, wide, tma=True)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        routes = KernelRoutes.from_env()
        one_tile = KernelCache(backend, replace(routes, decode_gemm_persistent=False))
        matmul_decode.launch_pick(one_tile, stream, p["x"], p["w"], p[name + ONE_TILE], m, n, k,
                                  f32, glu, True, (split, groups))
        if clusters is None:
            looped = KernelCache(backend, replace(routes, decode_gemm_persistent=True))
            matmul_decode.decode_gemm(looped, stream, p["x"], p["w"], p[name], m, n, k, f32,
                                      split=split, wide=groups == 2, glu=glu, tma=True)
        else:
            matmul_decode.launch_pick(one_tile, stream, p["x"], p["w"], p[name], m, n, k, f32,
                                      glu, True, (split, groups), clusters)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = gated_oracle(x, glu)
        return {name: y, name + ONE_TILE: y}

    label = ("wide " if wide else "") + f"split{split} " + ("route" if clusters is None
                                                            else f"c{clusters}")
    kind = f"{glu.name.lower()} m{m} i{n // 2}" if glu else f"m{m} n{n}"
    return KernelCase(f"gemm_decode_tma persistent {label} {kind} k{k}{' f32' if f32 else ''}",
                      "gemm_decode_tma", inputs, {name: spec, name + ONE_TILE: spec}, run,
                      oracle, reference_abs_tol=TENSOR_CORE_K_TOL * k,
                      reference_slack=gated_slack(inputs, glu, (name, name + ONE_TILE)),
                      same_bits=((name, name + ONE_TILE),))


def gemm_decode_tma_streamk_case(rng: np.random.Generator, m: int, n: int, k: int, f32: bool,
                                 wide: bool, glu: Glu, blocks: int | None) -> KernelCase:
    """y (act with `glu`, n = 2 I) through the stream-K entry at `blocks` blocks, twice: the
    oracle for both, the same bits (a fixed order of partial sums), and every flag back at 0
    after them (each owner resets the flags it consumed: a flag left at 1 would let the next
    launch's owner read a partial before it is written)."""
    glu = Glu(glu)
    inputs, name, cols = gated_inputs(rng, m, n, k, glu)
    spec = OutputSpec(DType.FP32 if f32 else DType.BF16, (m, cols), bf16_valued=f32)
    groups = matmul_decode.decode_groups(m, wide, tma=True)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        for out in (name, name + AGAIN):
            matmul_decode.launch_pick(kc, stream, p["x"], p["w"], p[out], m, n, k, f32, glu,
                                      True, (matmul_decode.STREAMK, groups), blocks)
        work = matmul_decode.streamk_workspace(kc, stream)
        assert work is not None, "made by the launches above"
        words = min(2 * kc.facts.sm_count, FLAG_WORDS)
        backend.memset(p[FLAGS], 0, FLAG_WORDS * 4, stream)
        backend.copy_d2d(p[FLAGS], work + matmul_decode.streamk_flags_offset(kc.facts.sm_count),
                         words * 4, stream)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = gated_oracle(x, glu)
        return {name: y, name + AGAIN: y, FLAGS: np.zeros(FLAG_WORDS, np.int32)}

    label = ("wide " if wide else "") + ("route" if blocks is None else f"b{blocks}")
    kind = f"{glu.name.lower()} m{m} i{n // 2}" if glu else f"m{m} n{n}"
    return KernelCase(f"gemm_decode_tma streamk {label} {kind} k{k}{' f32' if f32 else ''}",
                      "gemm_decode_tma", inputs,
                      {name: spec, name + AGAIN: spec,
                       FLAGS: OutputSpec(DType.I32, (FLAG_WORDS,), tol=(0.0, 0.0))},
                      run, oracle, reference_abs_tol=TENSOR_CORE_K_TOL * k,
                      reference_slack=gated_slack(inputs, glu, (name, name + AGAIN)),
                      capturable=False, same_bits=((name, name + AGAIN),))


#: the flag words a check case reads back (the first ones of a larger device; a smaller
#: one's are followed by zeros): two blocks an SM at 132 SMs
FLAG_WORDS = 2 * 132


def tma_case_shapes() -> list[tuple[int, int, int, bool, int | None, bool, Glu]]:
    """Every (m, n, k, out_f32, split, wide, glu) the TMA kernel is checked at."""
    gated = ((GEMM_DECODE_SWIGLU_SHAPES + GEMM_DECODE_TMA_ODD_SWIGLU_SHAPES, Glu.SWIGLU),
             (GEMM_DECODE_GEGLU_SHAPES + GEMM_DECODE_TMA_ODD_GEGLU_SHAPES, Glu.GEGLU))
    return ([(*shape, False, Glu.NONE) for shape in GEMM_DECODE_SHAPES]
            + [(*shape, True, Glu.NONE) for shape in GEMM_DECODE_WIDE_SHAPES]
            + [(*shape, Glu.NONE) for shape in GEMM_DECODE_TMA_SHAPES]
            + [(*shape, Glu.NONE) for shape in GEMM_DECODE_TMA_ODD_SHAPES]
            + [(m, 2 * i, k, False, split, wide, glu) for shapes, glu in gated
               for m, i, k, split, wide in shapes])


@kernel_cases("gemm_decode_tma")
def gemm_decode_tma_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([gemm_decode_tma_case(rng, *shape) for shape in tma_case_shapes()]
            + [gemm_decode_tma_persistent_case(rng, *shape)
               for shape in GEMM_DECODE_TMA_PERSISTENT_SHAPES]
            + [gemm_decode_tma_streamk_case(rng, *shape)
               for shape in GEMM_DECODE_TMA_STREAMK_SHAPES])
