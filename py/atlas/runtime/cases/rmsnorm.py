"""Check cases for rmsnorm_bf16 / add_rmsnorm_bf16 (and Gemma 3's norm_add_rmsnorm_offset,
gpt-oss's one-rounding entries, the embedding lookup fused into the first norm,
embed_rmsnorm_*): model widths, odd widths, one vector."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, norm
from ..ops.routes import KernelRoutes
from .gemv import random_bf16

#: (rows, dim): one 16-byte vector, SmolLM2 576, Qwen3-8B 4096, a width needing 2 vectors on
#: some threads (8200 = 1025 vectors), odd vector counts, and 256 rows (the last one-vector
#: launch); then rows above ops.norm.RMSNORM_LATENCY_ROWS (up to 4 vectors a thread): 576 =
#: 72 vectors on 32 threads, 8200 with 3 or 4 vectors a thread, a Qwen3-8B 2048-token prefill
SHAPES = [(1, 8), (3, 576), (5, 72), (4, 4096), (2, 8200), (33, 1024), (1, 4096),
          (256, 576), (257, 576), (300, 1024), (257, 8200), (2048, 4096)]
EPS = 1e-6


def normed_f64(r: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """float64 w * bf16(r / sqrt(mean(r^2) + eps)): HF's two roundings, the inner one modelled."""
    inv = 1.0 / np.sqrt((r * r).mean(axis=-1, keepdims=True) + eps)
    return w * round_bf16((r * inv).astype(np.float32)).astype(np.float64)


