"""Launch builder, routing and split count of the tensor-core split-K decode attention
(hopper/common/attention_long.cu): batched decode and long contexts.

The kernel keeps decode_attn_bf16's contract (grid (num_splits, hkv, num_seqs), the split
rule of ops.attention.decode_split_rule, the partials the combine merges) and streams K/V
through a 3-stage cp.async ring of 64-key tiles with the group's q heads as the rows of a
tensor-core tile. `ops.attention.decode_attention` launches it instead of decode_attn_bf16
where `uses_long` says so (the module is loaded, the head geometry fits, the routes allow it)
for either of two reasons:

* long contexts: the engine's block tables reach at least
  `KernelRoutes.decode_attn_long_min_keys` keys (a graph's grid is fixed at capture, so the
  choice follows the longest context the launch can see, not the live kv_len), at any batch;
* batches: at least `KernelRoutes.decode_attn_long_min_batch` sequences (default 2, 0: never
  by batch), at any context. There the CUDA-core kernels hold too few bytes in flight per
  SM (one 4-head block per (split, kv head, sequence) with a register double buffer: gpu17's
  Qwen3-8B batch 64 x 1,536 keys at 58% of copy; Qwen3.5's D-256 heads at batch 8 on the
  clustered kernel 0.27x SDPA), while this kernel keeps two 32 KiB tiles of K/V in flight per
  block and serves the whole group from one read of them. At batches 2 and 4 the clustered
  kernel's grid (about 2 x num_sms blocks of one chain each, in clusters of 8) ran in
  several waves: gpu32 (2026-12-02, GPU per step, PDL on) measured Qwen3-8B batch 4 x 1,536
  keys 6.807 ms a step on it against 5.665 on this kernel, batch 2 x 512 5.551 against 4.803,
  Qwen3-0.6B batch 4 x 1,536 2.644 against 1.974, Qwen3-30B-A3B batch 4 x 1,536 9.160
  against 7.322 (the default moved from 8 to 2 sequences). Batch 1 followed in session 13
  (gpu34: Qwen3-8B x 512 / 1,536 keys 4.629 -> 4.472 / 4.952 -> 4.553 ms a step, Qwen3-0.6B
  x 512 0.957 -> 0.876); a speculating runner's verification steps stay on the
  verification kernel (ops/attention_verify.py; this kernel's verification entry measured
  slower and was removed in session 14) and the row-invariant steps of model/runner.py
  (AttentionPlan.row_invariant) keep the CUDA-core kernels.

The split count of a batched launch is `long_launch_splits`: the fewest splits whose blocks
fill the GPU's slots for this kernel (num_sms x `long_blocks_per_sm`) in whole waves,
at most the caller's num_splits (what the partial buffers hold); a launch of one split
writes the output itself and no combine runs. `long_decode_splits` is the same rule the
model's split count follows for long-context engines.
"""

from __future__ import annotations

from ..gpu import DevicePtr, KernelSig, Stream
from ..kernel_abi import (DECODE_ATTN_LONG, DECODE_ATTN_LONG_D256, DECODE_ATTN_LONG_D256_TRACE,
                          DECODE_ATTN_LONG_ROPE_EARLY, DECODE_ATTN_LONG_ROPE_EARLY_D64,
                          DECODE_ATTN_LONG_ROPE_EARLY_D128, DECODE_ATTN_LONG_ROPE_EARLY_EXACT,
                          DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D64,
                          DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D128,
                          DECODE_ATTN_LONG_ROPE_EARLY_GATED_D256,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE, DECODE_ATTN_LONG_ROPE_EARLY_LATE_D64,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_D256,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_TRACE_D256,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_D128,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D64,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D128,
                          DECODE_ATTN_LONG_ROPE_EARLY_LATE_TRACE,
                          DECODE_ATTN_LONG_ROPE_EARLY_TRACE,
                          DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D64,
                          DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D128,
                          DECODE_ATTN_LONG_ROPE_STAGED_TRACE,
                          DECODE_ATTN_LONG_ROPE_LATE,
                          DECODE_ATTN_LONG_ROPE_STAGED, DECODE_ATTN_LONG_ROPE_WAIT)
from . import KernelCache
from ._preconditions import proj_dim_of, require_aligned
from .routes import DEFAULT_DECODE_ATTN_LONG_MERGE_MAX_SEQS, KernelRoutes

