"""Check cases for the verification decode attention (module attention_verify, hopper).

A step is a list of sequences, each feeding `drafts + 1` consecutive rows (a verification:
row j at position history + j sees history + j + 1 keys) or one row (drafts 0: a plain
decode row beside them), every row with its own copy of its sequence's block-table row, as
the runner packs a verification step. The paged cache is cases/attention.paged_cache's:
shuffled block ids (tables full of holes), NaN in every slot no sequence owns; the partial
buffers start as NaN too, so a merge reading a partial nobody wrote fails on `out`. The
float64 oracle attends each row over its own keys, gathered slot by slot. Launched twice:
the split tickets must be zero again after each launch.

Shapes: batch 1 and 4; K 1..7; groups 1, 2, 4, 8, 16 and 64 (four m16 tiles of heads, one
row a block) and groups x rows beyond one block (pieces); D 64, 128 and 256; contexts 1 to
4,096 keys; split counts 1 to 33 (rows of one and of several active splits in one piece,
and rows of one piece on different chunk sizes); neighbours that must not be taken for one
sequence (a plain row whose kv_len is one less than the next sequence's first row's; a
sequence sharing its first blocks with the one before, as a prefix-cache hit); padding
rows (kv_len 1 on a shared block). The kernel rounds each probability to bf16 for the PV
product (cases/attention_sm90.probability_rounding_tol), added to the output tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, rope
from ..ops.attention_verify import (VERIFY_TILE_KEYS, decode_attention_verify,
                                    decode_attention_verify_cluster,
                                    decode_attention_verify_rope)
from .attention import ATTN_TOL, Geometry, _softmax_rows, paged_cache
from .attention_sm90 import probability_rounding_tol
from .gemv import random_bf16
from .rope_kv import EPS, cos_sin_table, head_norm, rb, rotate

#: a sequence of a step: (history keys before its first row, drafts); drafts 0 is a plain row
Seq = tuple[int, int]


def step_rows(seqs: list[Seq]) -> tuple[list[int], list[int]]:
    """(owner sequence, kv_len) of every row of the step, in order."""
    owner, lens = [], []
    for s, (history, drafts) in enumerate(seqs):
        for j in range(drafts + 1):
            owner.append(s)
            lens.append(history + j + 1)
    return owner, lens


def verify_case(rng: np.random.Generator, name: str, g: Geometry, seqs: list[Seq],
                num_splits: int, share_prefix: bool = False, window: int = 0,
                min_chunk: int = VERIFY_TILE_KEYS) -> KernelCase:
    """The rows of `seqs` on a num_splits grid. `share_prefix`: every sequence's first
    block-table entry is the first sequence's (their first keys are its keys: a prefix-cache
    hit), which must not make their rows one run. `window`: the launch's rows per block
    (default: the most rows of one sequence, as the model launches it). `min_chunk`: the
    fewest keys a split takes (ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS)."""
    owner, lens = step_rows(seqs)
    rows = len(lens)
    inputs = paged_cache(rng, [h + d + 1 for h, d in seqs], g)
    tables = inputs.pop("block_tables")
    if share_prefix:
        tables[1:, 0] = tables[0, 0]
    inputs["block_tables"] = tables[owner]
    inputs["kv_lens"] = np.asarray(lens, np.int32)
    inputs["q"] = random_bf16(rng, (rows, g.hq, g.head_dim), 2.0)
    inputs["counters"] = np.zeros((rows, g.hkv), np.int32)
    inputs["part_o"] = np.full((rows, g.hq, num_splits, g.head_dim), np.nan, np.float32)
    inputs["part_ml"] = np.full((rows, g.hq, num_splits, 2), np.nan, np.float32)
    max_blocks = tables.shape[1]
    window = window or 1 + max(d for _, d in seqs)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        for _ in range(2):
            decode_attention_verify(KernelCache(backend), stream, p["q"], p["k_cache"],
                                    p["v_cache"], p["block_tables"], p["kv_lens"],
                                    p["part_o"], p["part_ml"], p["counters"], p["out"], rows,
                                    g.hq, g.hkv, g.head_dim, g.block_size, max_blocks,
                                    num_splits, g.scale, rows_per_block=window,
                                    min_chunk=min_chunk)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        q = bf16_bits_to_f32(x["q"]).astype(np.float64)
        kf = bf16_bits_to_f32(x["k_cache"]).astype(np.float64).reshape(
            -1, g.hkv, g.block_size, g.head_dim)
        vf = bf16_bits_to_f32(x["v_cache"]).astype(np.float64).reshape(
            -1, g.hkv, g.block_size, g.head_dim)
        out = np.zeros_like(q)
        group = g.hq // g.hkv
        for r, n in enumerate(lens):
            pos = np.arange(n)
            blocks = x["block_tables"][r][pos // g.block_size]
            k = kf[blocks, :, pos % g.block_size]                 # [n, hkv, D], slot by slot
            v = vf[blocks, :, pos % g.block_size]
            qg = q[r].reshape(g.hkv, group, g.head_dim)
            s = np.einsum("kgd,nkd->kgn", qg, k) * g.scale       # [hkv, group, n]
            out[r] = np.einsum("kgn,nkd->kgd", _softmax_rows(s), v).reshape(g.hq, g.head_dim)
        return {"out": out, "counters": np.zeros((rows, g.hkv))}

    atol, rtol = ATTN_TOL
    p_tol = probability_rounding_tol(inputs["v_cache"])
    outputs = {"out": OutputSpec(DType.BF16, (rows, g.hq, g.head_dim), (atol + p_tol, rtol)),
               "counters": OutputSpec(DType.I32, (rows, g.hkv))}
    return KernelCase(name, "attention_verify", inputs, outputs, run, oracle,
                      reference_abs_tol=p_tol, graph=True)


#: (name, geometry, sequences, num_splits, share_prefix[, window[, min_chunk]])
VERIFY_SHAPES = [
    # Qwen3-8B batch 1, K = 3 at 512 keys on batch 1's 33 splits: one m16 tile (4 x 4 rows),
    # 8 active 64-key splits merged by the last
    ("verify D128 gqa4 b1 K3 ctx512 splits33", Geometry(32, 8, 128, 16), [(509, 3)], 33, False),
    # the same, short (one split: written directly) and 4,096 keys (64 x 64-key splits
    # would exceed 33: 2-tile splits)
    ("verify D128 gqa4 b1 K3 ctx1 splits33", Geometry(32, 8, 128, 16), [(0, 3)], 33, False),
    ("verify D128 gqa4 b1 K3 ctx4096 splits33", Geometry(32, 8, 128, 16), [(4093, 3)], 33,
     False),
    # batch 4, K = 1..4 mixed with a plain row, 9 splits: a row at 575 keys (chunk 64) and its
    # next at 577 (chunk 128) in one piece; the plain row's kv_len (1,001) is one less than
    # the next sequence's first row's (1,002): two sequences, not one run
    ("verify D128 gqa4 b4 mixed splits9", Geometry(32, 8, 128, 16),
     [(574, 2), (1000, 0), (1001, 4), (63, 1)], 9, False),
    # prefix-cache hit: three sequences share their first block and have consecutive kv_lens
    ("verify D128 gqa2 b3 shared prefix splits4", Geometry(16, 8, 128, 16),
     [(40, 0), (41, 0), (42, 2)], 4, True),
    # K = 7 at group 8 (two m16 tiles: 64 rows) and group 1 (8 rows), one long split each
    ("verify D128 gqa8 b1 K7 splits1", Geometry(32, 4, 128, 16), [(700, 7)], 1, False),
    ("verify D128 mha b2 K7 bs7 splits3", Geometry(4, 4, 128, 7), [(300, 7), (99, 5)], 3,
     False),
    # group 16 at K = 7: 128 tile rows, two pieces of 4 rows (64 tile rows each)
    ("verify D64 gqa16 b1 K7 splits5", Geometry(16, 1, 64, 32), [(333, 7)], 5, False),
    # group 64: one row per block, four m16 tiles of heads
    ("verify D64 gqa64 b1 K2 splits2", Geometry(64, 1, 64, 16), [(150, 2)], 2, False),
    # D 256 (2-stage ring), Qwen3.5's heads (group 8), K = 3 (32 rows: two tiles), batch 4
    ("verify D256 gqa8 b4 K3 splits8", Geometry(16, 2, 256, 16),
     [(1, 3), (2000, 3), (64, 3), (127, 0)], 8, False),
    # D 256, group 4 (16 rows: one tile), 4,096 keys on 16 splits (4-tile splits)
    ("verify D256 gqa4 b1 K3 splits16", Geometry(16, 4, 256, 16), [(4092, 3)], 16, False),
    # padding rows after the step (kv_len 1 each, one block), K = 1, group 3
    ("verify D128 gqa3 b1 K1 padding splits2", Geometry(6, 2, 128, 16),
     [(45, 1), (0, 0), (0, 0)], 2, False),
    # windows that cut pieces: one row a block, and 3 rows a block over 5- and 3-row pieces
    # beside plain rows (pieces start mid-window, run past its end, windows of plain rows)
    ("verify D128 gqa4 b4 mixed splits9 window1", Geometry(32, 8, 128, 16),
     [(574, 2), (1000, 0), (1001, 4), (63, 1)], 9, False, 1),
    ("verify D128 gqa4 b5 mixed splits6 window3", Geometry(32, 8, 128, 16),
     [(200, 4), (80, 0), (81, 0), (300, 2), (17, 0)], 6, False, 3),
    # splits of at least 2 and 4 tiles (ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS=128 / 256): Qwen3-8B
    # K = 3 at 512 keys in 4 two-tile / 2 four-tile splits, at 4,096 keys (256: 16 splits
    # of 4 tiles instead of 32 of 2), a row of 511 keys and its next of 512 in one piece
    # (chunks of 256 leave the first's second split 255 keys), and the mixed batch whose
    # rows take chunks of 128 and of 192 keys in one piece (9 splits, min 128)
    ("verify D128 gqa4 b1 K3 ctx512 splits33 min128", Geometry(32, 8, 128, 16), [(509, 3)],
     33, False, 0, 128),
    ("verify D128 gqa4 b1 K3 ctx512 splits33 min256", Geometry(32, 8, 128, 16), [(509, 3)],
     33, False, 0, 256),
    ("verify D128 gqa4 b1 K3 ctx4096 splits33 min256", Geometry(32, 8, 128, 16), [(4093, 3)],
     33, False, 0, 256),
    ("verify D128 gqa4 b1 K3 ctx511 splits19 min256", Geometry(32, 8, 128, 16), [(510, 3)],
     19, False, 0, 256),
    ("verify D128 gqa4 b4 mixed splits9 min128", Geometry(32, 8, 128, 16),
     [(574, 2), (1000, 0), (1001, 4), (63, 1)], 9, False, 0, 128),
    ("verify D256 gqa8 b4 K3 splits8 min128", Geometry(16, 2, 256, 16),
     [(1, 3), (2000, 3), (64, 3), (127, 0)], 8, False, 0, 128),
]


@kernel_cases("attention_verify")
def verify_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [verify_case(rng, *shape) for shape in VERIFY_SHAPES]


# ---- the rope entry point (decode_attn_verify_rope_bf16) ------------------------------------
def _rope_step(rng: np.random.Generator, g: Geometry, seqs: list[Seq], normed: bool, pad: int
               ) -> tuple[dict[str, np.ndarray], list[int], Any, float]:
    """A step of `seqs` fed from qkv rows (the last `pad` sequences padding rows, slot -1: no
    append, the cache as it is): (inputs, kv_lens, oracle, the probability rounding's
    tolerance). The float64 oracle norms and rotates (cases/rope_kv.py's roundings), appends
    and attends each row over its own keys; it returns out, q and the caches."""
    owner, lens = step_rows(seqs)
    rows, d = len(lens), g.head_dim
    inputs = paged_cache(rng, [h + k + 1 for h, k in seqs], g)
    tables = inputs.pop("block_tables")
    inputs["block_tables"] = tables[owner]
    inputs["kv_lens"] = np.asarray(lens, np.int32)
    slots = np.array([tables[o, (n - 1) // g.block_size] * g.block_size + (n - 1) % g.block_size
                      for o, n in zip(owner, lens)], np.int32)
    slots[[r for r, o in enumerate(owner) if o >= len(seqs) - pad]] = -1
    inputs.update(qkv=random_bf16(rng, (rows, (g.hq + 2 * g.hkv) * d), 3.0),
                  cos_sin=cos_sin_table(d, max(lens)), slots=slots,
                  positions=np.asarray(lens, np.int32) - 1)
    if normed:
        for w in ("q_norm_w", "k_norm_w"):
            inputs[w] = f32_to_bf16_bits(rng.uniform(0.5, 1.5, d).astype(np.float32))

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        qkv = bf16_bits_to_f32(x["qkv"]).astype(np.float64)
        q = qkv[:, :g.hq * d].reshape(rows, g.hq, d)
        k = qkv[:, g.hq * d:(g.hq + g.hkv) * d].reshape(rows, g.hkv, d)
        v = qkv[:, (g.hq + g.hkv) * d:].reshape(rows, g.hkv, d)
        if normed:
            q = head_norm(q, bf16_bits_to_f32(x["q_norm_w"]).astype(np.float64))
            k = head_norm(k, bf16_bits_to_f32(x["k_norm_w"]).astype(np.float64))
        table = x["cos_sin"][x["positions"]].astype(np.float64)
        cos, sin = rb(table[:, None, :d // 2]), rb(table[:, None, d // 2:])
        q, k = rb(rotate(q, cos, sin)), rb(rotate(k, cos, sin))  # stored as bf16
        kc = bf16_bits_to_f32(x["k_cache"]).astype(np.float64)
        vc = bf16_bits_to_f32(x["v_cache"]).astype(np.float64)
        for r, slot in enumerate(x["slots"]):
            if slot >= 0:
                kc[slot // g.block_size, :, slot % g.block_size] = k[r]
                vc[slot // g.block_size, :, slot % g.block_size] = v[r]
        out = np.zeros_like(q)
        group = g.hq // g.hkv
        for r, n in enumerate(lens):
            pos = np.arange(n)
            blocks = x["block_tables"][r][pos // g.block_size]
            keys, vals = kc[blocks, :, pos % g.block_size], vc[blocks, :, pos % g.block_size]
            s = np.einsum("kgd,nkd->kgn", q[r].reshape(g.hkv, group, d), keys) * g.scale
            out[r] = np.einsum("kgn,nkd->kgd", _softmax_rows(s), vals).reshape(g.hq, d)
        return {"out": out, "q": q, "k_cache": kc, "v_cache": vc}

    # the rows attend the cache's values and the step's own v (qkv's v heads, up to 3.0:
    # gpu22 put one output of the ctx1 case 0.0034 from the oracle, under 2^-9 x 3)
    p_tol = probability_rounding_tol(np.concatenate(
        [inputs["v_cache"].ravel(), inputs["qkv"][:, (g.hq + g.hkv) * d:].ravel()]))
    return inputs, lens, oracle, p_tol


def _cache_outputs(inputs: dict[str, np.ndarray]) -> tuple[dict[str, OutputSpec],
                                                           dict[str, np.ndarray]]:
    """The caches as outputs (v bit for bit) and the slots they are compared on: those some
    sequence owns (the rest are NaN, never written)."""
    cache_shape = inputs["k_cache"].shape
    owned = ~np.isnan(bf16_bits_to_f32(inputs["k_cache"]))
    return ({"k_cache": OutputSpec(DType.BF16, cache_shape),
             "v_cache": OutputSpec(DType.BF16, cache_shape, tol=(0.0, 0.0))},
            {"k_cache": owned, "v_cache": owned})


def verify_rope_case(rng: np.random.Generator, name: str, g: Geometry, seqs: list[Seq],
                     num_splits: int, normed: bool = True, pad: int = 0,
                     min_chunk: int = VERIFY_TILE_KEYS) -> KernelCase:
    """The rows of `seqs` from their qkv rows (`_rope_step`): the kernel norms and rotates q
    into the q buffer and each row's k (and its v) into the caches at its slot, then attends.
    Launched twice (the tickets reset, the same rows rewritten), then its unfused twin
    (qk_norm_rope_kv, then decode_attention_verify) into `out_unfused` and `q_unfused`: the
    same bits."""
    inputs, lens, step_oracle, p_tol = _rope_step(rng, g, seqs, normed, pad)
    rows, d = len(lens), g.head_dim
    inputs["counters"] = np.zeros((rows, g.hkv), np.int32)
    inputs["part_o"] = np.full((rows, g.hq, num_splits, d), np.nan, np.float32)
    inputs["part_ml"] = np.full((rows, g.hq, num_splits, 2), np.nan, np.float32)
    max_blocks = inputs["block_tables"].shape[1]
    window = 1 + max(k for _, k in seqs)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        geometry = (rows, g.hq, g.hkv, d, g.block_size, max_blocks, num_splits, g.scale)
        for _ in range(2):
            decode_attention_verify_rope(
                kc, stream, p["qkv"], p["q"], p["k_cache"], p["v_cache"], p.get("q_norm_w", 0),
                p.get("k_norm_w", 0), p["cos_sin"], p["positions"], p["slots"],
                p["block_tables"], p["kv_lens"], p["part_o"], p["part_ml"], p["counters"],
                p["out"], *geometry, EPS, rows_per_block=window, min_chunk=min_chunk)
        rope.qk_norm_rope_kv(kc, stream, p["qkv"], p["q_unfused"], p["k_cache"], p["v_cache"],
                             p.get("q_norm_w", 0), p.get("k_norm_w", 0), p["cos_sin"],
                             p["positions"], p["slots"], rows, g.hq, g.hkv, d, g.block_size,
                             EPS)
        decode_attention_verify(kc, stream, p["q_unfused"], p["k_cache"], p["v_cache"],
                                p["block_tables"], p["kv_lens"], p["part_o"], p["part_ml"],
                                p["counters"], p["out_unfused"], *geometry,
                                rows_per_block=window, min_chunk=min_chunk)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        want = step_oracle(x)
        return {**want, "out_unfused": want["out"], "q_unfused": want["q"],
                "counters": np.zeros((rows, g.hkv))}

    atol, rtol = ATTN_TOL
    out_spec = OutputSpec(DType.BF16, (rows, g.hq, d), (atol + p_tol, rtol))
    caches, owned = _cache_outputs(inputs)
    outputs = {"out": out_spec, "out_unfused": out_spec,
               "q": OutputSpec(DType.BF16, (rows, g.hq, d)),
               "q_unfused": OutputSpec(DType.BF16, (rows, g.hq, d)),
               **caches, "counters": OutputSpec(DType.I32, (rows, g.hkv))}
    return KernelCase(name, "attention_verify", inputs, outputs, run, oracle, owned,
                      reference_abs_tol=p_tol,
                      same_bits=(("out", "out_unfused"), ("q", "q_unfused")))


#: (name, geometry, sequences, num_splits[, normed, pad, min_chunk]) of the rope entry point
VERIFY_ROPE_SHAPES = [
    # Qwen3-8B batch 1, K = 3 at 512 keys (the step's 4 keys in the last one-tile split)
    ("verify rope D128 gqa4 b1 K3 ctx512 splits33", Geometry(32, 8, 128, 16), [(509, 3)], 33),
    # the 4 keys across a split boundary (rows of 511..514 keys: 64-key splits 7 and 8) and
    # a block boundary; first tokens (keys 1..4: one split)
    ("verify rope D128 gqa4 b1 K3 ctx511 splits33", Geometry(32, 8, 128, 16), [(510, 3)], 33),
    ("verify rope D128 gqa4 b1 K3 ctx1 splits33", Geometry(32, 8, 128, 16), [(0, 3)], 33),
    # batch 4 mixed with a plain row, 9 splits; splits of >= 256 keys (the keys in the last
    # tile of a 4-tile split)
    ("verify rope D128 gqa4 b4 mixed splits9", Geometry(32, 8, 128, 16),
     [(574, 2), (1000, 0), (1001, 4), (63, 1)], 9),
    ("verify rope D128 gqa4 b1 K3 ctx1000 splits33 min256", Geometry(32, 8, 128, 16),
     [(997, 3)], 33, True, 0, 256),
    # group 16 at K = 7: two pieces of 4 rows, the second's blocks write the first's keys too
    ("verify rope D64 gqa16 b1 K7 splits5", Geometry(16, 1, 64, 32), [(333, 7)], 5),
    # no q/k norm (Llama), D 64, group 3, odd block size; padding rows after the step
    ("verify rope D64 gqa3 no-norm bs7 pad", Geometry(9, 3, 64, 7),
     [(40, 2), (0, 0), (0, 0)], 4, False, 2),
    # D 256 (2-stage ring), group 8, batch 2
    ("verify rope D256 gqa8 b2 K3 splits8", Geometry(16, 2, 256, 16), [(2000, 3), (64, 3)], 8),
]


@kernel_cases("attention_verify")
def verify_rope_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [verify_rope_case(rng, *shape) for shape in VERIFY_ROPE_SHAPES]


# ---- the clustered entry point (decode_attn_verify_cluster_bf16) ----------------------------
#: `cuts` of verify_cluster_case: every row launched as a step of its own
PER_ROW = (-1,)


def verify_cluster_case(rng: np.random.Generator, name: str, g: Geometry, seqs: list[Seq],
                        normed: bool = True, pad: int = 0, window: int = 0,
                        cuts: tuple[int, ...] = (), slot_rows: int = 0) -> KernelCase:
    """The rows of `seqs` from their qkv rows (`_rope_step`) on the clustered entry: each
    row's k and v appended at its slot, each row attending its own keys, one cluster per
    (kv head, piece, m16 tile). Launched twice (the same rows rewritten: a second launch
    reads the keys the first appended, and must compute the same). `window`: rows per
    cluster (default: the most rows of one sequence, as the model launches it). `cuts` (one
    sequence; PER_ROW: every row): then the step launched again as the steps [0, c1),
    [c1, c2), ..., [c_last, rows) into out_split, which must hold out's bits: a row computes
    the same whichever rows share its step and however many m16 tiles the step's rows x q
    heads fill (a speculative step's row j and the step after's row 0 at that position, a
    K = 4 step of Qwen3-8B, two tiles, and a plain decode row of the same kernel, one; the
    pieces' last rows take other key partitions than the whole step's). `slot_rows` > 0:
    the launches' tile slots sized for pieces of that many rows (ops/attention_verify.
    cluster_tile_slots), fewer than the step's: a cluster then serves several of a piece's
    tiles in turn (as under ATLAS_DECODE_ATTN_VERIFY_TILE_CLUSTERS=0 with one slot)."""
    inputs, lens, step_oracle, p_tol = _rope_step(rng, g, seqs, normed, pad)
    rows, d = len(lens), g.head_dim
    max_blocks = inputs["block_tables"].shape[1]
    step_rows = 1 + max(k for _, k in seqs)
    window = window or step_rows
    cuts = tuple(range(1, rows)) if cuts == PER_ROW else cuts
    if cuts and (len(seqs) != 1 or list(cuts) != sorted(set(cuts))
                 or not 0 < cuts[0] <= cuts[-1] < rows):
        raise ValueError(f"{name}: cuts={cuts} need one sequence of more rows, increasing")

    def launch(kc: KernelCache, stream: Stream, p: dict[str, DevicePtr], out: DevicePtr,
               first: int, count: int, rows_per_block: int) -> None:
        """Rows [first, first + count) as one launch (a sequence's rows at most step_rows)."""
        qkv_row, i32 = (g.hq + 2 * g.hkv) * d * 2, 4
        decode_attention_verify_cluster(
            kc, stream, p["qkv"] + first * qkv_row, p["k_cache"], p["v_cache"],
            p.get("q_norm_w", 0), p.get("k_norm_w", 0), p["cos_sin"],
            p["positions"] + first * i32, p["slots"] + first * i32,
            p["block_tables"] + first * max_blocks * i32, p["kv_lens"] + first * i32,
            out + first * g.hq * d * 2, count, g.hq, g.hkv, d, g.block_size, max_blocks,
            g.scale, EPS, rows_per_block=rows_per_block,
            step_rows=min(slot_rows or step_rows, count))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        for _ in range(2):
            launch(kc, stream, p, p["out"], 0, rows, window)
        bounds = (0, *cuts, rows) if cuts else ()
        for first, stop in zip(bounds, bounds[1:]):
            launch(kc, stream, p, p["out_split"], first, stop - first, stop - first)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        want = step_oracle(x)
        return {"out": want["out"], "out_split": want["out"], "k_cache": want["k_cache"],
                "v_cache": want["v_cache"]}

    atol, rtol = ATTN_TOL
    caches, owned = _cache_outputs(inputs)
    out_spec = OutputSpec(DType.BF16, (rows, g.hq, d), (atol + p_tol, rtol))
    outputs = {"out": out_spec, **({"out_split": out_spec} if cuts else {}), **caches}
    return KernelCase(name, "attention_verify", inputs, outputs, run, oracle, owned,
                      reference_abs_tol=p_tol,
                      same_bits=(("out", "out_split"),) if cuts else ())


#: (name, geometry, sequences[, normed, pad, window, cuts, slot_rows]) of the clustered entry:
#: K = 1..4
#: at the contexts that put the step's keys at a block's start, end and across blocks
#: (64 ceil(L / 512) keys a block), one to several 64-key tiles a block; GQA 4 and 8, D 128, 256
VERIFY_CLUSTER_SHAPES = [
    # Qwen3-8B batch 1, K = 3 at 512 keys (513..516 keys: 128 a block, two tiles, blocks 0-4)
    ("verify cluster D128 gqa4 b1 K3 ctx512", Geometry(32, 8, 128, 16), [(512, 3)]),
    # K = 1..4 at 1, 63, 64, 65 keys of history (the step's keys in one or two blocks)
    ("verify cluster D128 gqa4 b1 K1 ctx1", Geometry(32, 8, 128, 16), [(1, 1)]),
    ("verify cluster D128 gqa4 b1 K2 ctx63", Geometry(32, 8, 128, 16), [(63, 2)]),
    ("verify cluster D128 gqa4 b1 K3 ctx64", Geometry(32, 8, 128, 16), [(64, 3)]),
    ("verify cluster D128 gqa4 b1 K4 ctx65", Geometry(32, 8, 128, 16), [(65, 4)]),
    # no history at all (row 0 of the step sees only its own key); 2,000 keys (4 tiles a block)
    ("verify cluster D128 gqa4 b1 K3 ctx0", Geometry(32, 8, 128, 16), [(0, 3)]),
    ("verify cluster D128 gqa4 b1 K3 ctx2000", Geometry(32, 8, 128, 16), [(2000, 3)]),
    # GQA 8 (32 tile rows: two m16 tiles), Qwen3.5's D 256 (2-stage ring) at 512 and 2,000
    ("verify cluster D128 gqa8 b1 K3 ctx512", Geometry(32, 4, 128, 16), [(512, 3)]),
    ("verify cluster D256 gqa8 b1 K3 ctx512", Geometry(16, 2, 256, 16), [(512, 3)]),
    ("verify cluster D256 gqa4 b1 K4 ctx2000", Geometry(16, 4, 256, 16), [(2000, 4)]),
    ("verify cluster D256 gqa8 b1 K1 ctx63", Geometry(16, 2, 256, 16), [(63, 1)]),
    # no q/k norm, D 64, odd block size, padding rows after the step (a window of 3 rows of
    # the sequence, then 2 padding rows: pieces of one row each, in the next window)
    ("verify cluster D64 gqa3 no-norm bs7 pad", Geometry(9, 3, 64, 7),
     [(40, 2), (0, 0), (0, 0)], False, 2),
    # batch 4 mixed with a plain row (several pieces a window, a run across windows)
    ("verify cluster D128 gqa4 b4 mixed", Geometry(32, 8, 128, 16),
     [(574, 2), (1000, 0), (1001, 4), (63, 1)]),
    ("verify cluster D128 gqa4 b4 mixed window3", Geometry(32, 8, 128, 16),
     [(574, 2), (1000, 0), (1001, 4), (63, 1)], True, 0, 3),
    # group 16 at K = 7: two pieces of 4 rows, the second's blocks write the first's keys too
    ("verify cluster D64 gqa16 b1 K7", Geometry(16, 1, 64, 32), [(333, 7)]),
    # row invariance (out_split: the step launched as two steps must give the same bits),
    # where the step's rows straddle a change of the key partition (a multiple of 512 keys):
    # rows at 510..513 keys split 3 + 1, 1022..1025 split 2 + 2, D 256 at 1534..1537
    ("verify cluster D128 gqa4 b1 K3 ctx509 split3", Geometry(32, 8, 128, 16), [(509, 3)],
     True, 0, 0, (3,)),
    ("verify cluster D128 gqa4 b1 K3 ctx1021 split2", Geometry(32, 8, 128, 16), [(1021, 3)],
     True, 0, 0, (2,)),
    ("verify cluster D256 gqa4 b1 K3 ctx1533 split1", Geometry(16, 4, 256, 16), [(1533, 3)],
     True, 0, 0, (1,)),
    # tile-count invariance: every row of a K-draft step equals, bit for bit, the same row
    # launched alone (a plain decode row of this kernel: one m16 tile up to group 16), for
    # K = 1..7 on Qwen3-8B's heads (group 4: 8..32 tile rows, one or two tiles) and on group
    # 8 (16..64: one to four tiles), at contexts whose rows cross a change of the key
    # partition (multiples of 512 keys) or start a block's range (multiples of 64)
    *((f"verify cluster D128 gqa4 b1 K{k} ctx{h} per-row", Geometry(32, 8, 128, 16),
       [(h, k)], True, 0, 0, PER_ROW)
      for k, h in ((1, 511), (2, 100), (3, 1022), (4, 509), (5, 64), (6, 1530), (7, 1020))),
    *((f"verify cluster D128 gqa8 b1 K{k} ctx{h} per-row", Geometry(32, 4, 128, 16),
       [(h, k)], True, 0, 0, PER_ROW)
      for k, h in ((1, 0), (2, 511), (3, 1021), (4, 63), (5, 2044), (6, 300), (7, 508))),
    # Qwen3-8B's K = 4 step (two tiles) cut as K = 3 + a plain row (one tile each), and
    # Qwen3.5's heads (D 256, group 8) at K = 4: 40 tile rows, three tiles, per row
    ("verify cluster D128 gqa4 b1 K4 ctx1020 split4", Geometry(32, 8, 128, 16), [(1020, 4)],
     True, 0, 0, (4,)),
    ("verify cluster D256 gqa8 b1 K4 ctx1530 per-row", Geometry(16, 2, 256, 16), [(1530, 4)],
     True, 0, 0, PER_ROW),
    # group 16 at K = 7: two pieces of four tiles (4 rows x 16 heads) vs 8 one-tile steps
    ("verify cluster D64 gqa16 b1 K7 ctx333 per-row", Geometry(16, 1, 64, 32), [(333, 7)],
     True, 0, 0, PER_ROW),
    # tiles in turn: one slot (K = 4 of Qwen3-8B, two tiles on one cluster a kv head; group
    # 16's pieces of four), two slots for group 8's four tiles (tiles 0, 2 and 1, 3), and a
    # mixed batch whose five-row piece's second tile follows its first
    ("verify cluster D128 gqa4 b1 K4 ctx509 per-row in-turn", Geometry(32, 8, 128, 16),
     [(509, 4)], True, 0, 0, PER_ROW, 1),
    ("verify cluster D128 gqa8 b1 K7 ctx1020 per-row slots2", Geometry(32, 4, 128, 16),
     [(1020, 7)], True, 0, 0, PER_ROW, 3),
    ("verify cluster D64 gqa16 b1 K7 ctx333 per-row in-turn", Geometry(16, 1, 64, 32),
     [(333, 7)], True, 0, 0, PER_ROW, 1),
    ("verify cluster D128 gqa4 b4 mixed window3 in-turn", Geometry(32, 8, 128, 16),
     [(574, 2), (1000, 0), (1001, 4), (63, 1)], True, 0, 3, (), 1),
]


@kernel_cases("attention_verify")
def verify_cluster_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [verify_cluster_case(rng, *shape) for shape in VERIFY_CLUSTER_SHAPES]
