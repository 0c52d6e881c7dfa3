"""Reference for the attention kernels over the paged KV cache.

Specification (all arithmetic float32 on bf16-widened inputs):

* scores s = (q . k) * scale; causal: the query at absolute position p sees keys 0..p.
* prefill: P = exp(s - max), l = sum P, O = (P @ V) / l, rounded once to bf16. The
  reference evaluates this in float64, i.e. as the exact softmax: a query's output then does
  not depend on how its sequence was chunked or batched (float32 sums would, through their
  order). P is NOT rounded to bf16: the tensor-core kernel feeds P to its PV mma as two bf16 parts
  (hi + lo, ~16 significant bits), so float32 P is its exact specification. (A single
  bf16 P would leave kernel and reference whole bf16 ulps apart wherever float32 noise in
  the scores flips a rounding, which no reference can reproduce.)
* decode: split-K by ops.attention.decode_split_rule: with
  c = max(ceil(kv_len / num_splits), DECODE_MIN_KEYS_PER_SPLIT), active split i covers
  keys [i*c, min((i+1)*c, kv_len)) for i < ceil(kv_len / c). Each active split writes m
  (max score, natural-log units), l (sum of exp(s - m)) and o (its own softmax-weighted
  sum of V, already divided by l), all float32 and with P unrounded (decode runs on CUDA
  cores); inactive splits write nothing. The merge (the last split to finish in
  decode_attn_bf16, the combine kernel after the long-context kernel) takes the active
  splits with weights l_i * exp(m_i - max m) and rounds once to bf16; a sequence with no
  keys at all gets zeros. (decode_attn_bf16 with one active split writes its o directly and
  no partials: within float rounding of the same merge.)
* clustered decode (decode_attn_cluster_bf16, decode_attn_rope_cluster_bf16): the same with
  ops.attention.decode_cluster_rule's partials (a cluster's splits, merged on chip, are one
  partial; their own shortest split is DECODE_CLUSTER_MIN_KEYS).
* decode with the rope fused (decode_attn_rope_bf16): what it replaces, qk_norm_rope_kv's
  reference (one token per sequence) into a private q buffer and the caches, then decode.
* verification decode (decode_attn_verify_bf16): every row is decode over its own kv_len
  and block-table row with ops.attention_verify.verify_split_rule (whole 64-key tiles); the
  kernel's partials (m in log2 units, only rows of several splits) are its scratch.
* its clustered entry (decode_attn_verify_cluster_bf16): qk_norm_rope_kv's reference (q into
  a private buffer), then every row over its own keys as one partial (the long kernel's
  one-split specification): the cluster's partials never leave the chip.
* the twins without the loop's L2 prefetch (*_ahead1_bf16): their kernel's specification.
* the phase-traced twins (*_trace_bf16): their untraced kernel's specification; the trace
  buffer is the device's clock readings, which the host leaves untouched.
* proj_dim (prefill, the long kernel's entries, the combine): the same attention over the
  head_dim-long cache and q rows, of which out keeps each head's first proj_dim elements,
  rows [hq * proj_dim] (a padded head, ops.attention.padded_head_dim: the rest are zeros'
  products); the rope-fused entries read qkv rows of proj_dim-long heads rotating whole
  (qk_norm_rope_kv_partial_bf16's padded form).
* sinks (the same entries; bf16 [hq], 0: none): head h's softmax denominator also sums
  exp(sinks[h] - max), the sink's own column dropped (gpt-oss): O = (P @ V) / (l + exp(sink
  - max)). The partials stay the plain ones (m, l, o / l); the sink joins where they are
  merged (the combine, the long kernel's merge) or written whole (its one split:
  o * l / (l + exp(sink - m))), and a sequence without keys still gets zeros.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import (DECODE_ATTN, DECODE_ATTN_AHEAD1, DECODE_ATTN_CLUSTER,
                          DECODE_ATTN_CLUSTER_PULL, DECODE_ATTN_CLUSTER_SPLIT_MAJOR,
                          DECODE_ATTN_CLUSTER_TRACE,
                          DECODE_ATTN_COMBINE, DECODE_ATTN_COMBINE_EARLY, DECODE_ATTN_LONG,
                          DECODE_ATTN_LONG_D256,
                          DECODE_ATTN_LONG_D256_TRACE,
                          DECODE_ATTN_LONG_ROPE_EARLY, DECODE_ATTN_LONG_ROPE_EARLY_D64,
                          DECODE_ATTN_LONG_ROPE_EARLY_D128, DECODE_ATTN_LONG_ROPE_EARLY_EXACT,
                          DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D64,
                          DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D128,
                          DECODE_ATTN_LONG_ROPE_EARLY_GATED_D256,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE, DECODE_ATTN_LONG_ROPE_EARLY_LATE_D64,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_D128,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_D256,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_TRACE_D256,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D64,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D128,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_TRACE, DECODE_ATTN_LONG_ROPE_EARLY_TRACE,
                          DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D64,
                          DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D128,
                          DECODE_ATTN_LONG_ROPE_STAGED_TRACE,
                          DECODE_ATTN_LONG_ROPE_LATE, DECODE_ATTN_LONG_ROPE_STAGED,
                          DECODE_ATTN_LONG_ROPE_WAIT,
                          DECODE_ATTN_ROPE,
                          DECODE_ATTN_ROPE_AHEAD1, DECODE_ATTN_ROPE_CLUSTER,
                          DECODE_ATTN_ROPE_CLUSTER_PULL,
                          DECODE_ATTN_ROPE_CLUSTER_SPLIT_MAJOR,
                          DECODE_ATTN_ROPE_CLUSTER_TRACE, DECODE_ATTN_ROPE_TRACE,
                          DECODE_ATTN_ROPE_WAIT, DECODE_ATTN_VERIFY,
                          DECODE_ATTN_VERIFY_CLUSTER, DECODE_ATTN_VERIFY_ROPE, PREFILL_ATTN,
                          PREFILL_ATTN_SM90, PREFILL_ATTN_SM90_QREG,
                          PREFILL_ATTN_SM90_WIDE)
from ..ops.attention import decode_cluster_rule, decode_split_rule
from ..ops.attention_long import early_split_rule
from ..ops.attention_verify import verify_split_rule
from . import HostMemory, WithScratch, reference
from .attn_gate import sigmoid_gate_mul_bf16
from .rope_kv import qk_norm_rope_kv_bf16, qk_norm_rope_kv_partial_bf16

#: (keys per partial, partials) of a sequence's kv_len on a num_splits grid
SplitRule = Callable[[int, int], tuple[int, int]]

#: queries attended per numpy pass in prefill: bounds the [heads, rows, keys] score array
_QUERY_CHUNK = 256


def gather_codes(mem: HostMemory, cache: int, table: np.ndarray, kv_len: int, hkv: int,
                 block_size: int, head_dim: int, dtype: type) -> np.ndarray:
    """The first kv_len cached tokens of one sequence, raw elements of `dtype` (uint16 bf16
    bits, uint8 fp8 codes) as [hkv, kv_len, head_dim]: the paged-pool walk both caches share."""
    n_blocks = -(-kv_len // block_size)
    if n_blocks > table.size:
        raise ValueError(f"kv_len {kv_len} needs {n_blocks} blocks; block table has "
                         f"{table.size}")
    if n_blocks == 0:
        return np.zeros((hkv, 0, head_dim), dtype=dtype)
    ids = table[:n_blocks].astype(np.int64)
    if ids.min() < 0:
        raise ValueError(f"negative block id in the first {n_blocks} block table entries")
    per_block = hkv * block_size * head_dim
    pool = mem.view(cache, dtype, (int(ids.max()) + 1) * per_block)
    blocks = pool.reshape(-1, hkv, block_size, head_dim)[ids]        # [nb, hkv, bs, D]
    tokens = blocks.transpose(1, 0, 2, 3).reshape(hkv, n_blocks * block_size, head_dim)
    return tokens[:, :kv_len]


def gather_kv(mem: HostMemory, cache: int, table: np.ndarray, kv_len: int, hkv: int,
              block_size: int, head_dim: int) -> np.ndarray:
    """The first kv_len cached tokens of one sequence as float32 [hkv, kv_len, head_dim]."""
    return bf16_bits_to_f32(gather_codes(mem, cache, table, kv_len, hkv, block_size, head_dim,
                                         np.uint16))


def _tables(mem: HostMemory, block_tables: int, kv_lens: int, num_seqs: int,
            max_blocks: int) -> tuple[np.ndarray, np.ndarray]:
    tables = mem.view(block_tables, np.int32, num_seqs * max_blocks).reshape(num_seqs,
                                                                             max_blocks)
    return tables, mem.view(kv_lens, np.int32, num_seqs)


def window_start(kv_len: int, window: int) -> int:
    """The first key a decode query (at position kv_len - 1) sees under a sliding window
    (0: none): kv_len - window, or 0."""
    return max(0, kv_len - window) if window else 0


def sink_logits(mem: HostMemory, sinks: int, hq: int) -> np.ndarray | None:
    """float64 [hq] attention sinks from their bf16 at `sinks` (None where the pointer is
    null: no sink)."""
    if not sinks:
        return None
    return bf16_bits_to_f32(mem.view(sinks, np.uint16, hq)).astype(np.float64)


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, positions: np.ndarray,
                     scale: float, window: int = 0,
                     sinks: np.ndarray | None = None) -> np.ndarray:
    """Prefill attention of one sequence: q [T, hq, D], k/v [hkv, L, D], query t at absolute
    position positions[t] seeing keys up to it (and, with a sliding window, from
    positions[t] - window + 1 on), computed in float64; `sinks` [hq] join each head's
    denominator. Returns float32 [T, hq, D] (before output rounding)."""
    t_all, hq, d = q.shape
    hkv = k.shape[0]
    g = hq // hkv
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    out = np.empty((t_all, hq, d), dtype=np.float32)
    key_pos = np.arange(k.shape[1])
    kt = k.transpose(0, 2, 1)[:, None]                                   # [hkv, 1, D, L]
    for t0 in range(0, t_all, _QUERY_CHUNK):
        qc = q[t0:t0 + _QUERY_CHUNK]
        t = qc.shape[0]
        qg = qc.reshape(t, hkv, g, d).transpose(1, 2, 0, 3)              # [hkv, G, t, D]
        s = np.matmul(qg, kt) * scale                                    # [hkv, G, t, L]
        hidden = key_pos[None, :] > positions[t0:t0 + t, None]
        if window:
            hidden |= key_pos[None, :] <= positions[t0:t0 + t, None] - window
        s[:, :, hidden] = -np.inf
        m = s.max(axis=-1, keepdims=True)
        p = np.exp(s - m)
        l = p.sum(axis=-1, keepdims=True)
        if sinks is not None:                                           # [hq] -> [hkv, G, 1, 1]
            l = l + np.exp(sinks.reshape(hkv, g, 1, 1) - m)
        o = np.matmul(p, v[:, None]) / l                                # [hkv, G, t, D]
        out[t0:t0 + t] = o.transpose(2, 0, 1, 3).reshape(t, hq, d)
    return out


@reference(PREFILL_ATTN)
@reference(PREFILL_ATTN_SM90)
@reference(PREFILL_ATTN_SM90_QREG)
@reference(PREFILL_ATTN_SM90_WIDE)
def prefill_attn_bf16(mem: HostMemory, grid: Dim3, block: Dim3, q: int, k_cache: int,
                      v_cache: int, block_tables: int, cu_q: int, kv_lens: int, out: int,
                      num_seqs: int, hq: int, hkv: int, head_dim: int, block_size: int,
                      max_blocks: int, scale: float, window: int, proj_dim: int,
                      sinks: int = 0) -> None:
    """(The Hopper wgmma entries take no sinks: `sinks` keeps its default.)"""
    prefill_over_gathered(
        mem, q, cu_q, block_tables, kv_lens, out, num_seqs, hq, head_dim, max_blocks, scale,
        lambda table, kv_len: (
            gather_kv(mem, k_cache, table, kv_len, hkv, block_size, head_dim),
            gather_kv(mem, v_cache, table, kv_len, hkv, block_size, head_dim)), window,
        proj_dim, sink_logits(mem, sinks, hq))


def prefill_over_gathered(mem: HostMemory, q: int, cu_q: int, block_tables: int, kv_lens: int,
                          out: int, num_seqs: int, hq: int, head_dim: int, max_blocks: int,
                          scale: float,
                          gather: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]],
                          window: int = 0, proj_dim: int | None = None,
                          sinks: np.ndarray | None = None) -> None:
    """Causal prefill attention of every sequence's chunk over its cached keys, which
    `gather(block_table_row, kv_len)` returns as float32 (k, v) [hkv, kv_len, D]: the one
    loop of the bf16 and the quantized-cache references. out keeps each head's first
    proj_dim (default D) elements; `sinks` [hq] (None: none) as causal_attention's."""
    p = head_dim if proj_dim is None else proj_dim
    cu = mem.view(cu_q, np.int32, num_seqs + 1).astype(np.int64)
    tables, lens = _tables(mem, block_tables, kv_lens, num_seqs, max_blocks)
    total = int(cu[-1])
    qf = bf16_bits_to_f32(mem.view(q, np.uint16, total * hq * head_dim)).reshape(
        total, hq, head_dim)
    o = mem.view(out, np.uint16, total * hq * p).reshape(total, hq, p)
    for b in range(num_seqs):
        lo, hi, kv_len = int(cu[b]), int(cu[b + 1]), int(lens[b])
        if hi == lo:
            continue
        if kv_len < hi - lo:
            raise ValueError(f"sequence {b}: kv_len {kv_len} < q_len {hi - lo} (the chunk's "
                             f"keys must already be in the cache)")
        k, v = gather(tables[b], kv_len)
        positions = np.arange(kv_len - (hi - lo), kv_len)
        o[lo:hi] = f32_to_bf16_bits(causal_attention(qf[lo:hi], k, v, positions, scale,
                                                     window, sinks)[..., :p])


