"""Check cases for the Hopper wgmma prefill attention (module attention_sm90, head_dim 128
and 256).

cases/attention.prefill_case (scrambled paged cache with NaN in every unowned slot, the
float64 causal oracle) forced onto the wgmma kernel: first and chunked prefill (chunk
offsets that are and are not multiples of the key tile), a 1-query chunk, chunks ending
inside the first or the second warpgroup's 64 rows of a 128-query block and spanning
several blocks, histories ending inside a key tile and spanning many (tiles below the
diagonal run unmasked), block sizes 7 and 16 (pages that straddle the key tiles), MHA and
GQA 2, 4, 6 and 8, head_dim 256 (Qwen3.5 / Qwen3-Next full attention); some head_dim-128
shapes again on each A/B entry point (`qreg`: Q in registers, `wide`: 128-key tiles).

The kernel rounds each probability to bf16 before the PV product (as FlashAttention and
PyTorch's SDPA do) while the row sum is summed from the f32 probabilities, so an output
moves by at most 2^-9 (bf16's relative rounding bound) times the largest |v| it averages
over: that bound is added to the oracle's and the host reference's absolute tolerances.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...core.numerics import bf16_bits_to_f32
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, attention
from ..ops.attention_sm90 import PrefillPartials, split_plan
from ..ops.routes import KernelRoutes
from .attention import Geometry, prefill_case

#: bf16's relative rounding bound: |bf16(p) - p| <= 2^-9 p
BF16_ROUNDING = 2.0 ** -9
#: (token, split) pairs a split case's partial buffers hold per token of its longest chunk
SPLIT_CASE_MAX_SPLITS = 16


def probability_rounding_tol(v_cache: np.ndarray) -> float:
    """The most a bf16-rounded P moves an output: 2^-9 * max |v| over the owned slots."""
    v = bf16_bits_to_f32(v_cache).astype(np.float64)
    return BF16_ROUNDING * float(np.nanmax(np.abs(v)))


def sm90_prefill_case(rng: np.random.Generator, name: str, g: Geometry, q_lens: list[int],
                      kv_lens: list[int], variant: str = "", window: int = 0,
                      split_min_tiles: int = 0) -> KernelCase:
    """cases/attention.prefill_case launched with `sm90=True` (on the A/B entry point
    `variant` where given; `window` its sliding window), tolerances widened by the bf16
    probability rounding bound. `split_min_tiles` > 0: on the split entry (with that
    routes.prefill_attn_split_min_tiles), its partial buffers NaN-filled; the launch fails
    where split_plan would not take it."""
    case = prefill_case(rng, name + (f" {variant}" if variant else ""), g, q_lens, kv_lens,
                        window)
    num_seqs, max_blocks = len(q_lens), case.inputs["block_tables"].shape[1]
    p_tol = probability_rounding_tol(case.inputs["v_cache"])
    slots = num_seqs * max(q_lens) * SPLIT_CASE_MAX_SPLITS
    if split_min_tiles:
        case.inputs["part_o"] = np.full((slots, g.hq, g.head_dim), np.nan, np.float32)
        case.inputs["part_ml"] = np.full((slots, g.hq, 2), np.nan, np.float32)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        routes = dataclasses.replace(KernelRoutes.from_env(), prefill_attn_qreg=variant == "qreg",
                                     prefill_attn_wide=variant == "wide",
                                     prefill_attn_split=split_min_tiles > 0,
                                     prefill_attn_split_min_tiles=max(split_min_tiles, 1))
        kc = KernelCache(backend, routes)
        partials = None
        if split_min_tiles:
            partials = PrefillPartials(p["part_o"], p["part_ml"], slots)
            if split_plan(g.hq, g.hkv, g.head_dim, max(q_lens), max(kv_lens), num_seqs,
                          kc.facts.sm_count, slots, split_min_tiles) is None:
                raise AssertionError(f"{name}: the split entry would not run this shape")
        attention.prefill_attention(
            kc, stream, p["q"], p["k_cache"], p["v_cache"],
            p["block_tables"], p["cu_q"], p["kv_lens"], p["out"], num_seqs, g.hq, g.hkv,
            g.head_dim, g.block_size, max_blocks, g.scale, max(q_lens), sm90=True,
            window=window, proj_dim=g.proj, max_kv_len=max(kv_lens), partials=partials)

    spec = case.outputs["out"]
    atol, rtol = spec.tol
    outputs = {"out": OutputSpec(spec.dtype, spec.shape, (atol + p_tol, rtol))}
    return dataclasses.replace(case, module="attention_sm90", run=run, outputs=outputs,
                               reference_abs_tol=case.reference_abs_tol + p_tol)


#: (name, geometry, q_lens, kv_lens)
SM90_PREFILL_SHAPES = [
    ("prefill sm90 gqa4 bs16 mixed", Geometry(8, 2, 128, 16), [5, 70, 1], [5, 100, 37]),
    ("prefill sm90 mha bs7 three tiles", Geometry(4, 4, 128, 7), [130], [130]),
    ("prefill sm90 qwen3-8b heads", Geometry(32, 8, 128, 16), [96], [96]),
    ("prefill sm90 gqa2 bs16 deep history", Geometry(4, 2, 128, 16), [64, 9], [1000, 700]),
    ("prefill sm90 gqa8 bs16 two seqs", Geometry(16, 2, 128, 16), [100, 3], [300, 3]),
    ("prefill sm90 gqa6 bs16 two blocks offset", Geometry(6, 1, 128, 16), [300, 40],
     [333, 168]),
    ("prefill sm90 D256 gqa8 bs16 mixed", Geometry(16, 2, 256, 16), [70, 1, 130],
     [70, 40, 200]),
    ("prefill sm90 D256 gqa4 bs7 long chunk", Geometry(4, 1, 256, 7), [200, 65], [259, 65]),
    # padded heads at D 128 (out rows of their proj_dim elements: Phi-3-mini's 96, and 112)
    ("prefill sm90 pad96 mha bs16 mixed", Geometry(4, 4, 128, 16, 96), [5, 70, 1],
     [5, 100, 37]),
    ("prefill sm90 pad112 gqa2 bs7 two blocks", Geometry(4, 2, 128, 7, 112), [200, 3],
     [259, 3]),
]


#: (name, geometry, q_lens, kv_lens, window): sliding windows shorter than a tile (the mask
#: at both ends of one tile), of a few tiles starting mid-tile and mid-page, longer than some
#: chunks' histories (those rows see every key), a one-token chunk, D 256
SM90_WINDOW_SHAPES = [
    ("prefill sm90 gqa4 bs16 window 40", Geometry(8, 2, 128, 16), [200, 1, 30], [200, 90, 30],
     40),
    ("prefill sm90 gqa2 bs7 window 300 deep history", Geometry(4, 2, 128, 7), [150, 64],
     [1000, 500], 300),
    ("prefill sm90 D256 gqa8 bs16 window 100", Geometry(16, 2, 256, 16), [130, 1],
     [200, 333], 100),
    ("prefill sm90 pad96 gqa2 bs16 window 40", Geometry(4, 2, 128, 16, 96), [200, 1, 30],
     [200, 90, 30], 40),
]

#: the shapes run again on each A/B entry point (head_dim 128)
SM90_VARIANT_SHAPES = [shape for shape in SM90_PREFILL_SHAPES if shape[0] in (
    "prefill sm90 gqa4 bs16 mixed", "prefill sm90 mha bs7 three tiles",
    "prefill sm90 gqa2 bs16 deep history", "prefill sm90 gqa6 bs16 two blocks offset",
    "prefill sm90 pad96 mha bs16 mixed")]
SM90_VARIANTS = ("qreg", "wide")

#: (name, geometry, q_lens, kv_lens, window, split min tiles): the split entry (short
#: chunks past long histories, split_plan's splits given in the name for an H200's 132 SMs):
#: the warm prefix-cache request's shape (Qwen3-8B heads, GQA-packed rows), again with one
#: key tile a split, two sequences whose packed rows end mid-tile (the shorter history's
#: last splits empty), MHA (no packing) on 7-token pages, D 256 (32-key tiles; the second
#: sequence's splits mostly empty), a sliding window (splits start inside it), padded heads,
#: a chunk of 40 queries whose packed rows take two tiles (rows past the chunk's end)
SM90_SPLIT_SHAPES = [
    ("prefill sm90 split qwen3-8b warm x8 packed", Geometry(32, 8, 128, 16), [24], [1000],
     0, 1),
    ("prefill sm90 split qwen3-8b one tile a split x9 packed", Geometry(32, 8, 128, 16), [24],
     [1100], 0, 1),
    ("prefill sm90 split gqa4 two seqs x6 packed", Geometry(8, 2, 128, 16), [5, 17],
     [700, 300], 0, 1),
    ("prefill sm90 split mha bs7 x4", Geometry(4, 4, 128, 7), [3], [900], 0, 2),
    ("prefill sm90 split D256 gqa8 x8 packed", Geometry(16, 2, 256, 16), [3, 1], [500, 77],
     0, 2),
    ("prefill sm90 split gqa4 window 300 x8 packed", Geometry(8, 2, 128, 16), [10], [900],
     300, 1),
    ("prefill sm90 split pad96 gqa2 x5 packed", Geometry(4, 2, 128, 16, 96), [7], [600], 0, 1),
    ("prefill sm90 split gqa4 two row tiles x7 packed", Geometry(8, 2, 128, 16), [40], [800],
     0, 1),
]


@kernel_cases("attention_sm90")
def sm90_prefill_cases(rng: np.random.Generator) -> list[KernelCase]:
    # the variants are head_dim 128's
    windowed_128 = [shape for shape in SM90_WINDOW_SHAPES if shape[1].head_dim == 128]
    return ([sm90_prefill_case(rng, *shape) for shape in SM90_PREFILL_SHAPES]
            + [sm90_prefill_case(rng, *shape, variant=v) for v in SM90_VARIANTS
               for shape in SM90_VARIANT_SHAPES]
            + [sm90_prefill_case(rng, *shape[:4], window=shape[4])
               for shape in SM90_WINDOW_SHAPES]
            + [sm90_prefill_case(rng, *shape[:4], variant=v, window=shape[4])
               for v in SM90_VARIANTS for shape in windowed_128]
            + [sm90_prefill_case(rng, *shape[:4], window=shape[4], split_min_tiles=shape[5])
               for shape in SM90_SPLIT_SHAPES])
