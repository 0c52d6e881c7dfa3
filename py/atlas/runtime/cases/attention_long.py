"""Check cases for the tensor-core split-K decode attention (module attention_long, hopper).

The same cases as decode_attn_bf16's (cases/attention.py: scrambled paged cache, NaN in every
unowned slot, the float64 oracle, partials compared on the active splits, the combine's
output), forced onto the long kernel: splits of thousands of keys (many laps of the 3-stage
ring, a last tile partly past the split), splits shorter than a tile and than a warp's 16
keys, a 1-key sequence beside long ones, every group size up to the 16 rows of the MMA tile
(1, 2, 3, 4, 8, 16), D 64, 128 and 256 (the D-256 entry point, Q in shared memory), block
sizes 7, 16 and 32 (pages that straddle tiles), and one-split launches (large batches),
where the kernel writes the output itself (a sequence without keys gets zeros) and no
combine runs. Launches of several splits write partials the combine launch merges; the
`twin="long_merge"` cases merge them in their last split instead (SplitMerge, opt-in
ATLAS_DECODE_ATTN_LONG_MERGE=1: the tickets must leave the counters zero, and a sequence
without keys gets zeros). Every case launches twice. The rope-fused entry
(decode_attn_long_rope_staged, the default) runs cases/attention_rope.py's cases: the step's
k and v appended at the slot and substituted for that key, padding rows, one launch merging
its splits; its waiting twin (decode_attn_long_rope_wait, ATLAS_DECODE_ATTN_LONG_STAGED=0:
the prologue's reads in dependent trips) runs every one of them again (`twin="long_wait"`),
and so does its late-trigger twin (decode_attn_long_rope_late, `twin="long_late"`); the
early twins (decode_attn_long_rope_early[_late]) run batch-1 cases of their own.
The kernel rounds each probability to bf16 for the PV product (cases/attention_sm90.py's
bound: 2^-9 max|v| per output), added to the partials' and the output's tolerances.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, attention
from .attention import Geometry, case_routes, decode_case
from .attention_rope import decode_rope_case
from .attention_sm90 import probability_rounding_tol


def long_decode_case(rng: np.random.Generator, name: str, g: Geometry, kv_lens: list[int],
                     num_splits: int, twin: str = "", traced: bool = False, window: int = 0,
                     sinks: bool = False) -> KernelCase:
    """cases/attention.decode_case launched with `long=True` (twice: the second launch
    finds the split counters the first left), the partials' and the output's tolerances
    widened by the bf16 probability rounding bound; `twin`: the routes of
    cases/attention.DECODE_TWINS[twin]; `traced`: the D-256 entry's phase-traced twin (its
    stamps an input buffer, never compared), which must compute the same; `window` > 0: a
    sliding window (the partials the window's keys' splits); `sinks`: attention sinks (in
    the output the kernel or the combine writes)."""
    case = decode_case(rng, name, g, kv_lens, num_splits, attention.decode_split_rule,
                       window=window, sinks=sinks)
    num_seqs, max_blocks = len(kv_lens), case.inputs["block_tables"].shape[1]
    if traced:
        case.inputs["trace"] = np.zeros((num_splits * g.hkv * num_seqs, attention.TRACE_WORDS),
                                        np.int64)
    p_tol = probability_rounding_tol(case.inputs["v_cache"])
    outputs = dict(case.outputs)
    for out in ("out", "part_o"):
        spec = outputs[out]
        atol, rtol = spec.tol
        outputs[out] = OutputSpec(spec.dtype, spec.shape, (atol + p_tol, rtol))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        for _ in range(2):
            attention.decode_attention(KernelCache(backend, case_routes(twin)), stream, p["q"],
                                       p["k_cache"], p["v_cache"], p["block_tables"],
                                       p["kv_lens"], p["part_o"], p["part_ml"], p["counters"],
                                       p["out"], num_seqs, g.hq, g.hkv, g.head_dim,
                                       g.block_size, max_blocks, num_splits, g.scale,
                                       long=True, trace=p["trace"] if traced else 0,
                                       window=window, proj_dim=g.proj,
                                       sinks=p.get("sinks", 0))

    return dataclasses.replace(case, module="attention_long", run=run, outputs=outputs,
                               reference_abs_tol=case.reference_abs_tol + p_tol)


#: (name, geometry, kv_lens, num_splits)
LONG_DECODE_SHAPES = [
    # Qwen3-8B heads: 1,067-key splits (17 tiles, the last partly past the split), a 1-key
    # sequence (one active split) and a 700-key one (3 splits of 234 keys)
    ("long D128 gqa4 bs16 splits3", Geometry(32, 8, 128, 16), [3200, 1, 700], 3),
    # one split of 4,113 keys: 65 tiles, 21 laps of the ring, 17 keys in the last tile
    ("long D128 gqa6 bs16 splits1", Geometry(12, 2, 128, 16), [4113], 1),
    ("long D64 gqa2 bs16 splits2", Geometry(4, 2, 64, 16), [3000, 65], 2),
    # the largest group: all 16 rows of the MMA tile are heads
    ("long D128 gqa16 bs16 splits4", Geometry(16, 1, 128, 16), [1500], 4),
    # MHA, 7-token pages straddling every tile and warp boundary
    ("long D128 mha bs7 splits5", Geometry(2, 2, 128, 7), [999, 64], 5),
    # Qwen3-30B-A3B heads (group 8) on 33 short splits: 33 keys spill one into a second split
    ("long D128 gqa8 bs16 splits33 short", Geometry(32, 4, 128, 16), [2048, 33], 33),
    # Qwen3-0.6B heads at split boundaries (32, 64, 31 keys; 1,056 fills all 32 splits)
    ("long D128 gqa2 bs16 splits32 boundaries", Geometry(16, 8, 128, 16),
     [32, 64, 31, 1056], 32),
    ("long D64 gqa3 bs32 splits6", Geometry(9, 3, 64, 32), [2500, 17, 100], 6),
    # Qwen3.5-35B-A3B's gated attention heads (D 256, group 8): 512-key splits (8 tiles) of
    # a 2,048-key history, a 1-key sequence, 700 keys (3 of 4 splits)
    ("long D256 gqa8 bs16 splits4", Geometry(16, 2, 256, 16), [2048, 1, 700], 4),
    # D 256 with all 16 rows heads, 32-token pages; MHA with 7-token pages
    ("long D256 gqa16 bs32 splits3", Geometry(16, 1, 256, 32), [999], 3),
    ("long D256 mha bs7 splits2", Geometry(2, 2, 256, 7), [300, 64], 2),
    # one split: the output written by the kernel (no combine), as at batch 64; Qwen3-8B's
    # heads over 1,536 keys (24 tiles), beside 70 keys, 1 key and none
    ("long D128 gqa4 bs16 splits1 direct", Geometry(32, 8, 128, 16), [1536, 70, 1, 0], 1),
    ("long D256 gqa8 bs16 splits1 direct", Geometry(16, 2, 256, 16), [1100, 0, 33], 1),
    ("long D64 gqa2 bs16 splits1 direct", Geometry(4, 2, 64, 16), [640, 15], 1),
    # padded heads at D 128 (out rows of their proj_dim elements): Phi-3-mini's 96 merged
    # by the kernel's last split (MHA) and by the combine after it (a group of 8: its merge
    # is several items a thread), and in one split beside a sequence without keys
    ("long D128 pad96 mha bs16 splits3", Geometry(4, 4, 128, 16, 96), [3200, 1, 700], 3),
    ("long D128 pad96 gqa8 bs16 splits3 combine", Geometry(16, 2, 128, 16, 96),
     [3200, 1, 700], 3),
    ("long D128 pad96 gqa2 bs16 splits1 direct", Geometry(4, 2, 128, 16, 96),
     [1536, 70, 1, 0], 1),
]

#: (name, geometry, kv_lens, num_splits) merged by the kernel's last split (twin
#: "long_merge": ATLAS_DECODE_ATTN_LONG_MERGE=1), D 128 and D 256: a sequence without keys
#: (zeros from its first split) beside batch 8's 4 splits of 512 keys, 3 of them active;
#: 33 splits (the ticket's weights over two lane rounds)
LONG_MERGE_SHAPES = [
    ("long D128 gqa4 bs16 splits4 merge empty", Geometry(32, 8, 128, 16), [2048, 0, 700, 1],
     4),
    ("long D256 gqa8 bs16 splits8 merge", Geometry(16, 2, 256, 16), [2048, 300], 8),
    # one head a kv head: fewer merge items than threads (the D-256 weighted merge's idle
    # threads still reach its barrier)
    ("long D256 mha bs16 splits8 merge", Geometry(2, 2, 256, 16), [700, 65], 8),
    ("long D128 gqa8 bs16 splits33 merge", Geometry(32, 4, 128, 16), [2048, 33], 33),
    ("long D128 pad112 gqa4 bs16 splits4 merge empty", Geometry(8, 2, 128, 16, 112),
     [2048, 0, 700, 1], 4),
]


def long_rope_case(rng: np.random.Generator, name: str, g: Geometry, kv_lens: list[int],
                   num_splits: int, **kw: bool | str | int) -> KernelCase:
    """cases/attention_rope.decode_rope_case on the rope-fused entry (decode_attn_long_rope:
    q/k norm, RoPE and the K/V append done by the attention blocks), the output's tolerance
    widened by the bf16 probability rounding bound (its V includes the appended rows)."""
    case = decode_rope_case(rng, name, g, kv_lens, num_splits, long=True, **kw)
    v_new = case.inputs["qkv"].reshape(len(kv_lens), -1)[:, -g.hkv * g.proj:]  # the v heads
    p_tol = max(probability_rounding_tol(case.inputs["v_cache"]),
                probability_rounding_tol(v_new))
    spec = case.outputs["out"]
    atol, rtol = spec.tol
    outputs = dict(case.outputs, out=OutputSpec(spec.dtype, spec.shape, (atol + p_tol, rtol)))
    return dataclasses.replace(case, outputs=outputs,
                               reference_abs_tol=case.reference_abs_tol + p_tol)


#: (name, geometry, kv_lens, num_splits, options): the rope-fused entry, as batches launch it
LONG_ROPE_SHAPES = [
    # Qwen3-8B's batch-64 regime: one split of 1,536 keys (the step's key in the last tile,
    # substituted), 90 keys, a first token (launched twice: the rows rewritten the same).
    # Not in the device check's graph capture: each run opts the kernel's shared memory in
    # on a fresh KernelCache (a driver call), which the engine makes before its capture
    ("long_rope D128 gqa4 splits1", Geometry(32, 8, 128, 16), [1536, 90, 1], 1, {}),
    # 4 splits (batch 8's): the step's key in the last active split, a padding row (slot -1:
    # no append, the cache as it is), the key at a tile boundary (kv_len 65, 129)
    ("long_rope D128 gqa4 splits4 pad", Geometry(32, 8, 128, 16), [2048, 129, 65, 300], 4,
     {"pad_last": True}),
    # Qwen3-30B-A3B's group of 8; no q/k norm at D 64 (Llama-style), 7-token pages
    ("long_rope D128 gqa8 splits2", Geometry(32, 4, 128, 16), [700, 33], 2, {}),
    ("long_rope D64 gqa3 no-norm bs7", Geometry(9, 3, 64, 7), [200, 64, 97], 3,
     {"normed": False}),
    # every row of the MMA tile a head
    ("long_rope D128 gqa16 splits1", Geometry(16, 1, 128, 16), [400], 1, {}),
    # a launch merging its splits itself (ATLAS_DECODE_ATTN_LONG_MERGE=1)
    ("long_rope D128 gqa4 splits4 pad merge", Geometry(32, 8, 128, 16), [2048, 129, 65, 300],
     4, {"pad_last": True, "twin": "long_merge"}),
    # padded heads (qkv rows of proj_dim-long heads, cache rows zero past them): Phi-3-mini's
    # 96 (MHA, no q/k norm) batched with a padding row, one split with the norm (over the
    # 96), and 80 on 7-token pages
    ("long_rope D128 pad96 mha no-norm splits4 pad", Geometry(4, 4, 128, 16, 96),
     [2048, 129, 65, 300], 4, {"pad_last": True, "normed": False}),
    ("long_rope D128 pad96 gqa2 splits1", Geometry(4, 2, 128, 16, 96), [1536, 90, 1], 1, {}),
    ("long_rope D128 pad80 gqa2 no-norm bs7 splits2", Geometry(4, 2, 128, 7, 80), [700, 33],
     2, {"normed": False}),
]


#: LONG_ROPE_SHAPES on the waiting prologue's entry (decode_attn_long_rope_wait,
#: ATLAS_DECODE_ATTN_LONG_STAGED=0: the same outputs), merging where the case merges
LONG_ROPE_WAIT_SHAPES = [
    (f"{name} wait", g, lens, splits,
     {**kw, "twin": "long_wait_merge" if kw.get("twin") == "long_merge" else "long_wait"})
    for name, g, lens, splits, kw in LONG_ROPE_SHAPES]
#: the late-trigger twin (decode_attn_long_rope_late, ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1:
#: the same outputs), which launches take at one sequence only: Qwen3-30B-A3B's batch-1 step
#: (16 splits merged by the last), one split, and the combine after 3 splits (no norm, D 64)
LONG_ROPE_LATE_SHAPES = [
    ("long_rope D128 gqa8 b1 splits16 merge late", Geometry(32, 4, 128, 16), [568], 16,
     {"twin": "long_late_merge"}),
    ("long_rope D128 gqa4 b1 splits1 late", Geometry(32, 8, 128, 16), [1536], 1,
     {"twin": "long_late"}),
    ("long_rope D64 gqa3 no-norm bs7 b1 splits3 late", Geometry(9, 3, 64, 7), [200], 3,
     {"normed": False, "twin": "long_late"}),
    ("long_rope D128 pad96 mha no-norm b1 splits16 merge late", Geometry(8, 8, 128, 16, 96),
     [568], 16, {"normed": False, "twin": "long_late_merge"}),
]


#: batches of exact heads on the staged entry with both head dims' code
#: (ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM=0; the default routes them to its twins for one
#: head dim, decode_attn_long_rope_staged_exact_d128 / _d64, checked by the plain shapes):
#: batch 8's 4 splits with a padding row, merged and not, a group of 8, D 64 without the norm
#: on 7-token pages
LONG_ROPE_BATCHED_BOTH_DIMS_SHAPES = [
    ("long_rope D128 gqa4 splits4 pad both-dims", Geometry(32, 8, 128, 16),
     [2048, 129, 65, 300], 4, {"pad_last": True, "twin": "long_batched_both_dims"}),
    ("long_rope D128 gqa4 splits4 pad merge both-dims", Geometry(32, 8, 128, 16),
     [2048, 129, 65, 300], 4, {"pad_last": True, "twin": "long_batched_both_dims_merge"}),
    ("long_rope D128 gqa8 splits2 both-dims", Geometry(32, 4, 128, 16), [700, 33], 2,
     {"twin": "long_batched_both_dims"}),
    ("long_rope D64 gqa3 no-norm bs7 both-dims", Geometry(9, 3, 64, 7), [200, 64, 97], 3,
     {"normed": False, "twin": "long_batched_both_dims"}),
]


#: the early twins (decode_attn_long_rope_early / _early_late, ATLAS_DECODE_ATTN_LONG_EARLY=1:
#: the reads before the PDL wait, whole-tile splits when merging; their _exact twins where
#: the heads are unpadded without sinks, the general code below), which launches take at
#: one sequence only: Qwen3-0.6B's batch-1 grid (30 splits) at 568 keys (9 active), a first
#: token, the step's key alone in the second tile, two tiles a split (2,500 keys: 20 of
#: 128), a padding row, Qwen3-30B-A3B's group of 8 with the late trigger, one split, and the
#: combine after 3 splits (no merge: the combine's rule; no norm, D 64, 7-key pages), and the
#: early entries' phase-traced twins
LONG_ROPE_EARLY_SHAPES = [
    (f"long_rope D128 gqa2 b1 splits30 merge early {n}", Geometry(16, 8, 128, 16), [n], 30,
     {"twin": "long_early_merge"}) for n in (568, 1, 65, 2500)] + [
    ("long_rope D128 gqa4 b1 splits8 pad merge early", Geometry(32, 8, 128, 16), [300], 8,
     {"pad_last": True, "twin": "long_early_merge"}),
    ("long_rope D128 gqa8 b1 splits16 merge early late", Geometry(32, 4, 128, 16), [568], 16,
     {"twin": "long_early_late_merge"}),
    ("long_rope D128 gqa4 b1 splits1 early", Geometry(32, 8, 128, 16), [1536], 1,
     {"twin": "long_early"}),
    # the general code on heads the _exact twins take (ATLAS_DECODE_ATTN_LONG_EXACT=0)
    ("long_rope D128 gqa2 b1 splits30 merge early general", Geometry(16, 8, 128, 16), [568],
     30, {"twin": "long_early_general_merge"}),
    ("long_rope D128 gqa8 b1 splits16 merge early late general", Geometry(32, 4, 128, 16),
     [568], 16, {"twin": "long_early_late_general_merge"}),
    # the entries with both head dims' code (ATLAS_DECODE_ATTN_LONG_ONE_DIM=0): exact heads
    # and padded ones
    ("long_rope D128 gqa2 b1 splits30 merge early both-dims", Geometry(16, 8, 128, 16), [568],
     30, {"twin": "long_early_both_dims_merge"}),
    ("long_rope D128 gqa8 b1 splits16 merge early late both-dims", Geometry(32, 4, 128, 16),
     [568], 16, {"twin": "long_early_late_both_dims_merge"}),
    ("long_rope D64 gqa3 no-norm bs7 b1 splits3 early both-dims", Geometry(9, 3, 64, 7), [200],
     3, {"normed": False, "twin": "long_early_both_dims"}),
    ("long_rope D128 pad96 mha no-norm b1 splits30 merge early both-dims",
     Geometry(8, 8, 128, 16, 96), [568], 30, {"normed": False,
                                             "twin": "long_early_both_dims_merge"}),
    ("long_rope D64 gqa3 no-norm bs7 b1 splits3 early", Geometry(9, 3, 64, 7), [200], 3,
     {"normed": False, "twin": "long_early"}),
    # padded heads' batch 1 (Phi-3-mini's 96, MHA, no q/k norm: 30 splits merged, and the
    # combine after 3; 112 with the norm in one split)
    ("long_rope D128 pad96 mha no-norm b1 splits30 merge early", Geometry(8, 8, 128, 16, 96),
     [568], 30, {"normed": False, "twin": "long_early_merge"}),
    ("long_rope D128 pad96 mha no-norm b1 splits3 early", Geometry(8, 8, 128, 16, 96), [200],
     3, {"normed": False, "twin": "long_early"}),
    ("long_rope D128 pad112 gqa4 b1 splits1 early", Geometry(8, 2, 128, 16, 112), [1536], 1,
     {"twin": "long_early"}),
    # the phase-traced twins (tools/gpu/trace_decode_attn.py --long): the same outputs, the
    # early entries' at one sequence (the late trigger's too), the staged entry's for a batch
    # of one split
    ("long_rope D128 gqa2 b1 splits30 merge early traced", Geometry(16, 8, 128, 16), [568], 30,
     {"twin": "long_early_merge", "traced": True}),
    ("long_rope D128 gqa8 b1 splits16 merge early late traced", Geometry(32, 4, 128, 16), [568],
     16, {"twin": "long_early_late_merge", "traced": True}),
    ("long_rope D128 gqa4 b3 splits1 staged traced", Geometry(32, 8, 128, 16), [1536, 90, 1], 1,
     {"traced": True}),
]


#: (name, geometry, kv_lens, num_splits, twin, window): sliding windows on the plain entries
#: (the splits of the window's keys from a first key mid-tile and mid-page; sequences shorter
#: than the window see every key), merged by the combine, by the last split, and in one split
LONG_WINDOW_SHAPES = [
    ("long D128 gqa4 bs16 splits3 window 1000", Geometry(32, 8, 128, 16), [3200, 1, 700], 3,
     "", 1000),
    ("long D64 gqa2 bs7 splits4 window 77 merge", Geometry(4, 2, 64, 7), [3000, 65, 78], 4,
     "long_merge", 77),
    ("long D256 gqa8 bs16 splits1 window 300", Geometry(16, 2, 256, 16), [1100, 0, 33], 1,
     "", 300),
    ("long D128 gqa8 bs16 splits33 window 200 merge", Geometry(32, 4, 128, 16), [2048, 33],
     33, "long_merge", 200),
    ("long D128 pad96 mha bs16 splits3 window 1000", Geometry(4, 4, 128, 16, 96),
     [3200, 1, 700], 3, "", 1000),
]
#: ... and on the rope entries (the step's key the window's last): batches on the staged
#: entry (one split, and 4 merged), batch 1 on the early entry (30 splits merged: the
#: first tiles' table entries asked before the window's start is known), with the combine
#: after 3 splits
LONG_ROPE_WINDOW_SHAPES = [
    ("long_rope D128 gqa4 splits1 window 500", Geometry(32, 8, 128, 16), [1536, 90, 1], 1,
     {"window": 500}),
    ("long_rope D128 gqa4 splits4 pad merge window 100", Geometry(32, 8, 128, 16),
     [2048, 129, 65, 300], 4, {"pad_last": True, "twin": "long_merge", "window": 100}),
    ("long_rope D128 gqa2 b1 splits30 merge early window 300", Geometry(16, 8, 128, 16),
     [2500], 30, {"twin": "long_early_merge", "window": 300}),
    ("long_rope D64 gqa3 no-norm bs7 b1 splits3 early window 50", Geometry(9, 3, 64, 7),
     [200], 3, {"normed": False, "twin": "long_early", "window": 50}),
    # Phi-3-mini-4k's padded heads sliding: a batch merged, and batch 1 on the early entry
    ("long_rope D128 pad96 mha no-norm splits4 pad merge window 100",
     Geometry(4, 4, 128, 16, 96), [2048, 129, 65, 300], 4,
     {"normed": False, "pad_last": True, "twin": "long_merge", "window": 100}),
    ("long_rope D128 pad96 mha no-norm b1 splits30 merge early window 300",
     Geometry(8, 8, 128, 16, 96), [2500], 30,
     {"normed": False, "twin": "long_early_merge", "window": 300}),
]


#: (name, geometry, kv_lens, num_splits, twin, window): attention sinks (gpt-oss: 64 q heads
#: on 8 kv heads of D 64, every other layer sliding over 128 keys) written by the kernel in
#: one split, merged by the combine and by the last split; D 128 and D 256 merged by the
#: combine
LONG_SINK_SHAPES = [
    ("long D64 gqa8 bs16 splits1 direct sinks (gpt-oss)", Geometry(64, 8, 64, 16),
     [1536, 70, 1, 0], 1, "", 0),
    ("long D64 gqa8 bs16 splits4 window 128 sinks (gpt-oss)", Geometry(64, 8, 64, 16),
     [3000, 65, 129], 4, "", 128),
    ("long D64 gqa8 bs16 splits16 merge sinks (gpt-oss)", Geometry(64, 8, 64, 16),
     [2048, 0, 300], 16, "long_merge", 0),
    ("long D64 gqa8 bs16 splits8 merge window 128 sinks (gpt-oss)", Geometry(64, 8, 64, 16),
     [1000, 129], 8, "long_merge", 128),
    ("long D128 gqa4 bs7 splits3 sinks", Geometry(8, 2, 128, 7), [999, 1], 3, "", 0),
    ("long D256 gqa8 bs16 splits4 sinks", Geometry(16, 2, 256, 16), [2048, 300], 4, "", 0),
]
#: ... on the rope entries, as gpt-oss's decode steps launch them: batch 1 merging 30 splits
#: on the early entry (sliding and full), a batch on the staged entry with a padding row
LONG_ROPE_SINK_SHAPES = [
    ("long_rope D64 gqa8 no-norm b1 splits30 merge early sinks (gpt-oss)",
     Geometry(64, 8, 64, 16), [2500], 30,
     {"normed": False, "twin": "long_early_merge", "sinks": True}),
    ("long_rope D64 gqa8 no-norm b1 splits30 merge early window 128 sinks (gpt-oss)",
     Geometry(64, 8, 64, 16), [2500], 30,
     {"normed": False, "twin": "long_early_merge", "window": 128, "sinks": True}),
    ("long_rope D64 gqa8 no-norm splits4 pad sinks (gpt-oss)", Geometry(64, 8, 64, 16),
     [2048, 129, 65, 300], 4, {"normed": False, "pad_last": True, "sinks": True}),
    ("long_rope D64 gqa8 no-norm splits1 window 128 sinks (gpt-oss)", Geometry(64, 8, 64, 16),
     [1536, 90, 1], 1, {"normed": False, "window": 128, "sinks": True}),
]


#: gated full attention at batch 1 (decode_attn_long_rope_early[_late]_gated_d256: Qwen3.5 /
#: Qwen3-Next's 16 q heads on 2 kv heads of D 256, each q head followed by its gate, a
#: quarter rotating, (1 + w) norms), every active split merging a share (SpreadMerge): Qwen3.5-
#: 35B-A3B's grid at 568 and 2,500 keys (9 and 20 active splits: two lanes an item; the late
#: trigger), 64 splits at 4,200 keys (33 active: eight lanes an item), a first token (one
#: active split merging all 512 items in four rounds), one split (written, not merged), a
#: group of 4 on an odd block size (4 active: one lane), one head a kv head
LONG_ROPE_GATED_SHAPES = [
    ("long_rope D256 gqa8 b1 splits64 merge early late gated 4k", Geometry(16, 2, 256, 16),
     [4200], 64, {"twin": "long_early_late_merge", "gated": True}),
    ("long_rope D256 gqa8 b1 splits34 merge early gated", Geometry(16, 2, 256, 16), [568], 34,
     {"twin": "long_early_merge", "gated": True}),
    ("long_rope D256 gqa8 b1 splits34 merge early late gated", Geometry(16, 2, 256, 16),
     [2500], 34, {"twin": "long_early_late_merge", "gated": True}),
    ("long_rope D256 gqa8 b1 splits34 merge early gated ctx1", Geometry(16, 2, 256, 16), [1],
     34, {"twin": "long_early_merge", "gated": True}),
    ("long_rope D256 gqa8 b1 splits1 early gated", Geometry(16, 2, 256, 16), [300], 1,
     {"twin": "long_early", "gated": True}),
    ("long_rope D256 gqa4 bs7 b1 splits8 merge early gated", Geometry(8, 2, 256, 7), [200], 8,
     {"twin": "long_early_merge", "gated": True}),
    ("long_rope D256 mha b1 splits8 merge early gated", Geometry(2, 2, 256, 16), [300], 8,
     {"twin": "long_early_merge", "gated": True}),
]


#: (name, geometry, kv_lens, num_splits) on the D-256 entry's phase-traced twin: Qwen3.5's
#: batch 1 at 568 keys on 19 splits (its profile's grid; the combine after it)
LONG_TRACED_SHAPES = [
    ("long D256 gqa8 bs16 b1 splits19 traced", Geometry(16, 2, 256, 16), [568], 19),
]


@kernel_cases("attention_long")
def long_decode_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([long_decode_case(rng, *shape) for shape in LONG_DECODE_SHAPES]
            + [long_decode_case(rng, *shape, traced=True) for shape in LONG_TRACED_SHAPES]
            + [long_decode_case(rng, *shape, twin="long_merge")
               for shape in LONG_MERGE_SHAPES]
            + [long_decode_case(rng, name, g, lens, splits, twin=twin, window=window)
               for name, g, lens, splits, twin, window in LONG_WINDOW_SHAPES]
            + [long_decode_case(rng, name, g, lens, splits, twin=twin, window=window,
                                sinks=True)
               for name, g, lens, splits, twin, window in LONG_SINK_SHAPES]
            + [long_rope_case(rng, name, g, lens, splits, **kw)
               for name, g, lens, splits, kw in (LONG_ROPE_SHAPES + LONG_ROPE_WAIT_SHAPES
                                                 + LONG_ROPE_LATE_SHAPES
                                                 + LONG_ROPE_BATCHED_BOTH_DIMS_SHAPES
                                                 + LONG_ROPE_EARLY_SHAPES
                                                 + LONG_ROPE_WINDOW_SHAPES
                                                 + LONG_ROPE_SINK_SHAPES
                                                 + LONG_ROPE_GATED_SHAPES)])
