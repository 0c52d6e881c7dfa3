"""Check cases for prefill and split-K decode attention over a scrambled paged KV cache.

Cache slots that no sequence owns (tails of last blocks, unreferenced blocks) hold NaN, so
a kernel that reads one key too many fails loudly. The float64 oracle gathers each key by
its slot (block_table[p // block_size] * block_size + p % block_size) and applies an exact
causal softmax; it shares no code with the reference kernel.

Decode partials are compared where more than one split is active, on the active splits only:
the other rows stay poisoned (NaN), so a merge that read one of them would fail on `out`.

A Geometry with proj_dim < head_dim is a padded head (ops.attention.padded_head_dim): its q
and cache rows hold proj_dim random elements, then zeros, and out keeps each head's first
proj_dim elements ([tokens, hq * proj_dim]), the softmax scale proj_dim^-0.5.

`sinks=True` cases give every q head an attention sink (gpt-oss: bf16 [hq], `random_sinks`:
a spread around the scores' scale plus one that dominates every denominator and one that
adds nothing): each softmax denominator also sums e^(sink - m), the sink's column dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Callable

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, attention
from ..ops.routes import KernelRoutes
from .gemv import random_bf16

_BF16_NAN = np.uint16(0x7FC0)
#: bf16 attention outputs lie in (-1, 1): the output rounding (half a bf16 ulp, 2^-9
#: relative) dominates; float32 softmax error is orders of magnitude below it
ATTN_TOL = (1e-3, 8e-3)
#: prefill against the float64 reference: the tensor-core kernels' f32 online softmax (ex2
#: approximations, P in bf16 parts) lands about one output in 20,000 on the other side of a
#: bf16 rounding boundary, by up to 2^-9 at outputs in (-1, 1) (H200, 2026-12-01: prefill
#: D256 gqa8 1/823,296 at 1.95e-3, D64 mha 1/20,864 at 4.9e-4, each as far from the
#: float64 oracle as the reference itself); the oracle tolerance above still bounds accuracy
PREFILL_REFERENCE_ABS_TOL = 2.0 ** -9


@dataclass(frozen=True)
class Geometry:
    hq: int
    hkv: int
    head_dim: int
    block_size: int
    #: a padded head's length in the projections (0: head_dim, no padding)
    proj_dim: int = 0

    @property
    def proj(self) -> int:
        """The head's elements: the rest of its head_dim-long rows are zeros."""
        return self.proj_dim or self.head_dim

    @property
    def scale(self) -> float:
        return self.proj ** -0.5


def pad_heads(rows: np.ndarray, head_dim: int) -> np.ndarray:
    """Rows [..., proj] (values or bf16 bits) widened to [..., head_dim] with zeros: a
    padded head's q or cache rows."""
    pad = np.zeros(rows.shape[:-1] + (head_dim - rows.shape[-1],), rows.dtype)
    return np.concatenate([rows, pad], axis=-1)


def random_heads(rng: np.random.Generator, shape: tuple[int, ...], g: Geometry,
                 scale: float = 1.0) -> np.ndarray:
    """Random bf16 heads [..., head_dim]: g.proj values (random_bf16's), then zeros."""
    return pad_heads(random_bf16(rng, shape[:-1] + (g.proj,), scale), shape[-1])