def split_partials(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
                   num_splits: int, rule: SplitRule = decode_split_rule
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Decode partials of one sequence's active splits: q [hq, D], k/v [hkv, L, D] float32.

    Returns (o [hq, active, D], ml [hq, active, 2]) per the split rule above (`rule`)."""
    hq, d = q.shape
    hkv, kv_len = k.shape[0], k.shape[1]
    chunk, active = rule(kv_len, num_splits)
    padded = chunk * active
    kp = np.zeros((hkv, padded, d), dtype=np.float32)
    vp = np.zeros((hkv, padded, d), dtype=np.float32)
    kp[:, :kv_len], vp[:, :kv_len] = k, v
    qg = q.reshape(hkv, hq // hkv, 1, d)
    s = (np.matmul(qg, kp.transpose(0, 2, 1)[:, None]) * np.float32(scale))[:, :, 0]
    s[:, :, kv_len:] = -np.inf                                          # [hkv, G, padded]
    s = s.reshape(hkv, hq // hkv, active, chunk)
    m = s.max(axis=-1)                                                  # [hkv, G, active]
    p = np.exp(s - m[..., None])                                        # every split has a key
    l = p.sum(axis=-1)
    o = np.einsum("hgsc,hscd->hgsd", p, vp.reshape(hkv, active, chunk, d)) / l[..., None]
    ml = np.stack([m, l], axis=-1).astype(np.float32)
    return o.reshape(hq, active, d), ml.reshape(hq, active, 2)


def _sequence_partials(mem: HostMemory, q: int, k_cache: int, v_cache: int,
                       block_tables: int, kv_lens: int, num_seqs: int, hq: int, hkv: int,
                       head_dim: int, block_size: int, max_blocks: int, num_splits: int,
                       scale: float, rule: SplitRule = decode_split_rule, window: int = 0
                       ) -> list[tuple[np.ndarray, np.ndarray]]:
    """(o [hq, active, D], ml [hq, active, 2]) of each sequence's active splits: under a
    sliding window, the splits of its last `window` keys (`window_start` on)."""
    tables, lens = _tables(mem, block_tables, kv_lens, num_seqs, max_blocks)
    qf = bf16_bits_to_f32(mem.view(q, np.uint16, num_seqs * hq * head_dim)).reshape(
        num_seqs, hq, head_dim)
    parts = []
    for b in range(num_seqs):
        kv_len = int(lens[b])
        first = window_start(kv_len, window)
        k = gather_kv(mem, k_cache, tables[b], kv_len, hkv, block_size, head_dim)[:, first:]
        v = gather_kv(mem, v_cache, tables[b], kv_len, hkv, block_size, head_dim)[:, first:]
        parts.append(split_partials(qf[b], k, v, scale, num_splits, rule))
    return parts


def decode_partials_bf16(mem: HostMemory, q: int, k_cache: int, v_cache: int,
                         block_tables: int, kv_lens: int, part_o: int, part_ml: int,
                         num_seqs: int, hq: int, hkv: int, head_dim: int, block_size: int,
                         max_blocks: int, num_splits: int, scale: float,
                         rule: SplitRule = decode_split_rule, window: int = 0) -> None:
    """The active splits' partials of every sequence (part_o / part_ml)."""
    po = mem.view(part_o, np.float32, num_seqs * hq * num_splits * head_dim).reshape(
        num_seqs, hq, num_splits, head_dim)
    pml = mem.view(part_ml, np.float32, num_seqs * hq * num_splits * 2).reshape(
        num_seqs, hq, num_splits, 2)
    for b, (o, ml) in enumerate(_sequence_partials(
            mem, q, k_cache, v_cache, block_tables, kv_lens, num_seqs, hq, hkv, head_dim,
            block_size, max_blocks, num_splits, scale, rule, window)):
        po[b, :, :o.shape[1]], pml[b, :, :ml.shape[1]] = o, ml


@reference(DECODE_ATTN_LONG)
@reference(DECODE_ATTN_LONG_D256)
def decode_attn_long_bf16(mem: HostMemory, grid: Dim3, block: Dim3, q: int, k_cache: int,
                          v_cache: int, block_tables: int, kv_lens: int, part_o: int,
                          part_ml: int, counters: int, out: int, num_seqs: int, hq: int,
                          hkv: int, head_dim: int, block_size: int, max_blocks: int,
                          num_splits: int, scale: float, window: int, proj_dim: int,
                          sinks: int, merge_rule: SplitRule = decode_split_rule) -> None:
    """The long kernel's whole output: the active splits' partials, and given counters
    their merge into out (the last split's, SplitMerge, over `merge_rule`'s splits; counters
    are left as they are, zero), or with one split the normalized output instead (that one
    partial, its denominator with the sink; zeros for a sequence without keys: what the
    combine would write) and no partials. Under a sliding window the splits cover the
    window's keys only."""
    if num_splits > 1:
        rule = merge_rule if counters else decode_split_rule
        decode_partials_bf16(mem, q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                             num_seqs, hq, hkv, head_dim, block_size, max_blocks, num_splits,
                             scale, rule, window)
        if counters:
            decode_attn_combine_bf16(mem, grid, block, part_o, part_ml, kv_lens, out, num_seqs,
                                     hq, head_dim, num_splits, window, proj_dim, sinks,
                                     rule=rule)
        return
    sink = sink_logits(mem, sinks, hq)
    o = np.zeros((num_seqs, hq, head_dim), dtype=np.float32)
    for b, (po, ml) in enumerate(_sequence_partials(
            mem, q, k_cache, v_cache, block_tables, kv_lens, num_seqs, hq, hkv, head_dim,
            block_size, max_blocks, 1, scale, window=window)):
        if po.shape[1]:
            o[b] = po[:, 0] * sink_share(ml[:, 0].astype(np.float64), sink)[:, None]
    write_heads(mem, out, o, proj_dim)


def sink_share(ml: np.ndarray, sink: np.ndarray | None) -> np.ndarray:
    """l / (l + exp(sink - m)) per head of (m, l) [hq, 2]: what a softmax-normalized output
    is scaled by when the sink joins its denominator (1 without a sink)."""
    if sink is None:
        return np.ones(ml.shape[0])
    m, l = ml[:, 0], ml[:, 1]
    return l / (l + np.exp(sink - m))


def write_heads(mem: HostMemory, out: int, o: np.ndarray, proj_dim: int) -> None:
    """out [rows, hq * proj_dim] bf16 = the first proj_dim elements of each head of the
    float32 o [rows, hq, D], rounded once."""
    rows, hq = o.shape[:2]
    mem.view(out, np.uint16, rows * hq * proj_dim)[:] = f32_to_bf16_bits(
        o[..., :proj_dim]).reshape(-1)


@reference(DECODE_ATTN_LONG_ROPE_LATE)  # the staged entry, its PDL trigger moved: the same bits
@reference(DECODE_ATTN_LONG_ROPE_STAGED)  # its prologue's reads reordered: the same bits
@reference(DECODE_ATTN_LONG_ROPE_WAIT)
def decode_attn_long_rope_bf16(mem: HostMemory, grid: Dim3, block: Dim3, qkv: int, k_cache: int,
                               v_cache: int, q_norm_w: int, k_norm_w: int, cos_sin: int,
                               positions: int, slots: int, block_tables: int, kv_lens: int,
                               part_o: int, part_ml: int, counters: int, out: int,
                               num_seqs: int, hq: int, hkv: int, head_dim: int,
                               block_size: int, max_blocks: int, num_splits: int, scale: float,
                               eps: float, window: int, proj_dim: int, sinks: int,
                               merge_rule: SplitRule = decode_split_rule) -> None:
    """qk_norm_rope_kv (q into scratch, k and v into the caches at the slots; heads of
    proj_dim elements rotating whole, padded to head_dim), then the long kernel over the
    caches (merging `merge_rule`'s splits)."""
    chained = WithScratch(mem, num_seqs * hq * head_dim * 2)
    qk_norm_rope_kv_partial_bf16(chained, grid, block, qkv, WithScratch.ADDRESS, k_cache,
                                 v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots,
                                 num_seqs, hq, hkv, head_dim, proj_dim, proj_dim, 0,
                                 block_size, eps, proj_dim)
    decode_attn_long_bf16(chained, grid, block, WithScratch.ADDRESS, k_cache, v_cache,
                          block_tables, kv_lens, part_o, part_ml, counters, out, num_seqs, hq,
                          hkv, head_dim, block_size, max_blocks, num_splits, scale, window,
                          proj_dim, sinks, merge_rule)


@reference(DECODE_ATTN_LONG_ROPE_EARLY_LATE)  # its PDL trigger moved: the same bits
@reference(DECODE_ATTN_LONG_ROPE_EARLY)
def decode_attn_long_rope_early_bf16(mem: HostMemory, grid: Dim3, block: Dim3, *args: float
                                     ) -> None:
    """The staged entry's output with a merging launch's splits whole 64-key tiles
    (ops/attention_long.early_split_rule); the same arguments."""
    decode_attn_long_rope_bf16(mem, grid, block, *args, merge_rule=early_split_rule)


@reference(DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT)
@reference(DECODE_ATTN_LONG_ROPE_EARLY_EXACT)
def decode_attn_long_rope_early_exact_bf16(mem: HostMemory, grid: Dim3, block: Dim3,
                                           *args: float, only_dim: int = 0,
                                           base: Callable[..., None] | None = None) -> None:
    """The early entry's output (or `base`'s: the staged entry's _exact twins) for heads of
    head_dim elements without sinks, of head dim `only_dim` where not 0 (the kernel traps on
    other arguments: ops/attention_long.exact_heads); the same arguments."""
    head_dim, proj_dim, sinks = args[17], args[-2], args[-1]
    if proj_dim != head_dim or sinks:
        raise ValueError(f"decode_attn_long_rope_*_exact_bf16: proj_dim {proj_dim} of "
                         f"head_dim {head_dim}, sinks {sinks:#x} (needs neither)")
    decode_attn_long_rope_early_one_dim_bf16(mem, grid, block, *args, only_dim=only_dim,
                                             base=base)


def decode_attn_long_rope_early_one_dim_bf16(mem: HostMemory, grid: Dim3, block: Dim3,
                                             *args: float, only_dim: int = 0,
                                             base: Callable[..., None] | None = None) -> None:
    """The early entry's output (or `base`'s) where head_dim is `only_dim` (0: any; the
    _d128 / _d64 twins, which hold that head dim's code only, trap on another); the same
    arguments."""
    head_dim = args[17]
    if only_dim and head_dim != only_dim:
        raise ValueError(f"decode_attn_long_rope_*_d{only_dim}_bf16: head_dim {head_dim}")
    (base or decode_attn_long_rope_early_bf16)(mem, grid, block, *args)


for _sig, _fn, _dim in (
        (DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D128, decode_attn_long_rope_early_exact_bf16, 128),
        (DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D128, decode_attn_long_rope_early_exact_bf16,
         128),
        (DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D64, decode_attn_long_rope_early_exact_bf16, 64),
        (DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D64, decode_attn_long_rope_early_exact_bf16, 64),
        (DECODE_ATTN_LONG_ROPE_EARLY_D128, decode_attn_long_rope_early_one_dim_bf16, 128),
        (DECODE_ATTN_LONG_ROPE_EARLY_LATE_D128, decode_attn_long_rope_early_one_dim_bf16, 128),
        (DECODE_ATTN_LONG_ROPE_EARLY_D64, decode_attn_long_rope_early_one_dim_bf16, 64),
        (DECODE_ATTN_LONG_ROPE_EARLY_LATE_D64, decode_attn_long_rope_early_one_dim_bf16, 64)):
    reference(_sig)(partial(_fn, only_dim=_dim))
@reference(DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_D256)  # its PDL trigger moved: the same bits
@reference(DECODE_ATTN_LONG_ROPE_EARLY_GATED_D256)
def decode_attn_long_rope_early_gated_bf16(
        mem: HostMemory, grid: Dim3, block: Dim3, qkv: int, k_cache: int, v_cache: int,
        q_norm_w: int, k_norm_w: int, cos_sin: int, positions: int, slots: int,
        block_tables: int, kv_lens: int, part_o: int, part_ml: int, counters: int, out: int,
        num_seqs: int, hq: int, hkv: int, head_dim: int, block_size: int, max_blocks: int,
        num_splits: int, scale: float, eps: float, window: int, proj_dim: int, sinks: int,
        q_pitch: int, rotary_dim: int, norm_offset: int) -> None:
    """Gated full attention's four launches composed: qk_norm_rope_kv_partial (q heads
    q_pitch apart, partial rotary, (1 + w) weights where norm_offset), the long kernel over the
    caches merging the early entries' whole-tile splits, then sigmoid_gate_mul of each head's
    gate (the head_dim elements after its q in the row) into out. Heads of head_dim elements,
    no sinks (the kernel traps on others)."""
    if proj_dim != head_dim or sinks:
        raise ValueError(f"decode_attn_long_rope_early_gated_d256_bf16: proj_dim {proj_dim} of "
                         f"head_dim {head_dim}, sinks {sinks:#x} (needs neither)")
    chained = WithScratch(mem, num_seqs * hq * head_dim * 2)
    qk_norm_rope_kv_partial_bf16(chained, grid, block, qkv, WithScratch.ADDRESS, k_cache,
                                 v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots,
                                 num_seqs, hq, hkv, head_dim, q_pitch, rotary_dim, norm_offset,
                                 block_size, eps, head_dim)
    decode_attn_long_bf16(chained, grid, block, WithScratch.ADDRESS, k_cache, v_cache,
                          block_tables, kv_lens, part_o, part_ml, counters, out, num_seqs, hq,
                          hkv, head_dim, block_size, max_blocks, num_splits, scale, window,
                          head_dim, sinks, early_split_rule)
    sigmoid_gate_mul_bf16(mem, grid, block, out, qkv + 2 * head_dim, out, num_seqs, hq,
                          head_dim, hq * q_pitch + 2 * hkv * head_dim, q_pitch)


for _sig, _dim in ((DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D128, 128),
                   (DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D64, 64)):
    reference(_sig)(partial(decode_attn_long_rope_early_exact_bf16, only_dim=_dim,
                            base=decode_attn_long_rope_bf16))


@reference(DECODE_ATTN_COMBINE)
@reference(DECODE_ATTN_COMBINE_EARLY)  # the same values; only its PDL trigger moves
def decode_attn_combine_bf16(mem: HostMemory, grid: Dim3, block: Dim3, part_o: int,
                             part_ml: int, kv_lens: int, out: int, num_seqs: int, hq: int,
                             head_dim: int, num_splits: int, window: int, proj_dim: int,
                             sinks: int, rule: SplitRule = decode_split_rule) -> None:
    """The merge of each sequence's active splits, as many as `rule` gives the keys its
    query sees (the window's under a sliding window), each head's first proj_dim elements;
    the sinks join the merged denominator."""
    po = mem.view(part_o, np.float32, num_seqs * hq * num_splits * head_dim).reshape(
        num_seqs, hq, num_splits, head_dim)
    pml = mem.view(part_ml, np.float32, num_seqs * hq * num_splits * 2).reshape(
        num_seqs, hq, num_splits, 2)
    lens = mem.view(kv_lens, np.int32, num_seqs)
    sink = sink_logits(mem, sinks, hq)
    o = np.zeros((num_seqs, hq, head_dim), dtype=np.float32)
    for b in range(num_seqs):
        kv_len = int(lens[b])
        active = rule(kv_len - window_start(kv_len, window), num_splits)[1]
        if active == 0:
            continue                                                    # no keys: zeros
        m, l = pml[b, :, :active, 0], pml[b, :, :active, 1]
        top = m.max(axis=-1, keepdims=True)
        w = l * np.exp(m - top)                                         # [hq, active]
        denominator = w.sum(axis=-1)
        if sink is not None:
            denominator = denominator + np.exp(sink - top[:, 0])
        o[b] = np.einsum("hs,hsd->hd", w, po[b, :, :active]) / denominator[:, None]
    write_heads(mem, out, o, proj_dim)


@reference(DECODE_ATTN)
def decode_attn_bf16(mem: HostMemory, grid: Dim3, block: Dim3, q: int, k_cache: int,
                     v_cache: int, block_tables: int, kv_lens: int, part_o: int, part_ml: int,
                     counters: int, out: int, num_seqs: int, hq: int, hkv: int, head_dim: int,
                     block_size: int, max_blocks: int, num_splits: int, scale: float,
                     rule: SplitRule = decode_split_rule) -> None:
    """The partials, then their merge (what the last split of each row does on the GPU);
    counters are left as they are (zero)."""
    decode_partials_bf16(mem, q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                         num_seqs, hq, hkv, head_dim, block_size, max_blocks, num_splits,
                         scale, rule)
    decode_attn_combine_bf16(mem, grid, block, part_o, part_ml, kv_lens, out, num_seqs, hq,
                             head_dim, num_splits, 0, head_dim, 0, rule=rule)



@reference(DECODE_ATTN_ROPE)
def decode_attn_rope_bf16(mem: HostMemory, grid: Dim3, block: Dim3, qkv: int, k_cache: int,
                          v_cache: int, q_norm_w: int, k_norm_w: int, cos_sin: int,
                          positions: int, slots: int, block_tables: int, kv_lens: int,
                          part_o: int, part_ml: int, counters: int, out: int, num_seqs: int,
                          hq: int, hkv: int, head_dim: int, block_size: int, max_blocks: int,
                          num_splits: int, scale: float, eps: float,
                          rule: SplitRule = decode_split_rule) -> None:
    chained = WithScratch(mem, num_seqs * hq * head_dim * 2)
    qk_norm_rope_kv_bf16(chained, grid, block, qkv, WithScratch.ADDRESS, k_cache, v_cache,
                         q_norm_w, k_norm_w, cos_sin, positions, slots, num_seqs, hq, hkv,
                         head_dim, block_size, eps)
    decode_attn_bf16(chained, grid, block, WithScratch.ADDRESS, k_cache, v_cache, block_tables,
                     kv_lens, part_o, part_ml, counters, out, num_seqs, hq, hkv, head_dim,
                     block_size, max_blocks, num_splits, scale, rule)


# the clustered kernels: the same specifications with their partials; the waiting twin the
# same as the rope-fused kernel
reference(DECODE_ATTN_CLUSTER)(partial(decode_attn_bf16, rule=decode_cluster_rule))
reference(DECODE_ATTN_ROPE_CLUSTER)(partial(decode_attn_rope_bf16, rule=decode_cluster_rule))
# their split-major twins: the same (only which block does which split differs)
reference(DECODE_ATTN_CLUSTER_SPLIT_MAJOR)(partial(decode_attn_bf16, rule=decode_cluster_rule))
reference(DECODE_ATTN_ROPE_CLUSTER_SPLIT_MAJOR)(
    partial(decode_attn_rope_bf16, rule=decode_cluster_rule))
# the pull-merge twins (the session-7 merge): the same (only how a cluster merges differs)
reference(DECODE_ATTN_CLUSTER_PULL)(partial(decode_attn_bf16, rule=decode_cluster_rule))
reference(DECODE_ATTN_ROPE_CLUSTER_PULL)(partial(decode_attn_rope_bf16, rule=decode_cluster_rule))
reference(DECODE_ATTN_ROPE_WAIT)(decode_attn_rope_bf16)


# verification rows: decode of each row on its own split rule (at least min_chunk keys a split)
@reference(DECODE_ATTN_VERIFY)
def decode_attn_verify_bf16(mem: HostMemory, grid: Dim3, block: Dim3, q: int, k_cache: int,
                            v_cache: int, block_tables: int, kv_lens: int, part_o: int,
                            part_ml: int, counters: int, out: int, num_rows: int, hq: int,
                            hkv: int, head_dim: int, block_size: int, max_blocks: int,
                            num_splits: int, scale: float, min_chunk: int) -> None:
    decode_attn_bf16(mem, grid, block, q, k_cache, v_cache, block_tables, kv_lens, part_o,
                     part_ml, counters, out, num_rows, hq, hkv, head_dim, block_size,
                     max_blocks, num_splits, scale,
                     rule=partial(verify_split_rule, min_chunk=int(min_chunk)))


# the same with qk_norm_rope_kv's work first (q written to the q buffer, as the kernel does)
@reference(DECODE_ATTN_VERIFY_ROPE)
def decode_attn_verify_rope_bf16(mem: HostMemory, grid: Dim3, block: Dim3, qkv: int, q: int,
                                 k_cache: int, v_cache: int, q_norm_w: int, k_norm_w: int,
                                 cos_sin: int, positions: int, slots: int, block_tables: int,
                                 kv_lens: int, part_o: int, part_ml: int, counters: int,
                                 out: int, num_rows: int, hq: int, hkv: int, head_dim: int,
                                 block_size: int, max_blocks: int, num_splits: int,
                                 scale: float, min_chunk: int, eps: float) -> None:
    qk_norm_rope_kv_bf16(mem, grid, block, qkv, q, k_cache, v_cache, q_norm_w, k_norm_w,
                         cos_sin, positions, slots, num_rows, hq, hkv, head_dim, block_size,
                         eps)
    decode_attn_verify_bf16(mem, grid, block, q, k_cache, v_cache, block_tables, kv_lens,
                            part_o, part_ml, counters, out, num_rows, hq, hkv, head_dim,
                            block_size, max_blocks, num_splits, scale, min_chunk)


# the clustered entry: the same append, then each row over its own keys in one partial (its
# blocks' partials merge on chip: nothing else is written; q is not)
@reference(DECODE_ATTN_VERIFY_CLUSTER)
def decode_attn_verify_cluster_bf16(mem: HostMemory, grid: Dim3, block: Dim3, qkv: int,
                                    k_cache: int, v_cache: int, q_norm_w: int, k_norm_w: int,
                                    cos_sin: int, positions: int, slots: int,
                                    block_tables: int, kv_lens: int, out: int, num_rows: int,
                                    hq: int, hkv: int, head_dim: int, block_size: int,
                                    max_blocks: int, scale: float, eps: float) -> None:
    decode_attn_long_rope_bf16(mem, grid, block, qkv, k_cache, v_cache, q_norm_w, k_norm_w,
                               cos_sin, positions, slots, block_tables, kv_lens, 0, 0, 0, out,
                               num_rows, hq, hkv, head_dim, block_size, max_blocks, 1, scale,
                               eps, 0, head_dim, 0)


# the A/B twins of the loop's prefetch: the same specifications
reference(DECODE_ATTN_AHEAD1)(decode_attn_bf16)
reference(DECODE_ATTN_ROPE_AHEAD1)(decode_attn_rope_bf16)


def _untraced(fn: Callable[..., None]) -> Callable[..., None]:
    """A traced twin's reference: `fn` on every value but the last (the trace buffer, which
    the host leaves as it is: it has no device clock to stamp)."""

    def traced(mem: HostMemory, grid: Dim3, block: Dim3, *values: int | float) -> None:
        fn(mem, grid, block, *values[:-1])
    return traced


reference(DECODE_ATTN_ROPE_TRACE)(_untraced(decode_attn_rope_bf16))
reference(DECODE_ATTN_ROPE_CLUSTER_TRACE)(
    _untraced(partial(decode_attn_rope_bf16, rule=decode_cluster_rule)))
reference(DECODE_ATTN_CLUSTER_TRACE)(_untraced(partial(decode_attn_bf16, rule=decode_cluster_rule)))
reference(DECODE_ATTN_LONG_ROPE_EARLY_TRACE)(
    _untraced(partial(decode_attn_long_rope_early_exact_bf16, only_dim=128)))
reference(DECODE_ATTN_LONG_ROPE_EARLY_LATE_TRACE)(
    _untraced(partial(decode_attn_long_rope_early_exact_bf16, only_dim=128)))
reference(DECODE_ATTN_LONG_ROPE_STAGED_TRACE)(_untraced(decode_attn_long_rope_bf16))
reference(DECODE_ATTN_LONG_D256_TRACE)(_untraced(decode_attn_long_bf16))
reference(DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_TRACE_D256)(
    _untraced(decode_attn_long_rope_early_gated_bf16))
