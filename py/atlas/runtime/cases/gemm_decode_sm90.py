"""Check cases for the skinny wgmma GEMM of decode batches (module gemm_decode_sm90, sm_90a).

Shapes chosen to catch fragment, ring and cluster bugs: every wgmma width with a partial
batch (m = 9, 17, 33, 65, 129 and the full 16, 64, 256, and one row), n not a multiple of
the 64-row tile (1..63 rows of the last tile past n) or of 16, k ending inside a 64-column
k-tile and inside a 16-byte chunk's tile (k % 64 = 8), k shorter than the ring's prefetch
depth, several laps of the ring, f32 logits, and every cluster split forced (2, 4, 8),
including splits where some ranks own no k-tile (k = 64 split 8) and where the ranks' batch
row slices are uneven or empty (m = 9 split 8, m = 1 split 4). The rule's own choice runs on
slices of the Qwen3 projections. The two-warpgroup blocks (128 weight rows sharing each x
tile, ATLAS_DECODE_GEMM_WIDE) run the same kinds of edges at every width they take (N >= 32;
a batch of 16 or fewer falls back to one warpgroup), with n ending inside either warpgroup's
half of the last tile. The SwiGLU entries (gate_up ending with its activation) run every
width, split and block shape with I = n / 2 ending inside a gate/up tile, I odd, and the
Qwen3-8B slice, each beside its unfused twin (the same split's product into gate_up, then
silu_mul) whose output must hold the same bits. The GeGLU entries (Gemma 3's tanh-GELU GLU)
run the same kinds of edges at every split and block shape, and Gemma-3 slices, beside their
unfused twin (the product, then gelu_tanh_mul).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ...core.dtype import DType
from ...core.numerics import f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, activation, matmul_decode
from ..ops.matmul_decode import Glu
from .gemv import (TENSOR_CORE_K_TOL, UNFUSED, bf16_values, geglu_oracle, glu_flip_slack,
                   linear_case, linear_oracle, random_bf16, swiglu_oracle)

#: (m, n, k, out_f32, split): split None lets matmul_decode.decode_split choose
GEMM_DECODE_SHAPES = [
    (9, 100, 200, False, 1),       # N 16, last tile 36 rows, k = 3.125 k-tiles
    (16, 64, 4096, False, 1),      # exact N 16 and tile, 64 k-tiles: 8 laps of the ring
    (17, 208, 520, True, 1),       # N 32, f32 logits, k % 64 = 8
    (33, 130, 1024, False, 1),     # N 64, 2 rows in the last tile
    (64, 192, 3072, False, 1),     # exact N 64
    (65, 72, 136, True, 1),        # N 128, k = 2.125 k-tiles (below the prefetch depth)
    (129, 80, 264, False, 1),      # N 256, a single row in the last 8-row group
    (256, 128, 2048, False, 1),    # the largest batch, exact tiles
    (1, 48, 64, False, 1),         # one row, n below one tile, one k-tile
    (24, 33, 8, True, 1),          # smallest k: one chunk, the rest of the tile zero
    (32, 260, 4096, False, 2),     # cluster of 2
    (48, 200, 1040, True, 4),      # cluster of 4, k-tiles 17 = 4 + 4 + 4 + 5
    (9, 136, 12288, False, 8),     # cluster of 8 (down_proj K), one or two rows per rank
    (100, 64, 64, False, 8),       # cluster of 8, seven ranks own no k-tile
    (1, 96, 512, False, 4),        # three of the four ranks write no batch row
    (200, 70, 1024, True, 2),      # N 256 in a cluster, f32
    (24, 1024, 1024, False, None),   # Qwen3-0.6B hidden, rule's split (4)
    (40, 256, 3072, False, None),    # Qwen3-0.6B down_proj K (split 8)
    (64, 640, 4096, False, None),    # Qwen3-8B hidden (split 8)
    (32, 96, 12288, False, None),    # Qwen3-8B down_proj K
]


#: the same fields for two-warpgroup blocks (128 weight rows a tile)
GEMM_DECODE_WIDE_SHAPES = [
    (17, 200, 520, True, 1),       # N 32, last tile 72 rows (into the second half), k % 64 = 8
    (32, 130, 4096, False, 1),     # exact N 32, 2 rows in the last tile, 8 laps of the ring
    (33, 100, 200, False, 1),      # N 64, n inside the first half of the only tile
    (64, 256, 3072, False, 1),     # exact N 64 and tiles
    (65, 72, 136, True, 1),        # N 128, k below the prefetch depth
    (129, 80, 264, False, 1),      # N 256
    (256, 128, 2048, False, 1),    # the largest batch, one exact tile
    (9, 100, 200, False, 1),       # N 16: one warpgroup whatever the switch says
    (48, 200, 1040, True, 4),      # cluster of 4, k-tiles 17 = 4 + 4 + 4 + 5
    (64, 136, 12288, False, 8),    # cluster of 8 (down_proj K)
    (100, 64, 64, False, 8),       # cluster of 8, seven ranks own no k-tile
    (200, 70, 1024, True, 2),      # N 256 in a cluster, f32
    (64, 640, 4096, False, None),  # Qwen3-8B hidden, the rule's split
]


def gemm_decode_case(rng: np.random.Generator, m: int, n: int, k: int, f32: bool,
                     split: int | None, wide: bool = False) -> KernelCase:
    """One y = x @ w.T case through matmul_decode.decode_gemm (split forced unless None;
    `wide`: two-warpgroup blocks forced)."""
    label = ("wide " if wide else "") + ("auto" if split is None else f"split{split}")
    return linear_case(rng, f"gemm_decode_sm90 {label} m{m} n{n} k{k}{' f32' if f32 else ''}",
                       "gemm_decode_sm90", m, n, k, f32,
                       partial(matmul_decode.decode_gemm, split=split, wide=wide),
                       tensor_core=True)


@kernel_cases("gemm_decode_sm90")
def gemm_decode_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([gemm_decode_case(rng, *shape) for shape in GEMM_DECODE_SHAPES]
            + [gemm_decode_case(rng, *shape, wide=True) for shape in GEMM_DECODE_WIDE_SHAPES])


#: (m, inter, k, split, wide) of the SwiGLU entries (n = 2 inter weight rows); split None:
#: the rule's choice (the twin makes the same one)
GEMM_DECODE_SWIGLU_SHAPES = [
    (9, 100, 200, 1, False),      # N 16, the last tile's pairs 96..99, k = 3.125 k-tiles
    (16, 32, 4096, 1, False),     # one exact tile, 8 laps of the ring
    (33, 130, 1024, 2, False),    # N 64, cluster of 2, two pairs in the last tile
    (64, 96, 4096, 4, False),     # the 64-stream batch, cluster of 4
    (65, 40, 136, 1, False),      # N 128, k below the prefetch depth
    (129, 48, 264, 8, False),     # N 256, cluster of 8, ranks without a k-tile
    (1, 24, 64, 1, False),        # one row, one k-tile
    (20, 77, 1000, 1, False),     # odd I (no twin: silu_mul takes I % 8 == 0), k % 64 = 40
    (17, 72, 520, 1, True),       # two warpgroups: pairs 64..71 fill the second tile's half
    (64, 200, 1040, 4, True),     # two warpgroups in a cluster of 4
    (256, 64, 2048, 2, True),     # the largest batch
    (64, 1536, 4096, None, False),  # a Qwen3-8B gate_up slice at 64 rows, the rule's split
]

#: the same fields for the GeGLU entries (Gemma 3's tanh-GELU GLU): I a multiple of 8 (the
#: unfused twin's) but not of a tile's 32 / 64 pairs, every split and block shape
GEMM_DECODE_GEGLU_SHAPES = [
    (9, 104, 200, 1, False),      # N 16, the last tile's pairs 96..103, k = 3.125 k-tiles
    (16, 40, 4096, 2, False),     # exact N 16 in a cluster of 2, 4 laps of the ring a rank
    (33, 136, 1024, 4, False),    # N 64, cluster of 4, 8 pairs in the last tile
    (64, 200, 1152, 8, True),     # Gemma 3 1B's k (18 k-tiles over 8 ranks), two warpgroups
    (129, 48, 264, 1, True),      # N 256, two warpgroups: 48 of the one tile's 64 pairs
    (256, 72, 640, 2, True),      # the largest batch in a cluster
    (20, 77, 1000, 1, False),     # odd I (no twin), k % 64 = 40
    (64, 1280, 2560, None, False),  # a Gemma 3 4B gate_up slice at 64 rows, the rule's split
]

#: each activation's float64 oracle over bf16 [gate | up] bits, and the launch its gated
#: entries replace (the unfused twin's second kernel)
GLU_ORACLE = {Glu.SWIGLU: swiglu_oracle, Glu.GEGLU: geglu_oracle}
GLU_ACTIVATION = {Glu.SWIGLU: activation.silu_mul, Glu.GEGLU: activation.gelu_tanh_mul}


def gemm_decode_swiglu_case(rng: np.random.Generator, m: int, inter: int, k: int,
                            split: int | None, wide: bool,
                            glu: Glu = Glu.SWIGLU) -> KernelCase:
    """act = swiglu(x @ [gate | up].T) through decode_gemm(glu=Glu.SWIGLU) (`glu`: GEGLU, the
    tanh-GELU GLU) and, where the activation kernel (silu_mul, gelu_tanh_mul) takes I (a
    multiple of 8), its unfused twin into `act_unfused`: the same bits on every backend. The
    oracle is the float64 product rounded to bf16, then the activation of those values. w is
    scaled by 4/sqrt(k), so the gates reach the activation's curved range."""
    n = 2 * inter
    inputs = {"x": random_bf16(rng, (m, k)), "w": random_bf16(rng, (n, k), 4.0 * k ** -0.5)}
    outputs = {"act": OutputSpec(DType.BF16, (m, inter))}
    twin = inter % 8 == 0
    if twin:
        inputs["gate_up"] = np.zeros((m, n), np.uint16)
        outputs["act" + UNFUSED] = OutputSpec(DType.BF16, (m, inter))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        matmul_decode.decode_gemm(kc, stream, p["x"], p["w"], p["act"], m, n, k, split=split,
                                  wide=wide, glu=glu)
        if twin:
            matmul_decode.decode_gemm(kc, stream, p["x"], p["w"], p["gate_up"], m, n, k,
                                      split=split, wide=wide)
            GLU_ACTIVATION[glu](kc, stream, p["gate_up"], p["act" + UNFUSED], m, inter)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        gate_up = f32_to_bf16_bits(linear_oracle(x)["y"].astype(np.float32))
        act = GLU_ORACLE[glu](gate_up)
        return {"act": act, "act" + UNFUSED: act} if twin else {"act": act}

    slack = glu_flip_slack(bf16_values(inputs["x"]), bf16_values(inputs["w"]), GLU_ORACLE[glu])
    label = ("wide " if wide else "") + ("auto" if split is None else f"split{split}")
    return KernelCase(f"gemm_decode_sm90 {glu.name.lower()} {label} m{m} i{inter} k{k}",
                      "gemm_decode_sm90", inputs, outputs, run, oracle,
                      reference_abs_tol=TENSOR_CORE_K_TOL * k,
                      reference_slack={out: slack for out in outputs},
                      same_bits=(("act", "act" + UNFUSED),) if twin else ())


@kernel_cases("gemm_decode_sm90")
def gemm_decode_swiglu_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([gemm_decode_swiglu_case(rng, *shape) for shape in GEMM_DECODE_SWIGLU_SHAPES]
            + [gemm_decode_swiglu_case(rng, *shape, glu=Glu.GEGLU)
               for shape in GEMM_DECODE_GEGLU_SHAPES])