def paged_cache(rng: np.random.Generator, kv_lens: list[int], g: Geometry
                ) -> dict[str, np.ndarray]:
    """K/V pools with each sequence's blocks at shuffled ids, NaN in every unowned slot, and
    block tables padded with ids of other blocks (never dereferenced by a correct kernel)."""
    need = [-(-n // g.block_size) for n in kv_lens]
    num_blocks = sum(need) + 3
    max_blocks = max(need) + 2
    shape = (num_blocks, g.hkv, g.block_size, g.head_dim)
    k = np.full(shape, _BF16_NAN, dtype=np.uint16)
    v = np.full(shape, _BF16_NAN, dtype=np.uint16)
    ids = rng.permutation(num_blocks).astype(np.int32)
    tables = rng.integers(0, num_blocks, (len(kv_lens), max_blocks)).astype(np.int32)
    used = 0
    for b, n in enumerate(kv_lens):
        own = ids[used:used + need[b]]
        used += need[b]
        tables[b, :need[b]] = own
        for p in range(n):
            blk, off = own[p // g.block_size], p % g.block_size
            k[blk, :, off] = random_heads(rng, (g.hkv, g.head_dim), g)
            v[blk, :, off] = random_heads(rng, (g.hkv, g.head_dim), g)
    return {"k_cache": k, "v_cache": v, "block_tables": tables,
            "kv_lens": np.asarray(kv_lens, dtype=np.int32)}


def _token_kv(inputs: dict[str, np.ndarray], b: int, g: Geometry) -> tuple[np.ndarray, ...]:
    """float64 K, V [kv_len, hkv, D] of sequence b, gathered slot by slot."""
    n = int(inputs["kv_lens"][b])
    kf = inputs["k_cache"].reshape(-1, g.hkv, g.block_size, g.head_dim)
    vf = inputs["v_cache"].reshape(-1, g.hkv, g.block_size, g.head_dim)
    k = np.empty((n, g.hkv, g.head_dim))
    v = np.empty((n, g.hkv, g.head_dim))
    for p in range(n):
        blk = inputs["block_tables"][b, p // g.block_size]
        k[p] = bf16_bits_to_f32(kf[blk, :, p % g.block_size])
        v[p] = bf16_bits_to_f32(vf[blk, :, p % g.block_size])
    return k, v


def _softmax_rows(s: np.ndarray, sink: float | None = None) -> np.ndarray:
    """Softmax over the last axis; with `sink`, one more logit in each denominator whose
    column is dropped (the probabilities then sum below 1)."""
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    if sink is not None:
        total = total + np.exp(sink - m)
    return e / total


def random_sinks(rng: np.random.Generator, hq: int) -> np.ndarray:
    """bf16 bits of attention sinks [hq]: N(0, 2^2) (as large as the scores of `q` scaled by
    2, so they move every output), head 0's 30 (it dominates: outputs near zero) and, with
    more than one head, the last head's -30 (it adds nothing)."""
    sinks = rng.standard_normal(hq) * 2.0
    sinks[0] = 30.0
    if hq > 1:
        sinks[-1] = -30.0
    return f32_to_bf16_bits(sinks.astype(np.float32))


def _sink_of(x: dict[str, np.ndarray], h: int) -> float | None:
    """Head h's sink of a case's inputs (None: the case has none)."""
    return float(bf16_bits_to_f32(x["sinks"][h])) if "sinks" in x else None


# ---- prefill ------------------------------------------------------------------------------
def prefill_case(rng: np.random.Generator, name: str, g: Geometry, q_lens: list[int],
                 kv_lens: list[int], window: int = 0, sinks: bool = False) -> KernelCase:
    """Chunks of q_lens queries, the last of each sequence's kv_lens keys; `window` > 0: a
    sliding window (a query at position p sees keys p - window + 1 .. p); `sinks`: attention
    sinks (the module docstring)."""
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    total = int(cu[-1])
    inputs = paged_cache(rng, kv_lens, g)
    inputs["q"] = random_heads(rng, (total, g.hq, g.head_dim), g, 2.0)
    inputs["cu_q"] = cu
    if sinks:
        inputs["sinks"] = random_sinks(rng, g.hq)
    num_seqs, max_blocks = len(q_lens), inputs["block_tables"].shape[1]

    # sm90=False: these are prefill_attn_bf16's cases (module attention); on an sm_90a set the
    # default route would run the wgmma kernel, whose cases (cases/attention_sm90.py) carry
    # its own tolerance (one bf16 per probability)
    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        attention.prefill_attention(
            KernelCache(backend), stream, p["q"], p["k_cache"], p["v_cache"],
            p["block_tables"], p["cu_q"], p["kv_lens"], p["out"], num_seqs, g.hq, g.hkv,
            g.head_dim, g.block_size, max_blocks, g.scale, max(q_lens), sm90=False,
            window=window, proj_dim=g.proj, sinks=p.get("sinks", 0))

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        q = bf16_bits_to_f32(x["q"]).astype(np.float64)
        out = np.empty_like(q)
        for b in range(num_seqs):
            k, v = _token_kv(x, b, g)
            q_len, kv_len = q_lens[b], kv_lens[b]
            key, pos = np.arange(kv_len)[None, :], (kv_len - q_len + np.arange(q_len))[:, None]
            visible = (key <= pos) & ((key > pos - window) if window else True)
            for h in range(g.hq):
                kvh = h // (g.hq // g.hkv)
                s = q[cu[b]:cu[b + 1], h] @ k[:, kvh].T * g.scale
                probs = _softmax_rows(np.where(visible, s, -np.inf), _sink_of(x, h))
                out[cu[b]:cu[b + 1], h] = probs @ v[:, kvh]
        return {"out": out[..., :g.proj]}

    spec = OutputSpec(DType.BF16, (total, g.hq, g.proj), ATTN_TOL)
    return KernelCase(name, "attention", inputs, {"out": spec}, run, oracle,
                      reference_abs_tol=PREFILL_REFERENCE_ABS_TOL)


@kernel_cases("attention")
def prefill_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [
        # first prefill, chunked prefill (kv_len > q_len), single-token chunk; GQA 4, D 128
        prefill_case(rng, "prefill D128 gqa4 bs16 mixed", Geometry(8, 2, 128, 16),
                     [5, 70, 1], [5, 100, 37]),
        # GQA 3, D 64, a query tile crossing two 64-row tiles, long history
        prefill_case(rng, "prefill D64 gqa3 bs16 chunked", Geometry(6, 2, 64, 16),
                     [64, 17], [64, 200]),
        # MHA, odd block size
        prefill_case(rng, "prefill D64 mha bs7", Geometry(2, 2, 64, 7), [33, 130], [40, 130]),
        # GQA 1 and D 128 with block size 32 and a partial final block
        prefill_case(rng, "prefill D128 mha bs32", Geometry(3, 3, 128, 32), [9], [75]),
        # D 256 (Qwen3.5 / Qwen3-Next full attention: 16 q heads on 2 kv heads): first and
        # chunked prefill, a one-token chunk, query tiles crossing 64-row tiles
        prefill_case(rng, "prefill D256 gqa8 bs16 mixed", Geometry(16, 2, 256, 16),
                     [70, 1, 130], [70, 40, 200]),
        # Qwen3-30B-A3B's heads (32 q on 4 kv heads of D 128: the only D-128 group of 8):
        # its parity prompt (512 tokens in one chunk) beside a chunked and a one-token chunk
        prefill_case(rng, "prefill D128 gqa8 bs16 (qwen3-30b-a3b)", Geometry(32, 4, 128, 16),
                     [512, 1, 70], [512, 40, 200]),
        # sliding windows: shorter than a key tile (both mask ends in one tile), starting
        # mid-page on 7-token pages, longer than one chunk's history (that chunk sees all)
        prefill_case(rng, "prefill D128 gqa4 bs16 window 20", Geometry(8, 2, 128, 16),
                     [100, 1, 15], [150, 60, 15], window=20),
        prefill_case(rng, "prefill D64 mha bs7 window 150", Geometry(2, 2, 64, 7),
                     [130, 40], [400, 100], window=150),
        prefill_case(rng, "prefill D256 gqa8 bs16 window 70", Geometry(16, 2, 256, 16),
                     [90, 1], [200, 90], window=70),
        # padded heads at D 128 (out rows of their proj_dim elements): Phi-3-mini's 96 (MHA)
        # first and chunked, with a window (Phi-3-mini-4k slides), and 80 on 7-token pages
        prefill_case(rng, "prefill D128 pad96 mha bs16 mixed", Geometry(4, 4, 128, 16, 96),
                     [5, 70, 1], [5, 100, 37]),
        prefill_case(rng, "prefill D128 pad96 gqa2 bs16 window 20", Geometry(4, 2, 128, 16, 96),
                     [100, 1, 15], [150, 60, 15], window=20),
        prefill_case(rng, "prefill D128 pad80 gqa2 bs7", Geometry(2, 1, 128, 7, 80), [33, 9],
                     [40, 75]),
        # attention sinks (gpt-oss: 64 q heads on 8 kv heads of D 64, every other layer
        # sliding over 128 keys): full and sliding, first and chunked prefill, a one-token
        # chunk; D 128 (the other head dim the kernel takes them at) on 7-token pages
        prefill_case(rng, "prefill D64 gqa8 bs16 sinks (gpt-oss)", Geometry(64, 8, 64, 16),
                     [70, 1, 9], [70, 40, 200], sinks=True),
        prefill_case(rng, "prefill D64 gqa8 bs16 window 128 sinks (gpt-oss)",
                     Geometry(64, 8, 64, 16), [200, 1], [300, 150], window=128, sinks=True),
        prefill_case(rng, "prefill D128 gqa2 bs7 sinks", Geometry(4, 2, 128, 7), [33, 9],
                     [40, 75], sinks=True),
    ]


# ---- decode -------------------------------------------------------------------------------
#: the twins a decode case may run instead of the kernel the environment's routes pick, and
#: the route that picks each (ops/routes.py); every twin computes the same
DECODE_TWINS = {"ahead1": {"decode_attn_ahead": False},  # *_ahead1_bf16 (unclustered)
                "split_major": {"decode_attn_split_major": True},  # *_splitmajor_bf16
                "pull": {"decode_attn_b1_chain": False},  # *_cluster_pull_bf16
                # attention_long's opt-in: the split merge in the kernel instead of the
                # combine launch
                "long_merge": {"decode_attn_long_merge": True},
                # batches of exact heads on the staged entry with both head dims' code
                # (ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM=0; its one-dim twins are the
                # default), alone and with the merge
                "long_batched_both_dims": {"decode_attn_long_batched_one_dim": False},
                "long_batched_both_dims_merge": {"decode_attn_long_batched_one_dim": False,
                                                 "decode_attn_long_merge": True},
                # and its rope entry's waiting prologue (ATLAS_DECODE_ATTN_LONG_STAGED=0;
                # the staged one is the default), alone and with the merge
                "long_wait": {"decode_attn_long_staged": False},
                "long_wait_merge": {"decode_attn_long_staged": False,
                                    "decode_attn_long_merge": True},
                # and the staged entry's late-trigger twin
                # (ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1), alone and with the merge
                "long_late": {"decode_attn_long_late_trigger": True},
                "long_late_merge": {"decode_attn_long_late_trigger": True,
                                    "decode_attn_long_merge": True},
                # the early twins (ATLAS_DECODE_ATTN_LONG_EARLY=1, one sequence): without
                # the merge (the combine's split rule), with it (whole-tile splits), and
                # with the merge and the late trigger
                "long_early": {"decode_attn_long_early": True},
                "long_early_merge": {"decode_attn_long_early": True,
                                     "decode_attn_long_merge": True},
                "long_early_late_merge": {"decode_attn_long_early": True,
                                          "decode_attn_long_late_trigger": True,
                                          "decode_attn_long_merge": True},
                # the early entries' general code where their _exact twins would run
                # (ATLAS_DECODE_ATTN_LONG_EXACT=0): with the merge, and with the late trigger
                "long_early_general_merge": {"decode_attn_long_early": True,
                                             "decode_attn_long_exact": False,
                                             "decode_attn_long_merge": True},
                "long_early_late_general_merge": {"decode_attn_long_early": True,
                                                  "decode_attn_long_exact": False,
                                                  "decode_attn_long_late_trigger": True,
                                                  "decode_attn_long_merge": True},
                # the early entries holding both head dims' code where the twins compiled
                # for one would run (ATLAS_DECODE_ATTN_LONG_ONE_DIM=0)
                "long_early_both_dims": {"decode_attn_long_early": True,
                                         "decode_attn_long_one_dim": False},
                "long_early_both_dims_merge": {"decode_attn_long_early": True,
                                               "decode_attn_long_one_dim": False,
                                               "decode_attn_long_merge": True},
                "long_early_late_both_dims_merge": {"decode_attn_long_early": True,
                                                    "decode_attn_long_one_dim": False,
                                                    "decode_attn_long_late_trigger": True,
                                                    "decode_attn_long_merge": True}}


def case_routes(twin: str) -> KernelRoutes:
    """The routes of a decode case's launches: the environment's, switched to `twin`
    (DECODE_TWINS; "" for none), with no batch routing to the tensor-core kernel (these
    cases check the CUDA-core kernels, whose numerics their references mirror, at several
    sequences; the tensor-core kernel has cases of its own, cases/attention_long.py)."""
    routes = replace(KernelRoutes.from_env(), decode_attn_long_min_batch=0)
    return replace(routes, **DECODE_TWINS[twin]) if twin else routes


def traced_twins_apply() -> bool:
    """Whether the environment's routes take the kernels the traced twins mirror (not the
    waiting kernel of ATLAS_DECODE_ATTN_LATENCY=0, the split-major nor the pull-merge ones)."""
    routes = KernelRoutes.from_env()
    return (routes.decode_attn_latency and not routes.decode_attn_split_major
            and routes.decode_attn_b1_chain)


def decode_case(rng: np.random.Generator, name: str, g: Geometry, kv_lens: list[int],
                num_splits: int, rule: Callable[[int, int], tuple[int, int]] | None = None,
                traced: bool = False, twin: str = "", long: bool | None = None,
                window: int = 0, sinks: bool = False) -> KernelCase:
    """One query per sequence on a num_splits grid, launched twice: the second launch finds
    the split tickets the first left (they must be zero again, and are checked to be).
    `long`: decode_attention's (True: the tensor-core kernel); `window` > 0: a sliding
    window, the query seeing its sequence's last `window` keys only, split as that many.
    `rule`: (keys per partial, partials) of the kernel under test (default: what
    decode_attention launches under the environment's routes). `traced`: the clustered
    kernel's phase-traced twin (attention_twins.cu), which must compute the same; `twin`:
    another twin of that module (DECODE_TWINS), the same too. `sinks`: attention sinks (the
    module docstring; the long kernel's), in out only: the partials stay the plain ones."""
    if rule is None:
        routes = KernelRoutes.from_env()
        rule = partial(attention.decode_partial_rule, routes=routes)
    num_seqs = len(kv_lens)
    inputs = paged_cache(rng, kv_lens, g)
    inputs["q"] = random_heads(rng, (num_seqs, g.hq, g.head_dim), g, 2.0)
    inputs["counters"] = np.zeros((num_seqs, g.hq), np.int32)
    if sinks:
        inputs["sinks"] = random_sinks(rng, g.hq)
    max_blocks = inputs["block_tables"].shape[1]
    if traced:  # the stamps are clock readings: an input buffer, never compared
        grid = attention.decode_grid(num_splits, g.hq, g.hkv, num_seqs)
        inputs["trace"] = np.zeros((int(np.prod(grid)), attention.TRACE_WORDS), np.int64)
    part_o_shape = (num_seqs, g.hq, num_splits, g.head_dim)
    part_ml_shape = (num_seqs, g.hq, num_splits, 2)
    # the partials a launch writes (ops.attention.decode_partial_rule): one per active split,
    # or per cluster holding keys on the clustered kernels; none where one covers the keys
    first = [max(0, n - window) if window else 0 for n in kv_lens]  # the first key seen
    seen = [n - f for n, f in zip(kv_lens, first)]
    chunks = [rule(n, num_splits)[0] for n in seen]
    active = np.zeros((num_seqs, g.hq, num_splits), dtype=bool)
    for b, (n, c) in enumerate(zip(seen, chunks)):
        if n > c:
            active[b, :, :] = np.arange(num_splits)[None, :] * c < n

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        for _ in range(2):
            attention.decode_attention(KernelCache(backend, case_routes(twin)), stream,
                                       p["q"], p["k_cache"],
                                       p["v_cache"], p["block_tables"], p["kv_lens"],
                                       p["part_o"], p["part_ml"], p["counters"], p["out"],
                                       num_seqs, g.hq, g.hkv, g.head_dim, g.block_size,
                                       max_blocks, num_splits, g.scale,
                                       trace=p.get("trace", 0), long=long, window=window,
                                       proj_dim=g.proj, sinks=p.get("sinks", 0))

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        q = bf16_bits_to_f32(x["q"]).astype(np.float64)
        out = np.zeros_like(q)
        part_o = np.zeros(part_o_shape)
        part_ml = np.zeros(part_ml_shape)
        for b in range(num_seqs):
            k, v = _token_kv(x, b, g)
            k, v = k[first[b]:], v[first[b]:]
            for h in range(g.hq):
                kvh = h // (g.hq // g.hkv)
                s = k[:, kvh] @ q[b, h] * g.scale
                if kv_lens[b]:
                    out[b, h] = _softmax_rows(s, _sink_of(x, h)) @ v[:, kvh]
                for i in np.flatnonzero(active[b, h]):
                    lo, hi = i * chunks[b], min((i + 1) * chunks[b], seen[b])
                    m = s[lo:hi].max()
                    e = np.exp(s[lo:hi] - m)
                    part_ml[b, h, i] = (m, e.sum())
                    part_o[b, h, i] = e @ v[lo:hi, kvh] / e.sum()
        return {"out": out[..., :g.proj], "part_o": part_o, "part_ml": part_ml,
                "counters": np.zeros((num_seqs, g.hq))}

    outputs = {
        "out": OutputSpec(DType.BF16, (num_seqs, g.hq, g.proj), ATTN_TOL),
        "part_o": OutputSpec(DType.FP32, part_o_shape, (1e-4, 1e-3)),
        "part_ml": OutputSpec(DType.FP32, part_ml_shape, (1e-4, 1e-4)),
        "counters": OutputSpec(DType.I32, (num_seqs, g.hq)),
    }
    mask = {"part_o": np.broadcast_to(active[..., None], part_o_shape),
            "part_ml": np.broadcast_to(active[..., None], part_ml_shape)}
    return KernelCase(name, "attention_twins" if traced or twin else "attention", inputs,
                      outputs, run, oracle, mask)


@kernel_cases("attention")
def decode_cases(rng: np.random.Generator) -> list[KernelCase]:
    qwen3_8b, qwen3_06b = Geometry(32, 8, 128, 16), Geometry(16, 8, 128, 16)
    traced = traced_twins_apply()
    return [
        # kv_len 1 (one active split of 8); 50 (2 active: below 8 x 32 keys); 300 (all 8,
        # 38 keys each, a second load round for the last 6)
        decode_case(rng, "decode D128 gqa4 bs16 splits8 few active", Geometry(8, 2, 128, 16),
                    [1, 50, 300], 8),
        decode_case(rng, "decode D64 gqa3 bs16 splits4", Geometry(9, 3, 64, 16), [17, 33], 4),
        decode_case(rng, "decode D128 mha bs7 splits3", Geometry(2, 2, 128, 7), [100], 3),
        # groups above 4 heads run as 2 head-slice blocks a kv head (4 + 4, 4 + 2)
        decode_case(rng, "decode D64 gqa8 bs32 splits1", Geometry(8, 1, 64, 32), [70, 5], 1),
        decode_case(rng, "decode D128 gqa6 bs16 splits5", Geometry(12, 2, 128, 16), [90], 5),
        # split boundaries: 32 and 64 keys exactly fill 1 and 2 minimum splits, 33 spills one
        # key into a second; 33 x 32 = 1056 fills all 33 splits (Qwen3-8B's heads at batch 1)
        decode_case(rng, "decode D128 gqa2 bs16 splits32 boundaries", qwen3_06b,
                    [32, 64, 33, 31], 32),
        decode_case(rng, "decode D128 gqa4 bs16 splits33 full", qwen3_8b, [1056], 33),
        # one long split per sequence (4 load rounds), beside a kv_len 1 sequence
        decode_case(rng, "decode D64 gqa2 bs16 splits2 long", Geometry(4, 2, 64, 16),
                    [1, 500], 2),
        # Qwen3-8B at context 512 on 33 splits: 16 active splits of 32 keys
        decode_case(rng, "decode D128 gqa4 bs16 splits33 ctx512", qwen3_8b, [512], 33),
        # D 256, a group of 8 heads (two slices), 1 to all 8 active splits
        decode_case(rng, "decode D256 gqa8 bs16 splits8", Geometry(16, 2, 256, 16),
                    [1, 50, 300, 700], 8),
        # Qwen3-30B-A3B's heads: D 128, a group of 8 (two slices), context 512 on 33 splits
        decode_case(rng, "decode D128 gqa8 bs16 splits33 (qwen3-30b-a3b)",
                    Geometry(32, 4, 128, 16), [512, 1], 33),
        # the clustered kernel's boundaries (8 or more splits: splits of 64 keys, 8 to a
        # cluster): 1 active split (direct), 2 (one cluster), 8 (one full cluster), 9 (a
        # second cluster with one keyed block), 10 (two, merged through the partials)
        decode_case(rng, "decode D128 gqa2 bs16 splits16 cluster boundaries", qwen3_06b,
                    [64, 65, 512, 513, 600], 16),
        # the clustered kernel's phase-traced twin (tools/gpu/trace_decode_attn.py) at
        # Qwen3.5's heads: direct, one cluster, two
        *([decode_case(rng, "decode D256 gqa8 bs16 splits16 cluster traced",
                       Geometry(16, 2, 256, 16), [40, 300, 700], 16, traced=True)]
          if traced else []),
        # many load rounds a split (Qwen3-8B's heads at batch 64: one split of 1,536 keys,
        # 48 rounds) with the loop's L2 prefetch and on its one-round twin; a split ending
        # within the prefetch distance, and a sequence of one key
        decode_case(rng, "decode D128 gqa4 bs16 splits1 rounds48", qwen3_8b, [1536, 70, 1], 1),
        decode_case(rng, "decode D128 gqa4 bs16 splits1 rounds48 ahead1", qwen3_8b,
                    [1536, 70, 1], 1, twin="ahead1"),
        # the clustered kernel taking its clusters split-major: one cluster, several, a
        # sequence of one key, on Qwen3-0.6B's and Qwen3.5's heads
        decode_case(rng, "decode D128 gqa2 bs16 splits33 clusters split_major", qwen3_06b,
                    [512, 1500, 1, 65], 33, twin="split_major"),
        decode_case(rng, "decode D256 gqa8 bs16 splits16 cluster split_major",
                    Geometry(16, 2, 256, 16), [40, 300, 700], 16, twin="split_major"),
        # the clustered kernel at D 64 (a shortest split is one load round; 600 keys are
        # splits of 75, two rounds through the loop) and a group of 3
        decode_case(rng, "decode D64 gqa3 bs16 splits8 cluster", Geometry(9, 3, 64, 16),
                    [17, 100, 600], 8),
        # the session-7 pull merge (ATLAS_DECODE_ATTN_B1_CHAIN=0): one cluster, several, a
        # sequence of one key, D 256
        decode_case(rng, "decode D128 gqa2 bs16 splits33 clusters pull", qwen3_06b,
                    [512, 1500, 1, 65], 33, twin="pull"),
        decode_case(rng, "decode D256 gqa8 bs16 splits16 cluster pull",
                    Geometry(16, 2, 256, 16), [40, 300, 700], 16, twin="pull"),
    ]
