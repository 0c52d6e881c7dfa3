"""Launch builder for the persistent batch-1 decode kernel (decode_persistent.cu).

One launch runs every transformer layer of a one-sequence decode step of a dense bf16
model: grid = the device's SM count with one 512-thread block per SM (the kernel's launch
bounds allow no second one, so every block is resident and its waits cannot deadlock),
phases ordered by per-layer readiness counts (a block waits for the blocks that wrote what
it reads) or, with ATLAS_PERSISTENT_FLAGS=0, by device-wide barriers (the .cu header). Its
inputs that stay fixed for the model's life, the per-layer weight / norm / cache pointers and
the barrier and count words, live in `PersistentTables`, built once at load time by
`build_tables`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_abi import DECODE_PERSISTENT
from . import KernelCache
from ._preconditions import require_aligned, require_multiple
from .attention import HEAD_DIMS

#: decode_persistent.cu kThreads / kWarps
PERSISTENT_THREADS = 512
PERSISTENT_WARPS = PERSISTENT_THREADS // 32
#: slots of a block's trace row a layer: as each of its five phases ends on the block, and as
#: the barrier after it opens (ns, %globaltimer); slot 0 is the kernel's start
TRACE_SLOTS_PER_LAYER = 10
#: decode_persistent.cu kTicketWord: the u32 word of `sync` where the split tickets start
TICKET_WORD = 32
#: decode_persistent.cu kTableSlots: an attention split's block-table entries kept in shared
#: memory
TABLE_SLOTS = 64
#: decode_persistent.cu EdgeCount: a layer's readiness counts after its qkv head tiles (heads
#: merged, o_proj / gate_up / down blocks done)
EDGE_COUNTS = 4


def exit_word(hq: int) -> int:
    """The u32 word of `sync` holding the counter schedule's exit ticket: the cache line
    after the split tickets; the per-layer readiness counts start a line after it."""
    return -(-(TICKET_WORD + hq) // 32) * 32


def sync_words(num_layers: int, hq: int, hkv: int) -> int:
    """u32 words of the kernel's `sync` buffer: the barrier count, the split tickets, the
    exit ticket and, per layer, one readiness count per qkv head tile (hq + 2 hkv) and
    EDGE_COUNTS more."""
    return exit_word(hq) + 32 + num_layers * (hq + 2 * hkv + EDGE_COUNTS)


def tile_blocks(tile: int, head_dim: int, n: int, grid: int) -> int:
    """Blocks whose qkv rows (ceil(n / grid) a block) touch head tile `tile` (rows
    [tile D, (tile + 1) D)): the arrivals an attention item waits for on its count
    (decode_persistent.cu tile_blocks)."""
    per = -(-n // grid)
    return ((tile + 1) * head_dim - 1) // per - (tile * head_dim) // per + 1


def tiles_touched(blk: int, head_dim: int, n: int, grid: int) -> range:
    """Head tiles block `blk` adds an arrival to after its qkv rows (arrive_tiles)."""
    per = -(-n // grid)
    r0 = min(n, blk * per)
    r1 = min(n, r0 + per)
    return range(r0 // head_dim, (r1 - 1) // head_dim + 1) if r1 > r0 else range(0)
#: the per-layer pointer table's columns, in the kernel's LayerPtr order
LAYER_POINTERS = ("in_norm", "qkv_w", "q_norm", "k_norm", "k_cache", "v_cache", "o_w",
                  "post_norm", "gate_up_w", "down_w")


@dataclass(frozen=True, slots=True)
class PersistentTables:
    """Device-resident inputs of the persistent kernel: `layers` u64 [num_layers,
    len(LAYER_POINTERS)], never changed, and `sync` u32 [sync_words]: the barriers' 64-bit
    arrival count (zero at allocation; it only grows, by the grid size a barrier, so every
    launch on it must use the same grid), a cache line on one split ticket per q head, then
    the counter schedule's exit ticket and readiness counts (zero, and every launch leaves
    them zero)."""

    layers: DevicePtr
    sync: DevicePtr
    num_layers: int


def build_tables(dev: GpuBackend, rows: list[dict[str, DevicePtr]], hq: int, hkv: int
                 ) -> PersistentTables:
    """Upload the pointer table (one dict per layer, keys LAYER_POINTERS; q_norm / k_norm 0
    for a family without q/k norm) and allocate the zeroed barrier words."""
    table = np.array([[int(row[name]) for name in LAYER_POINTERS] for row in rows],
                     dtype=np.uint64)
    missing = [i for i, row in enumerate(rows)
               for name in LAYER_POINTERS if name not in ("q_norm", "k_norm") and not row[name]]
    if missing:
        raise ValueError(f"decode_persistent: layer {missing[0]} lacks a weight or cache pointer")
    misaligned = [(i, name) for i, row in enumerate(rows) for name in LAYER_POINTERS
                  if int(row[name]) % 16]
    if misaligned:  # bulk copies and 16-byte loads
        raise ValueError(f"decode_persistent: layer {misaligned[0][0]} {misaligned[0][1]} is "
                         "not 16-byte aligned")
    layers = dev.upload(table)
    dev.mark_constant(layers, table.nbytes)
    words = sync_words(len(rows), hq, hkv)
    sync = dev.alloc(4 * words)
    dev.memset(sync, 0, 4 * words)
    return PersistentTables(layers, sync, len(rows))


def persistent_splits(grid: int, hq: int, max_splits: int) -> int:
    """Key splits of each q head: enough (head, split) items to give every block one, within
    the step's partial buffers (max_splits slots a head). A split covers keys by
    ops.attention.decode_split_rule (at least DECODE_MIN_KEYS_PER_SPLIT of them)."""
    return max(1, min(max_splits, grid // hq))


#: static shared memory of the kernel (its Step, reduction scratch and mbarriers) with room
#: to spare: what the dynamic part's budget leaves out
STATIC_SHARED_RESERVE = 1024


def _align(n: int, to: int = 128) -> int:
    return -(-n // to) * to


def base_shared_bytes(hidden: int, hq: int, head_dim: int, inter: int) -> int:
    """Dynamic shared memory before the weight buffers (decode_persistent.cu's layout, each
    part 128-byte aligned): the widest GEMV input row (bf16), then the attention scratch
    (AttnSmem<D>: 5 bf16 heads, the f32 query, each warp's m, l and head accumulator, the
    split's block-table entries, the merge flag)."""
    attn = 5 * 2 * head_dim + 4 * head_dim + 8 * PERSISTENT_WARPS \
        + 4 * PERSISTENT_WARPS * head_dim + 4 * TABLE_SLOTS + 4
    return _align(2 * max(hidden, hq * head_dim, inter)) + _align(attn)


def phase_slices(grid: int, hidden: int, hq: int, hkv: int, head_dim: int, inter: int
                 ) -> tuple[tuple[int, int], tuple[int, int]]:
    """The most weight bytes one block owns of each phase, as the kernel splits rows
    (ceil(n / grid) a block): ((qkv, gate/up both halves), (o, down)) by weight buffer."""
    def rows(n: int) -> int:
        return -(-n // grid)

    qkv = rows((hq + 2 * hkv) * head_dim) * hidden * 2
    gate_up = rows(inter) * hidden * 4
    o = rows(hidden) * hq * head_dim * 2
    down = rows(hidden) * inter * 2
    return (qkv, gate_up), (o, down)


def stage_plan(grid: int, budget: int, hidden: int, hq: int, hkv: int, head_dim: int,
               inter: int) -> tuple[int, int]:
    """Capacities of the two shared-memory weight buffers (bytes; 0: that buffer unused):
    the pair that stages the most weight bytes of a layer within `budget`. A phase whose
    slice fits its buffer is bulk-copied a phase or two ahead; the others stream from
    global memory after an L2 prefetch. Qwen3-0.6B stages all four (96 + 48 KB a block)."""
    slices = phase_slices(grid, hidden, hq, hkv, head_dim, inter)
    best, best_staged = (0, 0), 0
    for c0 in (0, *slices[0]):
        for c1 in (0, *slices[1]):
            if _align(c0) + c1 > budget:
                continue
            staged = sum(x for x in slices[0] if x <= c0) + sum(x for x in slices[1] if x <= c1)
            if staged > best_staged:
                best, best_staged = (c0, c1), staged
    return best


def check_shapes(hidden: int, hq: int, hkv: int, head_dim: int, inter: int) -> str | None:
    """Why the kernel cannot run these shapes (None: it can)."""
    if head_dim not in HEAD_DIMS:
        return f"head_dim={head_dim} not in {HEAD_DIMS}"
    if hkv < 1 or hq % hkv:
        return f"hq={hq} is not a multiple of hkv={hkv}"
    for name, value in (("hidden", hidden), ("inter", inter)):
        if value < 8 or value % 8:
            return f"{name}={value} is not a positive multiple of 8"
    return None


def persistent_grid(kc: KernelCache) -> int:
    """The kernel's grid: one block per SM (every block resident); fewer only where
    ATLAS_PERSISTENT_BLOCKS asks."""
    return min(kc.routes.persistent_blocks or kc.facts.sm_count, kc.facts.sm_count)


def decode_persistent(kc: KernelCache, stream: Stream, tables: PersistentTables,
                      resid: DevicePtr, qkv: DevicePtr, attn: DevicePtr, act: DevicePtr,
                      part_o: DevicePtr, part_ml: DevicePtr, cos_sin: DevicePtr,
                      positions: DevicePtr, slots: DevicePtr, block_tables: DevicePtr,
                      kv_lens: DevicePtr, hidden: int, hq: int, hkv: int, head_dim: int,
                      inter: int, block_size: int, max_splits: int, scale: float,
                      eps: float, trace: DevicePtr = 0) -> None:
    """resid (bf16 [hidden], the embedded token) becomes the residual stream after every
    layer; the step's K/V are appended to each layer's caches. One sequence (row 0 of
    block_tables / kv_lens / positions / slots); part_o / part_ml hold max_splits slots a
    head (the decode step's partial buffers). `trace`: 0, or u64 [persistent_grid(kc),
    1 + 10 num_layers] for each block's phase timeline (TRACE_SLOTS_PER_LAYER a layer;
    tools/gpu/persistent_trace.py)."""
    reason = check_shapes(hidden, hq, hkv, head_dim, inter)
    if reason:
        raise ValueError(f"decode_persistent: {reason}")
    require_multiple("decode_persistent", "block_size", block_size, 1)
    for name, ptr in (("resid", resid), ("qkv", qkv), ("attn", attn), ("act", act),
                      ("part_o", part_o), ("cos_sin", cos_sin)):
        require_aligned("decode_persistent", name, ptr, 16)
    grid = persistent_grid(kc)
    splits = min(kc.routes.persistent_splits, max_splits) or persistent_splits(grid, hq,
                                                                               max_splits)
    base = base_shared_bytes(hidden, hq, head_dim, inter)
    budget = kc.facts.shared_memory_per_block - STATIC_SHARED_RESERVE - base
    if budget < 0:
        raise ValueError(f"decode_persistent: needs {base} B of shared memory, the device "
                         f"allows {kc.facts.shared_memory_per_block - STATIC_SHARED_RESERVE}")
    stage0, stage1 = (stage_plan(grid, budget, hidden, hq, hkv, head_dim, inter)
                      if kc.routes.persistent_stage else (0, 0))
    nbytes = base + _align(stage0) + stage1
    kc.get_with_shared(DECODE_PERSISTENT, nbytes, most_shared=True)(
        stream, grid, PERSISTENT_THREADS, nbytes, tables.layers, resid, qkv, attn,
        act, part_o, part_ml, tables.sync, cos_sin, positions, slots, block_tables, kv_lens,
        tables.num_layers, hidden, hq, hkv, head_dim, inter, block_size, splits,
        kc.routes.persistent_prefetch_kb * 1024, stage0, stage1, scale, eps, trace,
        int(kc.routes.persistent_flags))