def offset_normed_f64(r: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """float64 r / sqrt(mean(r^2) + eps) * (1 + w): Qwen3.5's one-rounding form, unrounded."""
    return r / np.sqrt((r * r).mean(axis=-1, keepdims=True) + eps) * (1.0 + w)


def one_round_normed_f64(r: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """float64 w * r / sqrt(mean(r^2) + eps): gpt-oss's one-rounding form, unrounded."""
    return w * (r / np.sqrt((r * r).mean(axis=-1, keepdims=True) + eps))


def _make_oracle(offset: bool, one_round: bool = False):
    norm = one_round_normed_f64 if one_round else offset_normed_f64 if offset else normed_f64

    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        w = bf16_bits_to_f32(inputs["w"]).astype(np.float64)
        if "delta" in inputs:
            delta = bf16_bits_to_f32(inputs["delta"]).astype(np.float64)
            if "w_delta" in inputs:  # the sublayer output's norm, rounded to bf16
                wd = bf16_bits_to_f32(inputs["w_delta"]).astype(np.float64)
                delta = round_bf16(offset_normed_f64(delta, wd, EPS).astype(np.float32))
            total = bf16_bits_to_f32(inputs["residual"]).astype(np.float64) + delta
            r = round_bf16(total.astype(np.float32)).astype(np.float64)
            return {"residual": r, "out": norm(r, w, EPS)}
        return {"out": norm(bf16_bits_to_f32(inputs["x"]).astype(np.float64), w, EPS)}

    return oracle


def _routes(early: bool | None, rows_per_block: int | None,
            late: bool | None = None) -> KernelRoutes:
    """The environment's routes (a device sweep may set ATLAS_NORM_ROWS_PER_BLOCK), with the
    case's early or late trigger and rows a block where it names them."""
    routes = KernelRoutes.from_env()
    if early is not None:
        routes = replace(routes, early_trigger=frozenset({"norm"} if early else ()))
    if late is not None:
        routes = replace(routes, norm_late=late)
    if rows_per_block is not None:
        routes = replace(routes, norm_rows_per_block=rows_per_block)
    return routes


def _case(rng: np.random.Generator, rows: int, dim: int, fused: bool,
          offset: bool = False, early: bool | None = None,
          norm_delta: bool = False, one_round: bool = False,
          rows_per_block: int | None = None, late: bool | None = None) -> KernelCase:
    """`norm_delta`: norm_add_rmsnorm_offset (delta normalized first; offset weights);
    `one_round`: the *_oneround_* entries (gpt-oss); `rows_per_block`: a many-row plain
    launch's blocks loop over that many rows (None: the routes', DEFAULT_NORM_ROWS_PER_BLOCK
    unless the environment says otherwise); `late`: routes.norm_late (the *_late_* entries
    where the trigger is not early)."""
    # zero-centred weights (offset) are small around 0, as Qwen3.5 stores them
    w = rng.normal(0.0, 0.1, dim) if offset else rng.uniform(0.5, 1.5, dim)
    inputs = {"w": f32_to_bf16_bits(w.astype(np.float32))}
    if fused:
        inputs["residual"] = random_bf16(rng, (rows, dim), 4.0)
        inputs["delta"] = random_bf16(rng, (rows, dim), 1.0)
    else:
        inputs["x"] = random_bf16(rng, (rows, dim), 4.0)
    if norm_delta:
        inputs["w_delta"] = f32_to_bf16_bits(rng.normal(0.0, 0.1, dim).astype(np.float32))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend, _routes(early, rows_per_block, late))
        if norm_delta:
            norm.norm_add_rmsnorm(kc, stream, p["residual"], p["delta"], p["w_delta"], p["w"],
                                  p["out"], rows, dim, EPS)
        elif fused:
            norm.add_rmsnorm(kc, stream, p["residual"], p["delta"], p["w"], p["out"], rows, dim,
                             EPS, offset, one_round)
        else:
            norm.rmsnorm(kc, stream, p["x"], p["w"], p["out"], rows, dim, EPS, offset,
                         one_round)

    outputs = {"out": OutputSpec(DType.BF16, (rows, dim))}
    if fused:  # bf16(r + d) is fully determined: no tolerance (but a normalized delta is
        # rounded from f32 sums: an ulp of it, 2^-6 at its largest values (|d| < 4), may move
        # the sum, plus the sum's own rounding)
        outputs["residual"] = OutputSpec(DType.BF16, (rows, dim),
                                         tol=(2.0 ** -6, 2.0 ** -8) if norm_delta else (0.0, 0.0))
    kind = (("norm_" if norm_delta else "") + ("add_rmsnorm" if fused else "rmsnorm")
            + ("_offset" if offset else "") + ("_oneround" if one_round else "")
            + ("_early" if early else "") + ("_late" if late else "")
            + (f"_{rows_per_block}rows" if rows_per_block is not None else ""))
    # the normalized delta's f32 sums run in another order than the host reference's: an ulp
    # of it (2^-6, |d| < 4) can move the residual by that much where the sum cancels
    return KernelCase(f"{kind}_{rows}x{dim}", "rmsnorm", inputs, outputs, run,
                      _make_oracle(offset, one_round),
                      reference_abs_tol=2.0 ** -6 if norm_delta else 0.0)


def _pitched_case(rng: np.random.Generator, rows: int, dim: int, pitch: int,
                  rows_per_block: int | None = None) -> KernelCase:
    """rmsnorm_pitched in place over the first `dim` columns of [rows, pitch] rows: the other
    columns must come back untouched (`rows_per_block` as _case's)."""
    w = f32_to_bf16_bits(rng.uniform(0.5, 1.5, dim).astype(np.float32))
    x = random_bf16(rng, (rows, pitch), 4.0)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        norm.rmsnorm_pitched(KernelCache(backend, _routes(None, rows_per_block)), stream,
                             p["x"], p["w"], p["x"], rows, dim, pitch, EPS)

    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = bf16_bits_to_f32(inputs["x"]).astype(np.float64)
        out[:, :dim] = normed_f64(out[:, :dim], bf16_bits_to_f32(inputs["w"]).astype(
            np.float64), EPS)
        return {"x": out}

    rows_tag = f"_{rows_per_block}rows" if rows_per_block is not None else ""
    return KernelCase(f"rmsnorm_pitched_{rows}x{dim}_of_{pitch}{rows_tag}", "rmsnorm",
                      {"w": w, "x": x},
                      {"x": OutputSpec(DType.BF16, (rows, pitch))}, run, oracle)


def _embed_case(rng: np.random.Generator, rows: int, vocab: int, dim: int, offset: bool = False,
                one_round: bool = False, late: bool = False, scale: float = 1.0) -> KernelCase:
    """embed_rmsnorm: residual = the embedding rows of ids (times `scale`, rounded once; ids
    below 0, at vocab and repeated among them), out = the norm of each (a zero row's is 0)."""
    ids = rng.integers(0, vocab, rows).astype(np.int32)
    if rows > 3:
        ids[1], ids[2], ids[3] = -1, vocab, ids[0]  # below, above, repeated
    w = rng.normal(0.0, 0.1, dim) if offset else rng.uniform(0.5, 1.5, dim)
    inputs = {"ids": ids, "table": random_bf16(rng, (vocab, dim), 2.0),
              "w": f32_to_bf16_bits(w.astype(np.float32))}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend, _routes(None, None, late))
        norm.embed_rmsnorm(kc, stream, p["ids"], p["table"], p["residual"], p["w"], p["out"],
                           rows, dim, vocab, EPS, scale, offset, one_round)

    normed = one_round_normed_f64 if one_round else offset_normed_f64 if offset else normed_f64

    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        table = bf16_bits_to_f32(inputs["table"])
        r = np.stack([table[i] if 0 <= i < vocab else np.zeros(dim, np.float32)
                      for i in inputs["ids"].tolist()])
        r = round_bf16((r * np.float32(scale)).astype(np.float32)).astype(np.float64)
        w64 = bf16_bits_to_f32(inputs["w"]).astype(np.float64)
        return {"residual": r, "out": normed(r, w64, EPS)}

    kind = ("embed_rmsnorm" + ("_offset" if offset else "") + ("_oneround" if one_round else "")
            + ("_late" if late else "") + ("_scaled" if scale != 1.0 else ""))
    return KernelCase(f"{kind}_{rows}x{vocab}x{dim}", "rmsnorm", inputs,
                      {"residual": OutputSpec(DType.BF16, (rows, dim), tol=(0.0, 0.0)),
                       "out": OutputSpec(DType.BF16, (rows, dim))}, run, oracle)