#: head dimensions the long kernel is compiled for: 64 and 128 on DECODE_ATTN_LONG (Q in
#: registers, two blocks per SM), 256 on DECODE_ATTN_LONG_D256 (Q in shared memory, one)
LONG_HEAD_DIMS = (64, 128, 256)
#: head dimensions of the rope-fused entry points (DECODE_ATTN_LONG_ROPE_WAIT and its staged
#: twin: Q in shared memory, two blocks per SM)
LONG_ROPE_HEAD_DIMS = (64, 128)
#: q heads per kv head it serves: the 16 rows of one mma.m16n8k16 A tile
LONG_MAX_GROUP = 16
#: threads per block (attention_long.cu kThreads) and keys per ring tile (kBKV)
LONG_THREADS = 128
LONG_TILE_KEYS = 64
#: ring stages (kStages) and resident blocks per SM at D <= 128 (the launch bounds)
LONG_STAGES = 3
LONG_BLOCKS_PER_SM = 2
#: an engine whose block tables reach this many keys takes the long kernel by default
#: (routes.DEFAULT_DECODE_ATTN_LONG_MIN_KEYS: the kernel table's 16k-history rows and up)
#: and gets `long_decode_splits`
LONG_CONTEXT_KEYS = 16384
#: fewest keys per split at the longest context when choosing the split count
LONG_MIN_SPLIT_KEYS = 512
#: most splits (the combine's partials per row stay small)
LONG_MAX_SPLITS = 64
#: a split count is good enough once its waves of blocks are this full on average
LONG_WAVE_EFFICIENCY = 0.9


def long_blocks_per_sm(head_dim: int) -> int:
    """Resident blocks per SM (attention_long.cu LongTile::kBlocksPerSm): the 192 KiB ring of
    D 256 leaves room for one."""
    return 1 if head_dim > 128 else LONG_BLOCKS_PER_SM


def long_smem_bytes(head_dim: int, rope: bool = False) -> int:
    """Dynamic shared memory of a launch: the ring of LONG_STAGES x (K and V) [64][D] bf16
    tiles (the warps' merge reuses it); at D 256 and with `rope` the [16][D + 8] bf16 Q tile
    after it (rows 16 bytes apart past D: conflict-free ldmatrix); with `rope` the stage
    after that: the step's k and v rows (2 x D bf16), then the q and k norm weights (2 x D
    bf16) and the position's cos/sin row (D f32), which only the staged entry fills
    (attention_long.cu LongTile::kStageBytes; one launch size for both rope entries)."""
    ring = LONG_STAGES * 2 * LONG_TILE_KEYS * head_dim * 2
    q_tile = LONG_MAX_GROUP * (head_dim + 8) * 2 if head_dim > 128 or rope else 0
    return ring + q_tile + (4 * head_dim * 2 + head_dim * 4 if rope else 0)


def long_kernel_for(head_dim: int) -> KernelSig:
    """The entry point of a head dim (one of LONG_HEAD_DIMS)."""
    return DECODE_ATTN_LONG_D256 if head_dim == 256 else DECODE_ATTN_LONG


#: the output projection (bytes a batch-1 GEMV pass streams) from which the gated entry lets
#: the next kernel launch only once its K/V landed (`late_trigger_pays`)
LATE_TRIGGER_MIN_O_BYTES = 12 << 20


def late_trigger_pays(o_proj_bytes: int, gated: bool) -> bool:
    """routes.decode_attn_long_late_trigger's rule where the environment leaves it unset
    (model/load.py): the late twins for gated attention (Qwen3.5 / Qwen3-Next: the one gated
    launch or, after a quantized qkv, the four launches' rope entry) before an o_proj of
    LATE_TRIGGER_MIN_O_BYTES or more, the trigger on entry for every other model.

    The o_proj GEMV after the attention requests its weights before its PDL wait, so with the
    trigger on entry they stream while the attention's K/V and L2 trips are in flight. Until
    session 54 that cost the rope entries more than o_proj's lead saved from 12 MiB up (gpu54
    / gpu55, 2026-12-03, batch 1 x 512, GPU ms a step, late vs on entry: Qwen3-30B-A3B 2.829
    vs 2.885, Qwen3-4B 2.763 vs 2.775, Qwen3-8B 4.303 vs 4.312, Qwen3-0.6B 0.762 vs 0.753).
    Since the early entries (their split merge in the launch, one-tile splits) the order is
    the other way for them (gpu192, 2026-12-07, H100, f8895f4e, late / early / early / late):
    Qwen3-4B 3.005 / 2.959 / 2.956 (-1.6%), Qwen3-8B 5.231 / 5.202 / 5.203 / 5.232 (-0.6%),
    Qwen3-30B-A3B 2.872 / 2.853 / 2.858 / 2.876 (-0.6%): on the 8B's critical path the
    attention 8.88 -> 7.78 us a layer, o_proj after it 8.45 -> 8.46. The gated entry's trigger
    was set against later ones (docs/kernels.md, sessions 45-46), not measured on entry
    since: it keeps the late twin."""
    return gated and o_proj_bytes >= LATE_TRIGGER_MIN_O_BYTES


