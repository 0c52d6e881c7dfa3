"""Launch builders for attention over the paged KV cache (prefill and split-K decode).

Geometry mirrors kernels/hopper/common/attention.cu: prefill runs one 4-warp block per
(q head, 64-query tile, sequence), heaviest (last) query tiles first; decode runs one
4-warp block per (split, head slice, sequence), a slice being up to DECODE_HEADS_PER_BLOCK q
heads of one kv head's group (`decode_head_slices` blocks per kv head side by side, not
serial passes); the last of a row's active splits to finish merges the partials (one
launch). Only the splits the live kv_len needs (`decode_split_rule`) do work; the others
exit at once. Grids of DECODE_CLUSTER_SPLITS splits or more (the latency-bound small
batches) take the clustered kernels, whose clusters of that many splits merge on chip
(`decode_partial_rule`). `decode_attention_rope` is the same launch with the q/k norm, RoPE and KV
append of `rope.qk_norm_rope_kv` done inside it (`rope_fusable` says when it applies).

A head dim the kernels are not compiled for (Phi-3-mini's 96) attends padded
(`padded_head_dim`: at D = 128, its cache and q rows the head's elements then zeros), the
projections staying compact: every launch here takes `proj_dim` (default head_dim), the head's
length in the qkv rows read and the attention rows written ([tokens, hq * proj_dim]).
Padded heads decode on the long kernel only (`long_only`), as sliding windows do, and so do
attention sinks (gpt-oss: `sinks`, bf16 [hq], one more logit a q head in every softmax
denominator, its column dropped; 0: none), which prefill, the long kernel and the combine
take.
"""

from __future__ import annotations

from ...core.head_dims import HEAD_DIMS, SINK_HEAD_DIMS, padded_head_dim
from ..gpu import DevicePtr, KernelSig, Stream
from ..kernel_abi import (DECODE_ATTN, DECODE_ATTN_AHEAD1, DECODE_ATTN_CLUSTER,
                          DECODE_ATTN_CLUSTER_PULL, DECODE_ATTN_CLUSTER_SPLIT_MAJOR,
                          DECODE_ATTN_CLUSTER_TRACE, DECODE_ATTN_COMBINE,
                          DECODE_ATTN_COMBINE_EARLY, DECODE_ATTN_ROPE,
                          DECODE_ATTN_ROPE_AHEAD1, DECODE_ATTN_ROPE_CLUSTER,
                          DECODE_ATTN_ROPE_CLUSTER_PULL,
                          DECODE_ATTN_ROPE_CLUSTER_SPLIT_MAJOR,
                          DECODE_ATTN_ROPE_CLUSTER_TRACE, DECODE_ATTN_ROPE_TRACE,
                          DECODE_ATTN_ROPE_WAIT, PREFILL_ATTN)
from . import KernelCache
from ._preconditions import proj_dim_of
from .early_trigger import triggers_early
from .routes import KernelRoutes
from .attention_long import (LONG_HEAD_DIMS, LONG_ROPE_HEAD_DIMS, decode_attention_long,
                             decode_attention_long_rope, long_launch_splits, merges_splits,
                             slides, uses_long)
from .attention_sm90 import PrefillPartials, prefill_attention_sm90, uses_sm90

#: query rows per prefill block (4 warps x 16 rows)
PREFILL_QUERY_TILE = 64
ATTN_THREADS = 128
#: the shortest decode split (attention.cu kMinKeysPerSplit): one load round of a block, so
#: a short context runs a few one-round-trip blocks however many splits the grid has
DECODE_MIN_KEYS_PER_SPLIT = 32
#: q heads one decode block serves (attention.cu kDecodeHeadsPerPass)
DECODE_HEADS_PER_BLOCK = 4
#: splits of a thread-block cluster of the clustered decode kernels (attention.cu
#: kClusterSplits, the portable cluster size): grids of at least this many splits take them
DECODE_CLUSTER_SPLITS = 8
#: the clustered kernels' shortest split (attention.cu kClusterMinKeys): one cluster covers
#: DECODE_CLUSTER_SPLITS x 64 = 512 keys, merged on chip
DECODE_CLUSTER_MIN_KEYS = 64
#: the most keys of one sequence a decode_attention_rope launch may append (attention.cu
#: kMaxStepKeys): a row's own and those of up to 7 rows before it (a verification step's)
DECODE_ROPE_MAX_STEP_KEYS = 8
#: the phases the traced twins stamp, in order (attention.cu TracePhase): thread 0 of a block
#: stamps phase p when it gets there, after using what that phase waited for
TRACE_PHASES = ("start", "kv_len", "prologue", "loaded", "waited", "q_ready", "round1",
                "keys_done", "block_merged", "arrived", "merged", "end")