#: (rows, vocab, dim, offset, one-round, late, scale) of embed_rmsnorm: batch 1 at Qwen3-8B's
#: and Qwen3.5's widths (plain and late, (1 + w) and late), a decode batch with out-of-range
#: and repeated ids at an odd width, gpt-oss's one rounding, Gemma 3's bf16 sqrt(1152) = 34,
#: and 256 rows (the most a launch takes)
EMBED_SHAPES = [(1, 50, 4096, False, False, False, 1.0), (1, 50, 4096, False, False, True, 1.0),
                (1, 40, 2048, True, False, False, 1.0), (1, 40, 2048, True, False, True, 1.0),
                (9, 30, 8200, False, False, False, 1.0), (5, 30, 2880, False, True, False, 1.0),
                (4, 30, 1152, True, False, False, 34.0), (256, 300, 1024, False, False, True, 1.0)]


#: (rows, dim, pitch): MiniMax-M2's q (48 x 128) and k (8 x 128) parts of its qkv row in
#: decode and prefill, and a width with a ragged last thread
PITCHED_SHAPES = [(1, 6144, 8192), (4, 1024, 8192), (300, 6144, 8192), (3, 200, 264)]

#: (rows, dim, offset, one-round, rows a block) of the plain entries' row loop: a Qwen3-8B
#: 2,048-token prefill at one row a block (the grid before the loop), 4 and 3 (3: a ragged
#: last block), 257 rows of an odd width on 2, Qwen3.5's and gpt-oss's widths
LOOP_SHAPES = [(2048, 4096, False, False, 1), (2048, 4096, False, False, 4),
               (2048, 4096, False, False, 3),
               (257, 8200, False, False, 2), (300, 2048, True, False, 4),
               (301, 2880, False, True, 5)]
#: the (1 + w) variants: Qwen3.5 hidden 2048 / 4096 rows in decode and prefill, odd widths
OFFSET_SHAPES = [(1, 2048), (3, 72), (300, 2048), (2, 8200)]
#: the one-rounding variants: gpt-oss's hidden 2880 (360 vectors) in decode and prefill, the
#: tiny fixture's 128, an odd width
ONE_ROUND_SHAPES = [(1, 2880), (8, 2880), (300, 2880), (3, 128), (2, 8200)]


@kernel_cases("rmsnorm")
def rmsnorm_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([_case(rng, rows, dim, fused) for rows, dim in SHAPES for fused in (False, True)]
            + [_case(rng, rows, dim, fused, True) for rows, dim in OFFSET_SHAPES
               for fused in (False, True)]
            # the entries letting the next kernel launch before their wait (the same values)
            + [_case(rng, rows, dim, True, offset, early=True)
               for rows, dim, offset in ((1, 4096, False), (300, 2048, True), (1, 2048, True))]
            # Gemma 3's residual step (its widths: 1B 1,152, 4B 2,560)
            + [_case(rng, rows, dim, True, True, norm_delta=True)
               for rows, dim in ((1, 1152), (3, 2560), (300, 1152), (2, 8200))]
            + [_pitched_case(rng, rows, dim, pitch) for rows, dim, pitch in PITCHED_SHAPES]
            + [_case(rng, rows, dim, fused, one_round=True) for rows, dim in ONE_ROUND_SHAPES
               for fused in (False, True)]
            + [_case(rng, 1, 2880, True, early=True, one_round=True)]
            # the entries letting it launch once their rows have landed (the same values)
            + [_case(rng, rows, dim, True, offset, early=False, late=True)
               for rows, dim, offset in ((1, 4096, False), (1, 2048, True), (3, 8200, False))]
            # the plain entries' row loop at set rows a block: one, an even and an odd count,
            # a ragged last block, every plain variant, in place and pitched
            + [_case(rng, rows, dim, False, offset, one_round=one_round, rows_per_block=per)
               for rows, dim, offset, one_round, per in LOOP_SHAPES]
            + [_pitched_case(rng, 300, 6144, 8192, rows_per_block=3)]
            + [_embed_case(rng, *shape) for shape in EMBED_SHAPES])