def gated_pays(qkv_quantized: bool) -> bool:
    """routes.decode_attn_long_gated's rule where the environment leaves it unset
    (model/load.py): the one gated launch (`decode_attention_long_rope_gated`) where the qkv
    projection before it is bf16, the four launches after a quantized one. Measured (H100,
    Qwen3.5-35B-A3B batch 1, GPU ms a step, gated on / off / off / on): bf16 weights at 512
    keys 2.780 / 2.778 / 2.779 / 2.784 (gpu165), 2,048 2.825 / 2.859 / 2.860 / 2.829, 4,096
    2.841 / 2.941 / 2.938 / 2.839 (gpu168: the combine merging more splits); NVFP4 at 512
    2.539 vs 2.488 (gpu165), 4,096 2.590 / 2.638 / 2.644 / 2.591, 16,384 2.829 / 2.810 /
    2.809 / 2.832 (gpu168). After the NVFP4 qkv GEMV the launch is 26.2 us a layer on the
    critical path at 512 keys, after the bf16 one 21.6 (gpu165 / gpu166, whichever trigger)."""
    return not qkv_quantized


def early_split_rule(kv_len: int, num_splits: int) -> tuple[int, int]:
    """(keys per split, active splits) of the early entries when they merge their splits
    (attention_long.cu RopeEarly): ops.attention.decode_split_rule's ceil(kv_len /
    num_splits) rounded up to whole LONG_TILE_KEYS tiles. A split takes as many tiles as
    under that rule (nested ceilings: ceil(kv_len / (64 num_splits)) either way), so no block
    takes longer, while at short contexts half as many blocks copy tiles and the last one
    merges half as many partials (Qwen3-0.6B's batch 1 at 568 keys on 30 splits: 9 splits of
    64 keys, one L2 trip of merge loads, where 18 of 32 keys take two)."""
    per = -(-kv_len // num_splits)
    chunk = max(-(-per // LONG_TILE_KEYS) * LONG_TILE_KEYS, LONG_TILE_KEYS)
    return chunk, -(-kv_len // chunk)


def exact_heads(head_dim: int, proj_dim: int | None, sinks: int) -> bool:
    """Whether a rope launch's heads are head_dim long in the projections (no padding,
    ops/attention.py padded_head_dim) and have no attention sinks: what the _exact early
    entries take (attention_long.cu kExact)."""
    return proj_dim_of(head_dim, proj_dim) == head_dim and not sinks


#: batch 1's early entries by (late trigger, exact heads, the one head dim compiled in; 0:
#: both)
_EARLY = {(False, True, 0): DECODE_ATTN_LONG_ROPE_EARLY_EXACT,
          (True, True, 0): DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT,
          (False, True, 128): DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D128,
          (True, True, 128): DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D128,
          (False, True, 64): DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D64,
          (True, True, 64): DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D64,
          (False, False, 0): DECODE_ATTN_LONG_ROPE_EARLY,
          (True, False, 0): DECODE_ATTN_LONG_ROPE_EARLY_LATE,
          (False, False, 128): DECODE_ATTN_LONG_ROPE_EARLY_D128,
          (True, False, 128): DECODE_ATTN_LONG_ROPE_EARLY_LATE_D128,
          (False, False, 64): DECODE_ATTN_LONG_ROPE_EARLY_D64,
          (True, False, 64): DECODE_ATTN_LONG_ROPE_EARLY_LATE_D64}


#: the staged entry's twins for exact heads by the one head dim compiled in
_STAGED_EXACT = {128: DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D128,
                 64: DECODE_ATTN_LONG_ROPE_STAGED_EXACT_D64}


def long_rope_kernel_for(routes: KernelRoutes, num_seqs: int, exact: bool = True,
                         head_dim: int = 0) -> KernelSig:
    """The rope-fused entry point the routes select for a launch of num_seqs sequences: the
    staged prologue's (routes.decode_attn_long_staged, the default) or the waiting one's;
    at one sequence with routes.decode_attn_long_late_trigger, the staged entry's twin that
    lets the next kernel launch only once its K/V tiles landed (only batch 1's o_proj, the
    single-row GEMV, requests all of its weights before its wait; batch 8 measured even to
    slower: gpu54 / gpu55, Qwen3-8B 5.345 vs 5.322 ms, Qwen3-30B-A3B 11.654 vs 11.636); at
    one sequence with routes.decode_attn_long_early, the twins of those two that read all but
    the qkv rows before their wait (the batch-1 latency chain; a batch's second wave of
    blocks would hold SMs waiting: session 9's pre-wait entry lost at batch 64), and of
    those their _exact twins where `exact` (`exact_heads`) and
    routes.decode_attn_long_exact; with routes.decode_attn_long_one_dim (the default) the
    twin compiled for `head_dim` alone (0: unknown, the one with both dims). Batches of
    exact heads of a known dim take the staged entry's twin for that dim under
    routes.decode_attn_long_batched_one_dim (the default)."""
    if not routes.decode_attn_long_staged:
        return DECODE_ATTN_LONG_ROPE_WAIT
    late = routes.decode_attn_long_late_trigger and num_seqs == 1
    if routes.decode_attn_long_early and num_seqs == 1:
        return _EARLY[bool(late), exact and routes.decode_attn_long_exact,
                      head_dim if routes.decode_attn_long_one_dim else 0]
    if late:
        return DECODE_ATTN_LONG_ROPE_LATE
    if (exact and routes.decode_attn_long_exact and head_dim
            and routes.decode_attn_long_batched_one_dim):
        return _STAGED_EXACT[head_dim]
    return DECODE_ATTN_LONG_ROPE_STAGED


def _launch_long(kc: KernelCache, sig: KernelSig, head_dim: int, rope: bool):
    """The launcher of `sig` with its dynamic shared memory opted in (once per signature:
    the largest head dim it takes) on the carveout with the most shared memory (two 96-101
    KiB blocks per SM at D 128)."""
    top = 256 if head_dim == 256 else 128
    return kc.get_with_shared(sig, long_smem_bytes(top, rope), most_shared=True)


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include attention_long (hopper sets do)."""
    return DECODE_ATTN_LONG.module in kc.backend.module_names


def slides(kc: KernelCache, head_dim: int) -> bool:
    """Whether a sliding-window decode can launch here: the long kernel, the decode kernel
    that takes a window, is switched on for this head dim and is loaded, or the backend
    resolves every entry point itself (the host's references, the mock: no modules)."""
    return (kc.routes.decode_attn_long and head_dim in LONG_HEAD_DIMS
            and (available(kc) or not kc.backend.module_names))


def routes_long(routes: KernelRoutes, hq: int, hkv: int, head_dim: int, max_keys: int,
                num_seqs: int) -> bool:
    """The routing rule without the loaded-module check: switched on, a head geometry the
    kernel takes, and block tables of at least routes.decode_attn_long_min_keys keys or a
    launch of at least routes.decode_attn_long_min_batch sequences (0: never by batch)."""
    by_batch = 0 < routes.decode_attn_long_min_batch <= num_seqs
    return (routes.decode_attn_long and head_dim in LONG_HEAD_DIMS
            and hq // hkv <= LONG_MAX_GROUP
            and (max_keys >= routes.decode_attn_long_min_keys or by_batch))


def uses_long(kc: KernelCache, hq: int, hkv: int, head_dim: int, max_keys: int,
              num_seqs: int = 1) -> bool:
    """`routes_long` under the cache's routes, with attention_long loaded."""
    return routes_long(kc.routes, hq, hkv, head_dim, max_keys, num_seqs) and available(kc)


def long_decode_splits(pairs: int, max_seq_len: int, num_sms: int, cap: int | None = None,
                       blocks_per_sm: int = LONG_BLOCKS_PER_SM,
                       min_split_keys: int = LONG_MIN_SPLIT_KEYS) -> int:
    """Splits for `pairs` (sequence, kv head) pairs at max_seq_len: the fewest whose blocks
    fill the kernel's slots (num_sms x blocks_per_sm) in waves at least LONG_WAVE_EFFICIENCY
    full on average (equal-length splits: a part-empty last wave idles the rest of the GPU
    for a whole block's time, and a grid smaller than one wave idles the SMs it misses), at
    most max_seq_len // min_split_keys, LONG_MAX_SPLITS and `cap`; the most allowed when
    none qualifies. E.g. on an H200 (264 slots at D 128) with 8 kv heads at 32k: batch
    1 -> 33, batch 8 -> 4 (256 blocks, 97% of one wave), batch 64 -> 1 (512, 97% of two);
    Qwen3.5's 2 kv heads at D 256 (132 slots), batch 8 -> 8 (128 blocks, 97%)."""
    slots = num_sms * blocks_per_sm
    most = max(1, min(LONG_MAX_SPLITS, max_seq_len // min_split_keys,
                      cap if cap is not None else LONG_MAX_SPLITS))
    for splits in range(1, most + 1):
        blocks = pairs * splits
        waves = -(-blocks // slots)
        if blocks >= LONG_WAVE_EFFICIENCY * waves * slots:
            return splits
    return most


def long_launch_splits(kc: KernelCache, num_seqs: int, hkv: int, head_dim: int,
                       max_keys: int, num_splits: int, max_splits: int = 0) -> int:
    """The split count a routed launch runs: at least routes.decode_attn_long_min_batch
    sequences take `long_decode_splits` for this head dim with splits down to one tile at
    the tables' reach (the batch, not the context, makes the blocks: a batch of 8 at 2k
    keys needs 8 splits of 256 to fill an H200), at most max(num_splits, max_splits), the
    partial buffers' splits a row (a batch of 48 at D 128: the model's 1 split is 384 blocks,
    73% of two waves; 2 are 97% of three); smaller launches keep num_splits (batch 1's
    count, or the model's for long contexts: the row-invariant steps need exactly it)."""
    if not 0 < kc.routes.decode_attn_long_min_batch <= num_seqs:
        return num_splits
    cap = max(num_splits, max_splits)
    return long_decode_splits(num_seqs * hkv, max_keys, kc.facts.sm_count, cap=cap,
                              blocks_per_sm=long_blocks_per_sm(head_dim),
                              min_split_keys=LONG_TILE_KEYS)


def merges_splits(kc: KernelCache, num_splits: int, num_seqs: int, group: int,
                  head_dim: int, rope: bool) -> bool:
    """Whether a launch of num_splits for num_seqs sequences of `group` q heads a kv head
    merges its partials itself (attention_long.cu SplitMerge: the last split of each
    (sequence, kv head) by the split counters' tickets) rather than the combine launch after
    it: several splits, and routes.decode_attn_long_merge, or where unset at most
    routes.DEFAULT_DECODE_ATTN_LONG_MERGE_MAX_SEQS sequences (decode batches' latency chain), on the
    rope-fused entries always (`rope`: their early prologue is built for it, whole 64-key
    tiles and the first tile's table entries requested with kv_len; Qwen3-30B-A3B's group of
    8 measured +4.2% a step on the combine, gpu94) and on the plain entries where the
    group's merge is one (head, 4 elements) item a thread of the last block (group x D / 4 <=
    LONG_THREADS). A larger group's merge walks its items one after another (each a
    dependent L2 trip per 16 splits) where the combine spreads them over hq blocks: gpu93 /
    gpu94 (2026-12-04, Qwen3.5-35B-A3B batch 1 x 512, D 256 group 8, GPU ms a step) combine
    2.329 / 2.329 / 2.327 against 2.345 / 2.346 / 2.343 merged (the attention 9.29 + 3.27 us
    a layer against 14.07), NVFP4 2.253 against 2.283."""
    if num_splits <= 1:
        return False
    forced = kc.routes.decode_attn_long_merge
    if forced is not None:
        return forced
    return (num_seqs <= DEFAULT_DECODE_ATTN_LONG_MERGE_MAX_SEQS
            and (rope or group * head_dim // 4 <= LONG_THREADS))


def decode_attention_long(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                          v_cache: DevicePtr, block_tables: DevicePtr, kv_lens: DevicePtr,
                          part_o: DevicePtr, part_ml: DevicePtr, counters: DevicePtr,
                          out: DevicePtr, num_seqs: int, hq: int, hkv: int, head_dim: int,
                          block_size: int, max_blocks: int, num_splits: int,
                          scale: float, trace: DevicePtr = 0, window: int = 0,
                          proj_dim: int | None = None, sinks: DevicePtr = 0) -> None:
    """The split-K partials of decode_attention on the long kernel and, where
    `merges_splits`, their merge into out by the kernel's last split (counters: u32
    [num_seqs, hkv] at least, zero, left zero), or with num_splits 1 the output itself (the
    caller validated the shared arguments and runs the combine after a launch of more
    splits that does not merge). `trace` (u64 [blocks, ops.attention.TRACE_WORDS], zeroed):
    the D-256 entry's phase-traced twin (tools/gpu/trace_decode_attn.py --long). `window`:
    the layer's sliding window (ops.attention.decode_attention; 0: none); `proj_dim` (default
    head_dim): out is [num_seqs, hq * proj_dim], a padded head's first elements; `sinks`
    (bf16 [hq], 0: none): the attention sinks, in its written output and its merge."""
    if head_dim not in LONG_HEAD_DIMS or hq // hkv > LONG_MAX_GROUP:
        raise ValueError(f"decode_attention_long: head_dim={head_dim} (needs one of "
                         f"{LONG_HEAD_DIMS}) and group {hq // hkv} (needs <= {LONG_MAX_GROUP})")
    if q % 16:  # Q rows are read 16 bytes at a time (D 256's shared tile)
        raise ValueError(f"decode_attention_long: q pointer {q:#x} is not 16-byte aligned")
    if trace and head_dim != 256:
        raise ValueError(f"decode_attention_long: only the D-256 entry has a traced twin "
                         f"(head_dim={head_dim})")
    sig = DECODE_ATTN_LONG_D256_TRACE if trace else long_kernel_for(head_dim)
    launch = _launch_long(kc, sig, head_dim, False)
    merges = merges_splits(kc, num_splits, num_seqs, hq // hkv, head_dim, rope=False)
    tickets = counters if merges else 0
    extra = (trace,) if trace else ()
    launch(stream, (num_splits, hkv, num_seqs), LONG_THREADS, long_smem_bytes(head_dim), q,
           k_cache, v_cache, block_tables, kv_lens, part_o, part_ml, tickets, out, num_seqs, hq,
           hkv, head_dim, block_size, max_blocks, num_splits, scale, window,
           proj_dim_of(head_dim, proj_dim), sinks, *extra)


def decode_attention_long_rope(kc: KernelCache, stream: Stream, qkv: DevicePtr,
                               k_cache: DevicePtr, v_cache: DevicePtr, q_norm_w: DevicePtr,
                               k_norm_w: DevicePtr, cos_sin: DevicePtr, positions: DevicePtr,
                               slots: DevicePtr, block_tables: DevicePtr, kv_lens: DevicePtr,
                               part_o: DevicePtr, part_ml: DevicePtr, counters: DevicePtr,
                               out: DevicePtr, num_seqs: int, hq: int, hkv: int, head_dim: int,
                               block_size: int, max_blocks: int, num_splits: int, scale: float,
                               eps: float, trace: DevicePtr = 0, window: int = 0,
                               proj_dim: int | None = None, sinks: DevicePtr = 0) -> None:
    """decode_attention_long with rope.qk_norm_rope_kv done by its blocks: one token per
    sequence (qkv [num_seqs, (hq + 2 hkv) P], the classic layout, P = `proj_dim`, default
    head_dim: a padded head's length, out [num_seqs, hq * P]), the step's k and v
    appended at each row's slot (none at slot < 0) and used for that key (the caller
    validated the shared arguments and runs the combine after a launch of more splits that
    does not merge: `merges_splits`, counters as decode_attention_long's). On
    decode_attn_long_rope_staged_bf16 (routes.decode_attn_long_staged, the default: the
    prologue's reads in two trips; it loads the norm weights and the cos/sin row 16 bytes at
    a time, which ops.attention.decode_attention_rope's checks allow), else on the waiting
    entry (the same outputs). `trace` (u64 [blocks, ops.attention.TRACE_WORDS], zeroed): the
    phase-traced twin of what the routes run, the early entry's at one sequence (its
    late-trigger twin's under routes.decode_attn_long_late_trigger), the staged entry's for
    batches (tools/gpu/trace_decode_attn.py --long). `window` and `sinks` as
    decode_attention_long's."""
    if head_dim not in LONG_ROPE_HEAD_DIMS or hq // hkv > LONG_MAX_GROUP:
        raise ValueError(f"decode_attention_long_rope: head_dim={head_dim} (needs one of "
                         f"{LONG_ROPE_HEAD_DIMS}) and group {hq // hkv} (needs <= "
                         f"{LONG_MAX_GROUP})")
    if qkv % 16:  # v rows are copied 16 bytes at a time
        raise ValueError(f"decode_attention_long_rope: qkv pointer {qkv:#x} is not 16-byte "
                         "aligned")
    exact = exact_heads(head_dim, proj_dim, sinks)
    if trace:
        sig = DECODE_ATTN_LONG_ROPE_STAGED_TRACE
        if num_seqs == 1:
            if not exact or head_dim != 128:
                raise ValueError("decode_attention_long_rope: the batch-1 phase trace is the "
                                 "exact D-128 early entries' (heads of 128 elements, no "
                                 f"sinks; head_dim={head_dim})")
            sig = (DECODE_ATTN_LONG_ROPE_EARLY_LATE_TRACE
                   if kc.routes.decode_attn_long_late_trigger else
                   DECODE_ATTN_LONG_ROPE_EARLY_TRACE)
    else:
        sig = long_rope_kernel_for(kc.routes, num_seqs, exact, head_dim)
    launch = _launch_long(kc, sig, head_dim, True)
    merges = merges_splits(kc, num_splits, num_seqs, hq // hkv, head_dim, rope=True)
    tickets = counters if merges else 0
    extra = (trace,) if trace else ()
    launch(stream, (num_splits, hkv, num_seqs), LONG_THREADS, long_smem_bytes(head_dim, True),
           qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
           kv_lens, part_o, part_ml, tickets, out, num_seqs, hq, hkv, head_dim, block_size,
           max_blocks, num_splits, scale, eps, window,
           proj_dim_of(head_dim, proj_dim), sinks, *extra)


#: the gated entries' head dim (Qwen3.5 / Qwen3-Next full attention)
GATED_HEAD_DIM = 256


def gated_fusable(kc: KernelCache, hq: int, hkv: int, head_dim: int, q_pitch: int,
                  rotary_dim: int, max_keys: int, num_seqs: int, step_keys: int = 1,
                  window: int = 0, proj_dim: int | None = None, sinks: bool = False) -> bool:
    """Whether a decode step of gated full attention (each q head followed by its output gate
    in the qkv row: q_pitch = 2 head_dim) takes `decode_attention_long_rope_gated` instead of
    the rope kernel, attention, combine and gate launches: one sequence appending one key
    (the early entries' batch-1 chain), D 256 with heads of D elements and no sinks or
    window, a rotary width the prologue's 16-byte cos/sin loads and rope_core.cuh's lanes
    take, where the step's attention runs on this kernel anyway (`uses_long`), under
    routes.decode_attn_long_gated (unset: off here; the model sets it by `gated_pays`) with
    the early staged prologue on."""
    r = kc.routes
    return (num_seqs == 1 and step_keys == 1 and head_dim == GATED_HEAD_DIM
            and q_pitch == 2 * head_dim and proj_dim_of(head_dim, proj_dim) == head_dim
            and not sinks and not window and hkv >= 1 and hq % hkv == 0
            and 0 < rotary_dim <= head_dim and rotary_dim % 8 == 0
            and bool(r.decode_attn_long_gated) and r.decode_attn_long_staged
            and r.decode_attn_long_early
            and uses_long(kc, hq, hkv, head_dim, max_keys, num_seqs))


def decode_attention_long_rope_gated(kc: KernelCache, stream: Stream, qkv: DevicePtr,
                                     k_cache: DevicePtr, v_cache: DevicePtr,
                                     q_norm_w: DevicePtr, k_norm_w: DevicePtr,
                                     cos_sin: DevicePtr, positions: DevicePtr, slots: DevicePtr,
                                     block_tables: DevicePtr, kv_lens: DevicePtr,
                                     part_o: DevicePtr, part_ml: DevicePtr, counters: DevicePtr,
                                     out: DevicePtr, hq: int, hkv: int, head_dim: int,
                                     block_size: int, max_blocks: int, num_splits: int,
                                     scale: float, eps: float, q_pitch: int, rotary_dim: int,
                                     norm_offset: bool, max_splits: int = 0,
                                     trace: DevicePtr = 0) -> None:
    """One sequence's decode step of gated full attention in one launch
    (decode_attn_long_rope_early[_late]_gated_d256_bf16): what qk_norm_rope_kv_partial_bf16
    (q heads q_pitch apart, the first rotary_dim elements of a head rotating over cos_sin f32
    [positions, rotary_dim], (1 + w) norm weights where norm_offset; k and v appended at the
    slot), the D-256 attention, its combine and sigmoid_gate_mul_bf16 compute: out [hq *
    head_dim] bf16 = attention(q) * bf16(sigmoid(gate)), each head's gate the head_dim
    elements after its q in the row (`gated_fusable` must hold). The splits
    (`long_launch_splits` of num_splits, at most max(num_splits, max_splits): the buffers'
    capacity, and at most one wave of the kernel's slots: they wait for each other) merge
    their outputs together, each a share, through the zeroed u32 `counters` [hkv, 2]
    (arrivals, departures; left zero); the late trigger as
    routes.decode_attn_long_late_trigger says. Reads everything but the qkv row
    before its PDL wait: launch it right after the qkv projection (as
    `decode_attention_long_rope`). `trace` (u64 [blocks, ops.attention.TRACE_WORDS], zeroed):
    the late entry's phase-traced twin (the late trigger required; tools/gpu/
    trace_decode_attn.py --long --gated)."""
    if hq % hkv or hq // hkv > LONG_MAX_GROUP or head_dim != GATED_HEAD_DIM:
        raise ValueError(f"decode_attention_long_rope_gated: hq={hq} hkv={hkv} "
                         f"head_dim={head_dim} (needs a group of at most {LONG_MAX_GROUP} "
                         f"and head_dim {GATED_HEAD_DIM})")
    if q_pitch != 2 * head_dim or not 0 < rotary_dim <= head_dim or rotary_dim % 8:
        raise ValueError(f"decode_attention_long_rope_gated: q_pitch={q_pitch} (needs "
                         f"{2 * head_dim}), rotary_dim={rotary_dim} (needs a multiple of 8 up "
                         f"to {head_dim})")
    if not counters:
        raise ValueError("decode_attention_long_rope_gated: the split counters are required "
                         "(the last split merges)")
    for name, ptr in (("qkv", qkv), ("k_cache", k_cache), ("v_cache", v_cache),
                      ("cos_sin", cos_sin), ("q_norm_w", q_norm_w), ("k_norm_w", k_norm_w)):
        require_aligned("decode_attention_long_rope_gated", name, ptr, 16)
    if bool(q_norm_w) != bool(k_norm_w):
        raise ValueError("decode_attention_long_rope_gated: q_norm_w and k_norm_w must both be "
                         "set or both be 0")
    # every block resident at once (attention_long.cu SpreadMerge: the splits wait for each
    # other): at most one wave of the kernel's slots
    wave = kc.facts.sm_count * long_blocks_per_sm(head_dim)
    splits = min(long_launch_splits(kc, 1, hkv, head_dim, max_blocks * block_size, num_splits,
                                    max_splits), max(1, wave // hkv))
    late = bool(kc.routes.decode_attn_long_late_trigger)
    if trace and not late:
        raise ValueError("decode_attention_long_rope_gated: the phase-traced twin is the late "
                         "entry's (set routes.decode_attn_long_late_trigger)")
    sig = (DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_TRACE_D256 if trace else
           DECODE_ATTN_LONG_ROPE_EARLY_LATE_GATED_D256 if late else
           DECODE_ATTN_LONG_ROPE_EARLY_GATED_D256)
    launch = _launch_long(kc, sig, head_dim, True)
    extra = (trace,) if trace else ()
    launch(stream, (splits, hkv, 1), LONG_THREADS, long_smem_bytes(head_dim, True), qkv,
           k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
           kv_lens, part_o, part_ml, counters if splits > 1 else 0, out, 1, hq, hkv, head_dim,
           block_size, max_blocks, splits, scale, eps, 0, head_dim, 0, q_pitch, rotary_dim,
           int(norm_offset), *extra)

