"""Launch builder and routing of the verification decode attention (hopper/common/
attention_verify.cu).

A verification step feeds a speculating sequence's last token and its K drafts as K + 1
consecutive decode rows (model/runner.py), row j seeing its sequence's keys up to its own
position. decode_attention runs each row as a sequence of its own, so the sequence's K/V
are read K + 1 times; the verification kernel finds the rows of one sequence itself (a run
of rows, attention_verify.cu says how) and serves them and the kv head's q heads as the
rows of one to four tensor-core tiles, reading the K/V once. Plain rows (runs of one) take
it as well, so a verification step of mixed sequences is one launch.

`verify_split_rule` is its split rule (whole 64-key tiles, from a row's own kv_len); it
merges its own partials (the last active split of a piece takes the ticket), so nothing
follows it. `uses_verify` is the routing rule of the model's verification steps.
`decode_attention_verify_rope` is its entry point that also does qk_norm_rope_kv's work (the
q/k norm, RoPE and K/V append) in its blocks, one launch instead of two (opt-in,
ATLAS_DECODE_ATTN_VERIFY_ROPE=1; `rope_fits` says which layouts it takes).
`decode_attention_verify_cluster` does the same work the way the plain batch-1 step's
clustered kernel does: one thread-block cluster per (kv head, sequence) whose blocks merge on
chip, the K/V history requested before the PDL wait (the default since gpu28;
ATLAS_DECODE_ATTN_VERIFY_CLUSTER=0 turns it off; `uses_cluster` is its routing rule).
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import (DECODE_ATTN_VERIFY, DECODE_ATTN_VERIFY_CLUSTER,
                          DECODE_ATTN_VERIFY_ROPE)
from . import KernelCache

#: head dimensions it is compiled for
VERIFY_HEAD_DIMS = (64, 128, 256)
#: threads per block (attention_verify.cu kThreads) and keys per tile (kBKV)
VERIFY_THREADS = 128
VERIFY_TILE_KEYS = 64
#: tile rows of a block (kMaxRows: four m16 tiles), so a kv head's group is at most this
VERIFY_MAX_ROWS = 64
#: rows of one sequence a block serves (kMaxStepRows): a verification of K <= 7 drafts is
#: one piece where group x (K + 1) <= VERIFY_MAX_ROWS
VERIFY_MAX_STEP_ROWS = 8
#: the longest run of one sequence's rows the kernel's neighbour search sees (32 lanes)
VERIFY_MAX_RUN = 32
#: blocks of a cluster of the clustered entry (attention_verify.cu kClusterBlocks): the
#: splits of every row, each 64 ceil(L / (64 VERIFY_CLUSTER_BLOCKS)) keys of the row's L
VERIFY_CLUSTER_BLOCKS = 8
#: tile rows of an m16 tile: the clustered entry serves each m16 tile of a piece's rows with a
#: cluster of its own, so a row's arithmetic is that of a one-tile step whatever the step's
#: tile count
VERIFY_MMA_ROWS = 16
#: most splits: the merge keeps the rows' split weights and l's, 2 x [VERIFY_MAX_ROWS][splits]
#: f32, and their sums in the ring (32.25 KiB at 64, the D = 64 ring is 48; decode_splits
#: never asks for more)
VERIFY_MAX_SPLITS = 64


def verify_stages(head_dim: int) -> int:
    """K/V ring depth (VerifyTile::kStages): 3 up to D = 128, 2 at D = 256 (shared memory)."""
    return 3 if head_dim <= 128 else 2


def verify_smem_bytes(head_dim: int) -> int:
    """Dynamic shared memory (VerifyTile::kSmemBytes): the Q tile of VERIFY_MAX_ROWS rows and
    the ring of K and V [64][D] bf16 tiles (the warps' merge reuses the ring)."""
    return 2 * head_dim * (VERIFY_MAX_ROWS + verify_stages(head_dim) * 2 * VERIFY_TILE_KEYS)


def verify_cluster_smem_bytes(head_dim: int) -> int:
    """Dynamic shared memory of the clustered entry (ClusterSmem::kBytes): verify_smem_bytes
    and the staging of the step's keys (k and v rows of VERIFY_MAX_STEP_ROWS keys, bf16)."""
    return verify_smem_bytes(head_dim) + 2 * VERIFY_MAX_STEP_ROWS * head_dim * 2


def verify_split_rule(kv_len: int, num_splits: int,
                      min_chunk: int = VERIFY_TILE_KEYS) -> tuple[int, int]:
    """(keys per split, active splits) of one row: ceil(kv_len / num_splits) rounded up to
    whole VERIFY_TILE_KEYS tiles, at least `min_chunk` (a multiple of them); split i covers
    [i * chunk, min((i + 1) * chunk, kv_len)). A row with one active split is written by
    split 0 directly, with more its partials are merged (in split order) by the last of its
    piece's active splits."""
    per = max(-(-kv_len // num_splits), 1)
    chunk = max(-(-per // VERIFY_TILE_KEYS) * VERIFY_TILE_KEYS, min_chunk)
    return chunk, -(-kv_len // chunk)


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include attention_verify (hopper sets do)."""
    return DECODE_ATTN_VERIFY.module in kc.backend.module_names


def fits(hq: int, hkv: int, head_dim: int) -> bool:
    """The head geometry the kernel takes: a compiled head_dim, a group of at most
    VERIFY_MAX_ROWS q heads."""
    return head_dim in VERIFY_HEAD_DIMS and hkv >= 1 and hq % hkv == 0 and \
        hq // hkv <= VERIFY_MAX_ROWS


def uses_verify(kc: KernelCache, hq: int, hkv: int, head_dim: int, step_keys: int,
                num_seqs: int = 1) -> bool:
    """The routing rule of a verification step's attention (up to `step_keys` rows of each
    of `num_seqs` sequences, after qk_norm_rope_kv appended their K/V): switched on
    (ATLAS_DECODE_ATTN_VERIFY), at most ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH sequences (a
    batch of them runs faster rows apart: gpu20, batch 8 at 512 keys 35.05 us vs 17.49),
    loaded, a head geometry the kernel takes, and runs its neighbour search sees whole
    (VERIFY_MAX_RUN)."""
    routes = kc.routes
    return (routes.decode_attn_verify and num_seqs <= routes.decode_attn_verify_max_batch
            and fits(hq, hkv, head_dim) and 1 < step_keys <= VERIFY_MAX_RUN
            and available(kc))


def uses_cluster(kc: KernelCache, step_keys: int) -> bool:
    """Whether a verification step on the kernel (`uses_verify`) with the classic layout
    (`rope_fits`) takes the clustered entry: routes.decode_attn_verify_cluster (on unless
    ATLAS_DECODE_ATTN_VERIFY_CLUSTER=0) and a sequence's rows within its key staging
    (VERIFY_MAX_STEP_ROWS)."""
    return kc.routes.decode_attn_verify_cluster and step_keys <= VERIFY_MAX_STEP_ROWS


def cluster_tile_slots(hq: int, hkv: int, step_rows: int, side_by_side: bool = True) -> int:
    """Clusters per (kv head, window) of the clustered entry (`side_by_side`,
    routes.decode_attn_verify_tile_clusters): the m16 tiles of the longest piece a launch
    holds, `step_rows` rows of one sequence (at most the kernel's piece cap,
    min(VERIFY_MAX_STEP_ROWS, VERIFY_MAX_ROWS / group)) times the group's q heads; else 1.
    Cluster slot t serves tiles t, t + slots, ... of every piece in turn, each with one
    tile's arithmetic, so a row computes what it computes in a one-tile step: the same bits
    in every step (K = 3 and K = 4 of Qwen3-8B: 16 and 20 tile rows, one and two tiles)."""
    if not side_by_side:
        return 1
    group = hq // hkv
    rows = min(step_rows, VERIFY_MAX_STEP_ROWS, VERIFY_MAX_ROWS // group) * group
    return -(-rows // VERIFY_MMA_ROWS)


def rope_fits(hq: int, hkv: int, head_dim: int, q_pitch: int, rotary_dim: int,
              norm_offset: bool) -> bool:
    """The layouts decode_attention_verify_rope takes: `fits`, and qk_norm_rope_kv_bf16's
    classic qkv row (q heads head_dim apart, the whole head rotated, plain or no norm
    weights; the gated-attention form runs qk_norm_rope_kv_partial_bf16 first instead)."""
    return (fits(hq, hkv, head_dim) and q_pitch == head_dim and rotary_dim == head_dim
            and not norm_offset)


def _check_launch(name: str, aligned: tuple[tuple[str, DevicePtr, int], ...],
                  part_o: DevicePtr, part_ml: DevicePtr, counters: DevicePtr, out: DevicePtr,
                  num_rows: int, hq: int, hkv: int, head_dim: int, block_size: int,
                  max_blocks: int, num_splits: int, rows_per_block: int,
                  min_chunk: int) -> None:
    """The preconditions of both entry points (ValueError naming `name`): `aligned` are the
    entry point's own (pointer name, value, alignment) pairs."""
    if not fits(hq, hkv, head_dim):
        raise ValueError(f"{name}: head_dim={head_dim} (needs one of "
                         f"{VERIFY_HEAD_DIMS}), hq={hq} and hkv={hkv} (a group of at most "
                         f"{VERIFY_MAX_ROWS})")
    if min_chunk < VERIFY_TILE_KEYS or min_chunk % VERIFY_TILE_KEYS:
        raise ValueError(f"{name}: min_chunk={min_chunk} must be a positive multiple of "
                         f"{VERIFY_TILE_KEYS} keys")
    if num_rows < 1 or not 1 <= num_splits <= VERIFY_MAX_SPLITS or max_blocks < 1 \
            or block_size < 1 or rows_per_block < 1:
        raise ValueError(f"{name}: need num_rows, max_blocks, block_size, rows_per_block >= 1 "
                         f"and 1 <= num_splits <= {VERIFY_MAX_SPLITS}, got {num_rows}, "
                         f"{max_blocks}, {block_size}, {rows_per_block}, {num_splits}")
    # cp.async moves q and K/V 16 bytes at a time; the merge reads part_o as float4 and
    # part_ml as float2, and stores 4 bf16 at once
    for what, ptr, align in aligned + (("part_o", part_o, 16), ("part_ml", part_ml, 8),
                                       ("counters", counters, 4), ("out", out, 8)):
        if ptr % align:
            raise ValueError(f"{name}: {what} pointer {ptr:#x} is not {align}-byte aligned")


def decode_attention_verify(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                            v_cache: DevicePtr, block_tables: DevicePtr, kv_lens: DevicePtr,
                            part_o: DevicePtr, part_ml: DevicePtr, counters: DevicePtr,
                            out: DevicePtr, num_rows: int, hq: int, hkv: int, head_dim: int,
                            block_size: int, max_blocks: int, num_splits: int,
                            scale: float, rows_per_block: int = 1,
                            min_chunk: int = VERIFY_TILE_KEYS) -> None:
    """out [num_rows, hq, D] = each row's decode attention over its own kv_len keys, the
    K/V of consecutive rows of one sequence read once (a verification step's rows; q from
    qk_norm_rope_kv, which appended every row's key first).

    Buffers as decode_attention's: part_o f32 [num_rows, hq, num_splits, D], part_ml f32
    [num_rows, hq, num_splits, 2] (m in log2 units here), counters u32 [num_rows, hkv] zero
    before the launch and left zero. A row's chunking (`verify_split_rule`) depends on its
    kv_len and num_splits only, and its arithmetic on its piece's tile count (one m16 tile
    per 16 rows of group x rows of its sequence), not on the other rows: a verification
    row computes what the row at the same position of another verification step of the
    same shape computes, bit for bit. Block-table rows of one sequence's rows must be equal
    (the runner's are: the sequence's table).

    kv_lens and block_tables are read before the kernel's programmatic-dependency wait (q
    and the caches after it): no kernel may write them (the runner's come from the step's
    host upload).

    `rows_per_block`: the rows of each block's window (the grid has ceil(num_rows /
    rows_per_block) of them); a block serves the pieces that start in its window. The model
    passes a sequence's rows in the step (K + 1), so a verification is one block per (split,
    kv head) and no block exists only to find that its row starts no piece (gpu19: one block
    per row spent 35.4 us a call on such blocks). Any value is correct.

    `min_chunk`: the fewest keys a row's split takes (`verify_split_rule`; a positive
    multiple of VERIFY_TILE_KEYS, ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS): above one tile, a
    short context's rows take fewer splits of several tiles each (the ring keeps two in
    flight) and the merge reads fewer partials."""
    _check_launch("decode_attention_verify", (("q", q, 16), ("k_cache", k_cache, 16),
                                              ("v_cache", v_cache, 16)),
                  part_o, part_ml, counters, out, num_rows, hq, hkv, head_dim, block_size,
                  max_blocks, num_splits, rows_per_block, min_chunk)
    launch = kc.get_with_shared(DECODE_ATTN_VERIFY, verify_smem_bytes(max(VERIFY_HEAD_DIMS)))
    launch(stream, (num_splits, hkv, -(-num_rows // rows_per_block)), VERIFY_THREADS,
           verify_smem_bytes(head_dim),
           q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml, counters, out,
           num_rows, hq, hkv, head_dim, block_size, max_blocks, num_splits, scale, min_chunk)


def decode_attention_verify_rope(kc: KernelCache, stream: Stream, qkv: DevicePtr, q: DevicePtr,
                                 k_cache: DevicePtr, v_cache: DevicePtr, q_norm_w: DevicePtr,
                                 k_norm_w: DevicePtr, cos_sin: DevicePtr, positions: DevicePtr,
                                 slots: DevicePtr, block_tables: DevicePtr, kv_lens: DevicePtr,
                                 part_o: DevicePtr, part_ml: DevicePtr, counters: DevicePtr,
                                 out: DevicePtr, num_rows: int, hq: int, hkv: int,
                                 head_dim: int, block_size: int, max_blocks: int,
                                 num_splits: int, scale: float, eps: float,
                                 rows_per_block: int = 1,
                                 min_chunk: int = VERIFY_TILE_KEYS) -> None:
    """rope.qk_norm_rope_kv (qkv [num_rows, (hq + 2 hkv) D], the classic layout: `rope_fits`;
    null norm weights: no q/k norm; slots < 0 append nothing) then `decode_attention_verify`,
    in one launch, with the same bits: the blocks norm and rotate their q rows into `q` and
    the step's keys their tiles hold into the caches themselves (attention_verify.cu). q is
    written as qk_norm_rope_kv writes it. Arguments otherwise as decode_attention_verify's."""
    _check_launch("decode_attention_verify_rope", (("qkv", qkv, 16), ("q", q, 16),
                                                   ("k_cache", k_cache, 16),
                                                   ("v_cache", v_cache, 16)),
                  part_o, part_ml, counters, out, num_rows, hq, hkv, head_dim, block_size,
                  max_blocks, num_splits, rows_per_block, min_chunk)
    launch = kc.get_with_shared(DECODE_ATTN_VERIFY_ROPE,
                                verify_smem_bytes(max(VERIFY_HEAD_DIMS)))
    launch(stream, (num_splits, hkv, -(-num_rows // rows_per_block)), VERIFY_THREADS,
           verify_smem_bytes(head_dim),
           qkv, q, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots,
           block_tables, kv_lens, part_o, part_ml, counters, out, num_rows, hq, hkv, head_dim,
           block_size, max_blocks, num_splits, scale, min_chunk, eps)


def decode_attention_verify_cluster(kc: KernelCache, stream: Stream, qkv: DevicePtr,
                                    k_cache: DevicePtr, v_cache: DevicePtr, q_norm_w: DevicePtr,
                                    k_norm_w: DevicePtr, cos_sin: DevicePtr,
                                    positions: DevicePtr, slots: DevicePtr,
                                    block_tables: DevicePtr, kv_lens: DevicePtr, out: DevicePtr,
                                    num_rows: int, hq: int, hkv: int, head_dim: int,
                                    block_size: int, max_blocks: int, scale: float, eps: float,
                                    rows_per_block: int = 1, step_rows: int = 0) -> None:
    """What decode_attention_verify_rope computes (qk_norm_rope_kv's append of every row's
    k and v, then each row's attention over its own kv_len keys; q is not written), in one
    launch of thread-block clusters: each piece of a sequence's rows is served per kv head by
    VERIFY_CLUSTER_BLOCKS blocks, block b attending keys [b chunk, (b + 1) chunk) of each row
    (chunk = 64 ceil(L / (64 VERIFY_CLUSTER_BLOCKS)) of the row's own L: whole tiles at
    absolute positions), merged through distributed shared memory in block order. No partial
    buffers, no split count, no ticket: nothing to zero. Within float rounding of the unfused
    path, not bit for bit (its own chunking, tensor-core sums); a row's bits do not depend on
    the other rows of its step, which speculative decoding's acceptance needs: a piece's
    (row, q head) pairs are cut into m16 tiles, each served by a cluster of its own
    (`cluster_tile_slots` per kv head and window) whose warps each take the same 16 keys of
    every 64-key tile, so a row's key partition, online softmax and merge orders are a
    one-tile step's whatever the tile count of its step (a plain row's: the same kernel on
    a run of one row). A piece's tiles run side by side, or in turn on one cluster per kv
    head under ATLAS_DECODE_ATTN_VERIFY_TILE_CLUSTERS=0.

    Runs of one sequence's rows (attention_verify.cu's neighbour search) must be at most
    VERIFY_MAX_STEP_ROWS rows (the kernel traps otherwise; the model's are K + 1, `uses_cluster`).
    Read before the kernel's PDL wait: kv_lens, block_tables and the cached rows of earlier
    positions (and the norm weights), as decode_attention_rope does: launch it right after
    the qkv projection. `rows_per_block`: the rows of each cluster's window, as
    decode_attention_verify's. `step_rows`: the most rows of one sequence in the launch
    (0: rows_per_block, the model's launch, whose window is a sequence's K + 1 rows): it
    sizes the tile slots (a longer piece's extra tiles run in turn, correct but slower)."""
    name = "decode_attention_verify_cluster"
    if not fits(hq, hkv, head_dim):
        raise ValueError(f"{name}: head_dim={head_dim} (needs one of {VERIFY_HEAD_DIMS}), "
                         f"hq={hq} and hkv={hkv} (a group of at most {VERIFY_MAX_ROWS})")
    if num_rows < 1 or max_blocks < 1 or block_size < 1 or rows_per_block < 1 or step_rows < 0:
        raise ValueError(f"{name}: need num_rows, max_blocks, block_size, rows_per_block >= 1 "
                         f"and step_rows >= 0, got {num_rows}, {max_blocks}, {block_size}, "
                         f"{rows_per_block}, {step_rows}")
    if bool(q_norm_w) != bool(k_norm_w):
        raise ValueError(f"{name}: q_norm_w and k_norm_w must both be set or both be 0")
    # the v heads of qkv and the cache rows move 16 bytes at a time, cos/sin as floats
    for what, ptr, align in (("qkv", qkv, 16), ("k_cache", k_cache, 16),
                             ("v_cache", v_cache, 16), ("cos_sin", cos_sin, 4)):
        if ptr % align:
            raise ValueError(f"{name}: {what} pointer {ptr:#x} is not {align}-byte aligned")
    launch = kc.get_with_shared(DECODE_ATTN_VERIFY_CLUSTER,
                                verify_cluster_smem_bytes(max(VERIFY_HEAD_DIMS)))
    tile_slots = cluster_tile_slots(hq, hkv, step_rows or rows_per_block,
                                    kc.routes.decode_attn_verify_tile_clusters)
    launch(stream, (VERIFY_CLUSTER_BLOCKS, hkv * tile_slots, -(-num_rows // rows_per_block)),
           VERIFY_THREADS, verify_cluster_smem_bytes(head_dim),
           qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
           kv_lens, out, num_rows, hq, hkv, head_dim, block_size, max_blocks, scale, eps)