#: u64 words of a block's trace (attention.cu kTraceWords): %globaltimer ns of phase p at
#: word p, clock64 at word TRACE_CYCLES_WORD + p, the SM id at TRACE_SM_WORD, 1 at
#: TRACE_KEYED_WORD when the block attended over keys; phases never reached stay zero
TRACE_WORDS = 32
TRACE_CYCLES_WORD = 16
TRACE_SM_WORD = 12
TRACE_KEYED_WORD = 13


def decode_head_slices(hq: int, hkv: int) -> int:
    """Blocks per (split, kv head, sequence) of a decode launch: the group of hq / hkv q
    heads in slices of DECODE_HEADS_PER_BLOCK; each slice has its own split ticket, so the
    counters are u32 [num_seqs, hkv * slices] (at most [num_seqs, hq])."""
    return -(-(hq // hkv) // DECODE_HEADS_PER_BLOCK)


def decode_split_rule(kv_len: int, num_splits: int,
                      min_keys: int = DECODE_MIN_KEYS_PER_SPLIT) -> tuple[int, int]:
    """(keys per split, active splits) of a decode launch for one sequence: split i covers
    keys [i * chunk, min((i + 1) * chunk, kv_len)) for i < active; splits >= active are
    empty and write nothing. Depends on (kv_len, num_splits) only, never on the batch.
    min_keys: DECODE_MIN_KEYS_PER_SPLIT (also the long-context and quantized-cache kernels'
    rule) or, for the clustered kernels, DECODE_CLUSTER_MIN_KEYS."""
    chunk = max(-(-kv_len // num_splits), min_keys)
    return chunk, -(-kv_len // chunk)


def decode_clustered(num_splits: int, routes: KernelRoutes | None = None) -> bool:
    """Whether a decode launch of num_splits splits takes the clustered kernels: grids of a
    cluster's splits or more (batches of a few sequences; a larger batch has fewer splits and
    keeps one block per split, no idle cluster members), unless `routes` switch this
    session's latency paths off (ATLAS_DECODE_ATTN_LATENCY=0)."""
    return num_splits >= DECODE_CLUSTER_SPLITS and (routes is None or routes.decode_attn_latency)


def decode_partial_rule(kv_len: int, num_splits: int, routes: KernelRoutes | None = None
                        ) -> tuple[int, int]:
    """(keys per partial, partials) that decode_attention / decode_attention_rope merge for
    one sequence: partial i covers keys [i * keys, min((i + 1) * keys, kv_len)). One partial
    is the whole answer (written to out, never to part_o); with more, each is written to
    part_o/part_ml slot i and the last writer merges them. Unclustered, a partial is an
    active split; clustered, a cluster's DECODE_CLUSTER_SPLITS splits merged on chip."""
    if not decode_clustered(num_splits, routes):
        return decode_split_rule(kv_len, num_splits)
    return decode_cluster_rule(kv_len, num_splits)


def decode_cluster_rule(kv_len: int, num_splits: int) -> tuple[int, int]:
    """(keys per partial, partials) of the clustered kernels: their splits of at least
    DECODE_CLUSTER_MIN_KEYS keys, DECODE_CLUSTER_SPLITS of them (a cluster) per partial."""
    chunk, active = decode_split_rule(kv_len, num_splits, DECODE_CLUSTER_MIN_KEYS)
    return chunk * DECODE_CLUSTER_SPLITS, -(-active // DECODE_CLUSTER_SPLITS)


def _decode_grid(num_splits: int, hq: int, hkv: int, num_seqs: int, clustered: bool
                 ) -> tuple[int, int, int]:
    """A decode launch's grid: splits (rounded up to whole clusters when clustered: the
    blocks past num_splits hold no keys), head slices, sequences."""
    x = num_splits
    if clustered:
        x = -(-num_splits // DECODE_CLUSTER_SPLITS) * DECODE_CLUSTER_SPLITS
    return (x, hkv * decode_head_slices(hq, hkv), num_seqs)


def decode_grid(num_splits: int, hq: int, hkv: int, num_seqs: int,
                routes: KernelRoutes | None = None) -> tuple[int, int, int]:
    """The grid decode_attention / decode_attention_rope launch (not the long-context
    kernel's): what a trace buffer is sized by (TRACE_WORDS u64 per block)."""
    return _decode_grid(num_splits, hq, hkv, num_seqs, decode_clustered(num_splits, routes))


def decode_kernel(routes: KernelRoutes, num_splits: int, rope: bool) -> KernelSig:
    """The kernel decode_attention (rope False; not the long-context one) or
    decode_attention_rope (rope True) launches on a grid of num_splits, untraced: clustered
    (`decode_clustered`) split-major (ATLAS_DECODE_ATTN_SPLIT_MAJOR=1), with the session-7
    pull merge (ATLAS_DECODE_ATTN_B1_CHAIN=0) or the default push merge; unclustered, the
    rope-fused one waiting on entry (ATLAS_DECODE_ATTN_LATENCY=0), or with / without the
    loop's L2 prefetch (ATLAS_DECODE_ATTN_AHEAD)."""
    if decode_clustered(num_splits, routes):
        if routes.decode_attn_split_major:
            return DECODE_ATTN_ROPE_CLUSTER_SPLIT_MAJOR if rope else DECODE_ATTN_CLUSTER_SPLIT_MAJOR
        if not routes.decode_attn_b1_chain:
            return DECODE_ATTN_ROPE_CLUSTER_PULL if rope else DECODE_ATTN_CLUSTER_PULL
        return DECODE_ATTN_ROPE_CLUSTER if rope else DECODE_ATTN_CLUSTER
    if rope and not routes.decode_attn_latency:
        return DECODE_ATTN_ROPE_WAIT
    if routes.decode_attn_ahead:
        return DECODE_ATTN_ROPE if rope else DECODE_ATTN
    return DECODE_ATTN_ROPE_AHEAD1 if rope else DECODE_ATTN_AHEAD1


def _check_heads(hq: int, hkv: int, head_dim: int, block_size: int) -> None:
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"attention: head_dim={head_dim} unsupported (compiled: {HEAD_DIMS})")
    if hkv < 1 or hq < hkv or hq % hkv:
        raise ValueError(f"attention: hq={hq} must be a positive multiple of hkv={hkv}")
    if block_size < 1:
        raise ValueError(f"attention: block_size={block_size} must be >= 1")


def prefill_attention(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                      v_cache: DevicePtr, block_tables: DevicePtr, cu_q: DevicePtr,
                      kv_lens: DevicePtr, out: DevicePtr, num_seqs: int, hq: int, hkv: int,
                      head_dim: int, block_size: int, max_blocks: int, scale: float,
                      max_q_len: int, sm90: bool | None = None, window: int = 0,
                      proj_dim: int | None = None, sinks: DevicePtr = 0, max_kv_len: int = 0,
                      partials: PrefillPartials | None = None) -> None:
    """Causal attention of packed query chunks (cu_q) against each sequence's cached keys;
    with a sliding `window` > 0 a query at position p sees keys p - window + 1 .. p only.
    q is [tokens, hq, head_dim], out [tokens, hq * proj_dim] (a padded head's first
    proj_dim elements; default head_dim); `sinks` (bf16 [hq], 0: none) the attention sinks
    (the module docstring).

    max_q_len bounds every sequence's chunk length; it sizes the grid (a CUDA graph fixes
    it, while cu_q and kv_lens may change between replays within that bound). The Hopper
    wgmma kernel runs where `attention_sm90.uses_sm90` says so and no `sinks` are given
    (it takes none); `sm90` forces (True) or avoids (False) it. There, given the longest
    history `max_kv_len` (keys, the chunk's own included) and the `partials` scratch, a
    chunk too short to fill the device takes the split entry (attention_sm90.split_plan);
    without them, never (a launch whose histories may grow between replays).
    """
    _check_heads(hq, hkv, head_dim, block_size)
    proj_dim = proj_dim_of(head_dim, proj_dim)
    if sinks and head_dim not in SINK_HEAD_DIMS:
        raise ValueError(f"prefill_attention: attention sinks at head_dim {head_dim} (the "
                         f"kernel takes them at {SINK_HEAD_DIMS})")
    if num_seqs < 1 or max_q_len < 1 or max_blocks < 1:
        raise ValueError(f"prefill_attention: need num_seqs, max_q_len, max_blocks >= 1, got "
                         f"{num_seqs}, {max_q_len}, {max_blocks}")
    grid = (hq, -(-max_q_len // PREFILL_QUERY_TILE), num_seqs)
    if grid[1] > 65535:
        raise ValueError(f"prefill_attention: max_q_len={max_q_len} exceeds the grid's y limit "
                         f"({65535 * PREFILL_QUERY_TILE} queries per launch)")
    if sm90 is None:
        sm90 = uses_sm90(kc, head_dim) and not sinks
    if sm90:
        if sinks:
            raise ValueError("prefill_attention: the wgmma kernel takes no attention sinks")
        prefill_attention_sm90(kc, stream, q, k_cache, v_cache, block_tables, cu_q, kv_lens,
                               out, num_seqs, hq, hkv, head_dim, block_size, max_blocks,
                               scale, max_q_len, window, proj_dim, max_kv_len, partials)
        return
    kc.get(PREFILL_ATTN)(stream, grid, ATTN_THREADS, 0, q, k_cache, v_cache, block_tables,
                         cu_q, kv_lens, out, num_seqs, hq, hkv, head_dim, block_size,
                         max_blocks, scale, window, proj_dim, sinks)


def _check_decode(kernel: str, hq: int, hkv: int, head_dim: int, block_size: int,
                  num_seqs: int, num_splits: int, max_blocks: int, part_o: DevicePtr,
                  part_ml: DevicePtr, counters: DevicePtr, out: DevicePtr) -> None:
    _check_heads(hq, hkv, head_dim, block_size)
    if num_seqs < 1 or num_splits < 1 or max_blocks < 1:
        raise ValueError(f"{kernel}: need num_seqs, num_splits, max_blocks >= 1, got "
                         f"{num_seqs}, {num_splits}, {max_blocks}")
    # the merge reads part_o as float4, part_ml as float2 and stores 4 bf16 at once
    for name, ptr, align in (("part_o", part_o, 16), ("part_ml", part_ml, 8),
                             ("counters", counters, 4), ("out", out, 8)):
        if ptr % align:
            raise ValueError(f"{kernel}: {name} pointer {ptr:#x} is not {align}-byte aligned")


def decode_attention(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                     v_cache: DevicePtr, block_tables: DevicePtr, kv_lens: DevicePtr,
                     part_o: DevicePtr, part_ml: DevicePtr, counters: DevicePtr,
                     out: DevicePtr, num_seqs: int, hq: int, hkv: int, head_dim: int,
                     block_size: int, max_blocks: int, num_splits: int, scale: float,
                     long: bool | None = None, trace: DevicePtr = 0,
                     max_splits: int = 0, window: int = 0,
                     proj_dim: int | None = None, sinks: DevicePtr = 0) -> None:
    """One query per sequence, split-K; with a sliding `window` > 0 over its last `window`
    keys only, with proj_dim < head_dim (out [num_seqs, hq * proj_dim]: a padded head's
    first proj_dim elements) and with attention `sinks`, on the long kernel (`long_only`).

    part_o is f32 [num_seqs, hq, num_splits, head_dim], part_ml f32 [num_seqs, hq,
    num_splits, 2]: scratch for the partials. num_splits is fixed per captured graph (the
    grid size); each step's kv_len decides how many of them hold keys (`decode_split_rule`)
    and which partials are written (`decode_partial_rule`: none when one split, or one
    cluster of the clustered kernels, covers the keys). The last writer merges them (one
    launch; counters is u32 [num_seqs, hkv * decode_head_slices] (hq entries a sequence
    always suffice), zero before the launch and left zero, so a graph replays it as is).
    Where `attention_long.uses_long` says so for num_seqs rows and block tables of
    max_blocks * block_size keys (long contexts, or batches of
    routes.decode_attn_long_min_batch rows and more), the tensor-core kernel writes the
    partials and its last split of each (sequence, kv head) merges them through the same
    counters where `attention_long.merges_splits` says so (batch 1; else the combine kernel
    after it), on `attention_long.long_launch_splits` splits (at most
    max(num_splits, max_splits), max_splits being what the partial buffers hold a row: one
    for most large batches, and then the kernel writes out itself from its one split);
    `long` forces (True, on num_splits splits as given) or avoids (False) that.
    `trace` (u64 [blocks of decode_grid, TRACE_WORDS], zeroed): the clustered kernel's
    phase-traced twin (tools/gpu/trace_decode_attn.py), or on the long kernel the D-256
    entry's (grid (num_splits, hkv, num_seqs)); nowhere else.
    """
    _check_decode("decode_attention", hq, hkv, head_dim, block_size, num_seqs, num_splits,
                  max_blocks, part_o, part_ml, counters, out)
    proj_dim = proj_dim_of(head_dim, proj_dim)
    if long is None:
        long = (long_only(kc, "decode_attention", window, head_dim, proj_dim, sinks) or
                uses_long(kc, hq, hkv, head_dim, max_blocks * block_size, num_seqs))
        if long:
            num_splits = long_launch_splits(kc, num_seqs, hkv, head_dim,
                                            max_blocks * block_size, num_splits, max_splits)
    if (window or proj_dim != head_dim or sinks) and not long:
        raise ValueError("decode_attention: a sliding window or a padded head runs on the "
                         "long kernel only (attention sinks too)")
    clustered = not long and decode_clustered(num_splits, kc.routes)
    if trace and not long and (not clustered or kc.routes.decode_attn_split_major
                               or not kc.routes.decode_attn_b1_chain):
        raise ValueError("decode_attention: only the default clustered kernel and the long "
                         f"D-256 entry have traced twins (num_splits={num_splits}, long={long})")
    if not long:
        kernel = (DECODE_ATTN_CLUSTER_TRACE if trace else
                  decode_kernel(kc.routes, num_splits, rope=False))
        grid = _decode_grid(num_splits, hq, hkv, num_seqs, clustered)
        extra = (trace,) if trace else ()
        kc.get(kernel)(stream, grid, ATTN_THREADS, 0, q, k_cache, v_cache, block_tables,
                       kv_lens, part_o, part_ml, counters, out, num_seqs, hq, hkv, head_dim,
                       block_size, max_blocks, num_splits, scale, *extra)
        return
    decode_attention_long(kc, stream, q, k_cache, v_cache, block_tables, kv_lens, part_o,
                          part_ml, counters, out, num_seqs, hq, hkv, head_dim, block_size,
                          max_blocks, num_splits, scale, trace, window, proj_dim, sinks)
    _combine(kc, stream, part_o, part_ml, kv_lens, out, num_seqs, hq, hkv, head_dim,
             num_splits, rope=False, window=window, proj_dim=proj_dim, sinks=sinks)


def _combine(kc: KernelCache, stream: Stream, part_o: DevicePtr, part_ml: DevicePtr,
             kv_lens: DevicePtr, out: DevicePtr, num_seqs: int, hq: int, hkv: int,
             head_dim: int, num_splits: int, rope: bool, window: int = 0,
             proj_dim: int | None = None, sinks: DevicePtr = 0) -> None:
    """The merge after the long kernel's partials: none after one split (the kernel wrote
    out) or where the kernel merged them (`attention_long.merges_splits`), else one block
    per (q head, sequence), attention.cu's merge with a group of one head."""
    if num_splits == 1 or merges_splits(kc, num_splits, num_seqs, hq // hkv, head_dim, rope):
        return
    combine_partials(kc, stream, part_o, part_ml, kv_lens, out, num_seqs, hq, head_dim,
                     num_splits, window, proj_dim, sinks)


def combine_partials(kc: KernelCache, stream: Stream, part_o: DevicePtr, part_ml: DevicePtr,
                     kv_lens: DevicePtr, out: DevicePtr, num_seqs: int, hq: int, head_dim: int,
                     num_splits: int, window: int = 0, proj_dim: int | None = None,
                     sinks: DevicePtr = 0) -> None:
    """out = the merge of num_splits split partials: one block per (q head, sequence),
    attention.cu's merge with a group of one head (its early twin in batched steps,
    ops/early_trigger.py); `window` the partials' (their splits cover the window's keys);
    out [num_seqs, hq * proj_dim] (default head_dim: a padded head's first elements); the
    attention `sinks` (bf16 [hq], 0: none) join the merged denominator."""
    sig = (DECODE_ATTN_COMBINE_EARLY if triggers_early(kc, "combine", num_seqs)
           else DECODE_ATTN_COMBINE)
    kc.get(sig)(stream, (1, hq, num_seqs), ATTN_THREADS, 0, part_o, part_ml, kv_lens, out,
                num_seqs, hq, head_dim, num_splits, window, proj_dim_of(head_dim, proj_dim),
                sinks)


def long_only(kc: KernelCache, op: str, window: int, head_dim: int, proj_dim: int,
              sinks: DevicePtr = 0) -> bool:
    """Whether a decode launch must take the long kernel, the one decode kernel that slides,
    writes padded heads' compact rows and takes attention sinks: it slides (window > 0), its
    heads are padded (proj_dim < head_dim) or it has sinks. Raises where that kernel cannot
    launch (`attention_long.slides`; the model refuses such configurations at load:
    model/windows.py, model/load.py)."""
    if not window and proj_dim == head_dim and not sinks:
        return False
    if not slides(kc, head_dim):
        what = ("sliding-window" if window else "attention-sink" if sinks
                else f"padded-head (proj_dim {proj_dim})")
        raise ValueError(f"{op}: {what} decode needs the long attention kernel "
                         f"(attention_long, head_dim in {LONG_HEAD_DIMS}, "
                         "ATLAS_DECODE_ATTN_LONG on)")
    return True


def rope_fusable(kc: KernelCache, hq: int, hkv: int, head_dim: int, q_pitch: int,
                 rotary_dim: int, norm_offset: bool, max_keys: int, num_seqs: int,
                 step_keys: int = 1, window: int = 0, proj_dim: int | None = None,
                 sinks: bool = False) -> bool:
    """Whether `decode_attention_rope` replaces qk_norm_rope_kv + decode_attention for a
    step of num_seqs rows appending up to step_keys keys a sequence: the classic qkv layout
    (q heads proj_dim apart, the whole head rotating, plain norm weights); where the launch
    takes the tensor-core kernel (`attention_long.uses_long`: long contexts, large batches)
    also one key a sequence (its rope-fused entry appends each row's own key only) and a
    head dim it is compiled for (LONG_ROPE_HEAD_DIMS); a sliding `window`, a padded head
    (proj_dim < head_dim) and attention `sinks` take that kernel at every launch."""
    proj_dim = head_dim if proj_dim is None else proj_dim
    if not (q_pitch == proj_dim and rotary_dim == proj_dim and not norm_offset
            and hkv >= 1 and hq % hkv == 0):
        return False
    if (window or proj_dim != head_dim or sinks
            or uses_long(kc, hq, hkv, head_dim, max_keys, num_seqs)):
        return step_keys == 1 and head_dim in LONG_ROPE_HEAD_DIMS
    return True


def rope_step_keys(routes: KernelRoutes) -> int:
    """The most keys of one sequence a decode step may append and still take
    `decode_attention_rope`: DECODE_ROPE_MAX_STEP_KEYS (verification steps fused) under
    ATLAS_DECODE_ATTN_FUSED_VERIFY=1, else 1 (verification steps append K/V with
    rope.qk_norm_rope_kv and attend with decode_attention: the fused verification measured
    2.8x a plain step's attention per call, gpu16)."""
    return DECODE_ROPE_MAX_STEP_KEYS if routes.decode_attn_fused_verify else 1


def decode_attention_rope(kc: KernelCache, stream: Stream, qkv: DevicePtr, k_cache: DevicePtr,
                          v_cache: DevicePtr, q_norm_w: DevicePtr, k_norm_w: DevicePtr,
                          cos_sin: DevicePtr, positions: DevicePtr, slots: DevicePtr,
                          block_tables: DevicePtr, kv_lens: DevicePtr, part_o: DevicePtr,
                          part_ml: DevicePtr, counters: DevicePtr, out: DevicePtr,
                          num_seqs: int, hq: int, hkv: int, head_dim: int, block_size: int,
                          max_blocks: int, num_splits: int, scale: float, eps: float,
                          trace: DevicePtr = 0, long: bool | None = None,
                          max_splits: int = 0, window: int = 0,
                          proj_dim: int | None = None, sinks: DevicePtr = 0) -> None:
    """`rope.qk_norm_rope_kv` of one token per row (qkv [num_seqs, (hq + 2 hkv) proj_dim],
    classic layout: full rotation, plain or no q/k norm weights; a padded head's proj_dim <
    head_dim on the long kernel, as `decode_attention`'s) and `decode_attention` in
    one launch: each block norms and rotates its slice's q heads itself, and the block whose
    split holds the step's key appends k and v to the caches and uses them directly.
    Consecutive rows of one sequence (a verification step, in position order, at most
    DECODE_ROPE_MAX_STEP_KEYS of them) see the keys the earlier rows append: each row's
    blocks compute those from the earlier rows' qkv themselves.

    The kernel reads the step inputs, the cached rows of earlier positions, cos_sin and the
    norm weights before its programmatic-dependency wait (only qkv after it): launch it
    right after a kernel that writes none of those (the model: the qkv projection), never
    right after the same kernel at the position before (kernels/hopper/common/attention.cu
    RopedQ).

    `trace` (u64 [blocks of decode_grid, TRACE_WORDS], zeroed): the phase-traced twin of the
    kernel the rules pick (none for the waiting kernel of ATLAS_DECODE_ATTN_LATENCY=0); with
    `long` True, of the tensor-core kernel's early entry (one sequence, grid (num_splits, hkv,
    1)).

    Where `attention_long.uses_long` says so for num_seqs rows (long contexts, batches of
    routes.decode_attn_long_min_batch rows and more; `long` forces True / False), the
    tensor-core kernel's rope-fused entry runs instead (head_dim 64 / 128, others keep this
    kernel: one row per sequence, see rope_fusable; it waits for the qkv projection on
    entry) on
    `attention_long.long_launch_splits` splits (as decode_attention: max_splits; several
    merged as decode_attention's). A sliding `window` > 0 and attention `sinks` take that
    kernel at every launch (as decode_attention's).
    """
    _check_decode("decode_attention_rope", hq, hkv, head_dim, block_size, num_seqs, num_splits,
                  max_blocks, part_o, part_ml, counters, out)
    if bool(q_norm_w) != bool(k_norm_w):
        raise ValueError("decode_attention_rope: q_norm_w and k_norm_w must both be set or "
                         "both be 0")
    # cache rows are stored, and the cos/sin row and norm weights read, 16 B at a time
    for name, ptr in (("k_cache", k_cache), ("v_cache", v_cache), ("cos_sin", cos_sin),
                      ("q_norm_w", q_norm_w), ("k_norm_w", k_norm_w)):
        if ptr % 16:
            raise ValueError(f"decode_attention_rope: {name} pointer {ptr:#x} is not 16-byte "
                             "aligned")
    proj_dim = proj_dim_of(head_dim, proj_dim)
    if long is None:
        long = (long_only(kc, "decode_attention_rope", window, head_dim, proj_dim, sinks) or (
            not trace and head_dim in LONG_ROPE_HEAD_DIMS
            and uses_long(kc, hq, hkv, head_dim, max_blocks * block_size, num_seqs)))
        if long:
            num_splits = long_launch_splits(kc, num_seqs, hkv, head_dim,
                                            max_blocks * block_size, num_splits, max_splits)
    if long:
        decode_attention_long_rope(kc, stream, qkv, k_cache, v_cache, q_norm_w, k_norm_w,
                                   cos_sin, positions, slots, block_tables, kv_lens, part_o,
                                   part_ml, counters, out, num_seqs, hq, hkv, head_dim,
                                   block_size, max_blocks, num_splits, scale, eps, trace,
                                   window, proj_dim, sinks)
        _combine(kc, stream, part_o, part_ml, kv_lens, out, num_seqs, hq, hkv, head_dim,
                 num_splits, rope=True, window=window, proj_dim=proj_dim, sinks=sinks)
        return
    if window or proj_dim != head_dim or sinks:
        raise ValueError("decode_attention_rope: a sliding window or a padded head runs on "
                         "the long kernel only (attention sinks too)")
    clustered = decode_clustered(num_splits, kc.routes)
    if trace and (not kc.routes.decode_attn_latency or kc.routes.decode_attn_split_major
                  or not kc.routes.decode_attn_b1_chain):
        raise ValueError("decode_attention_rope: the waiting kernel (ATLAS_DECODE_ATTN_LATENCY=0), "
                         "the split-major and the pull-merge ones have no traced twin")
    if trace:
        kernel = DECODE_ATTN_ROPE_CLUSTER_TRACE if clustered else DECODE_ATTN_ROPE_TRACE
    else:
        kernel = decode_kernel(kc.routes, num_splits, rope=True)
    grid = _decode_grid(num_splits, hq, hkv, num_seqs, clustered)
    extra = (trace,) if trace else ()
    kc.get(kernel)(stream, grid, ATTN_THREADS, 0, qkv,
                   k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots,
                   block_tables, kv_lens, part_o, part_ml, counters, out, num_seqs, hq, hkv,
                   head_dim, block_size, max_blocks, num_splits, scale, eps, *extra)
