"""Launch builder for the skinny wgmma GEMM of decode batches (hopper/common/gemm_decode_sm90.cu).

y[m, n] = x[m, k] @ w[n, k].T for 1 <= m <= 256 rows on Hopper warpgroup MMA: the weight is
wgmma's M = 64 operand (64 outputs per warpgroup) and the batch its N (m rounded up to 16, 32,
64, 128 or 256), so the weights stream from HBM once whatever m is. A block has one
warpgroup, or two that share each x tile between 128 weight rows (`decode_groups`: every
block re-reads x from L2, so one-warpgroup blocks move twice the weight bytes from L2 at 64
rows, two-warpgroup blocks 1.5 times). Projections with too few tiles to fill the device
split K over a thread-block cluster of 2, 4 or 8 blocks (the TMA kernel: any of 2..8) that
sum their partials through distributed shared memory (`decode_split`). A fused [gate | up]
weight can end its product with its gated activation (`glu`: Glu.SWIGLU, or Glu.GEGLU for
Gemma 3's tanh-GELU GLU; each block loads matching gate and up rows and writes their
activation, so no silu_mul / gelu_tanh_mul launch follows; KernelRoutes.decode_gemm_swiglu).
The geometry constants mirror the kernel's; only sm_90a sets build the module (`available`).

Two kernels compute it, bit for bit alike: gemm_decode_tma (the default where the set has it,
KernelRoutes.decode_gemm_tma / ATLAS_DECODE_GEMM_TMA=0) streams the operands with TMA
tensor copies issued by one producer warp (128 G + 32 threads) through a ring of up to
TMA_MAX_STAGES slots, all in flight; gemm_decode_sm90 has every thread issue 16-byte
cp.async copies. Their tensor maps (w's and x's) come from KernelCache.tensor_map: encoded
once per buffer, shape and box, never per step.

On a device the split and block shape are measured rather than modelled (ATLAS_DECODE_GEMM_TUNE,
on by default): the first eager launch of each launch shape times every candidate (`tuned_pick`,
ops/decode_gemm_tune.py) and the fastest is kept, by device and kernel build, in a file; the
model (`launch_split`, `decode_groups`) stays the baseline a candidate must beat by 4%, and the
choice inside a graph capture of a shape never launched eagerly.

Under KernelRoutes.decode_gemm_persistent (the default; ATLAS_DECODE_GEMM_PERSISTENT=0:
never) a TMA launch whose grid would run more than one wave, at a split with persistent
entries (PERSISTENT_SPLITS), launches the persistent form (`persistent_grid`): as many
clusters as the device holds at once, each looping over tiles with one ring, the next tile
streaming in during the epilogue.

Stream-K (`STREAMK`, split 0 of a pick; the tuner's candidate where KernelRoutes.
decode_gemm_streamk and the batch runs at N <= STREAMK_MAX_COLS): one block per resident slot
(no cluster), block b taking units [b U / P, (b + 1) U / P) of the U = tiles x k-tiles (tile,
k-tile) pairs in tile-major order, its ring running on across the tiles it touches. A tile a
block covers whole it stores; a block whose range starts inside a tile writes that segment's
f32 partial to a workspace (`streamk_workspace`) and raises its flag; the block holding the
tile's k-tile 0 (its range ends inside the tile) adds the later blocks' partials in block
order, resets their flags and stores. So every SM streams an equal share of the weight bytes
where a cluster split leaves some idle (Qwen3-8B qkv at 64 rows: 48 tiles x split 2 = 96 of
132 SMs), at the cost of the partials' round trip through L2.
"""

from __future__ import annotations

import itertools
from enum import IntEnum
from typing import Iterator, Mapping

from ...core.cold_reads import rotation_copies
from ..gpu import H200_FACTS, DevicePtr, GpuError, KernelSig, Stream
from ..kernel_abi import geglu_twin
from ..kernel_abi import (GEMM_DECODE_SM90, GEMM_DECODE_SM90_F32OUT,
                          GEMM_DECODE_SM90_F32OUT_SPLIT2, GEMM_DECODE_SM90_F32OUT_SPLIT4,
                          GEMM_DECODE_SM90_F32OUT_SPLIT8, GEMM_DECODE_SM90_SPLIT2,
                          GEMM_DECODE_SM90_SPLIT4, GEMM_DECODE_SM90_SPLIT8,
                          GEMM_DECODE_SM90_SWIGLU, GEMM_DECODE_SM90_SWIGLU_SPLIT2,
                          GEMM_DECODE_SM90_SWIGLU_SPLIT4, GEMM_DECODE_SM90_SWIGLU_SPLIT8)
from ..kernel_abi import (GEMM_DECODE_TMA, GEMM_DECODE_TMA_F32OUT,
                          GEMM_DECODE_TMA_F32OUT_SPLIT2, GEMM_DECODE_TMA_F32OUT_SPLIT3,
                          GEMM_DECODE_TMA_F32OUT_SPLIT4, GEMM_DECODE_TMA_F32OUT_SPLIT5,
                          GEMM_DECODE_TMA_F32OUT_SPLIT6, GEMM_DECODE_TMA_F32OUT_SPLIT7,
                          GEMM_DECODE_TMA_F32OUT_SPLIT8, GEMM_DECODE_TMA_SPLIT2,
                          GEMM_DECODE_TMA_SPLIT3, GEMM_DECODE_TMA_SPLIT4, GEMM_DECODE_TMA_SPLIT5,
                          GEMM_DECODE_TMA_SPLIT6, GEMM_DECODE_TMA_SPLIT7, GEMM_DECODE_TMA_SPLIT8,
                          GEMM_DECODE_TMA_SWIGLU, GEMM_DECODE_TMA_SWIGLU_SPLIT2,
                          GEMM_DECODE_TMA_SWIGLU_SPLIT3, GEMM_DECODE_TMA_SWIGLU_SPLIT4,
                          GEMM_DECODE_TMA_SWIGLU_SPLIT5, GEMM_DECODE_TMA_SWIGLU_SPLIT6,
                          GEMM_DECODE_TMA_SWIGLU_SPLIT7, GEMM_DECODE_TMA_SWIGLU_SPLIT8)
from ..kernel_abi import (GEMM_DECODE_TMA_F32OUT_STREAMK, GEMM_DECODE_TMA_STREAMK,
                          GEMM_DECODE_TMA_SWIGLU_STREAMK)
from ..kernel_abi import (GEMM_DECODE_TMA_F32OUT_PERSISTENT,
                          GEMM_DECODE_TMA_F32OUT_PERSISTENT_SPLIT2, GEMM_DECODE_TMA_PERSISTENT,
                          GEMM_DECODE_TMA_PERSISTENT_SPLIT2, GEMM_DECODE_TMA_SWIGLU_PERSISTENT,
                          GEMM_DECODE_TMA_SWIGLU_PERSISTENT_SPLIT2)
from . import KernelCache
from ._preconditions import require_aligned, require_multiple
from .decode_gemm_tune import LAUNCHES_PER_REP, MAX_COPIES, ROTATE_BYTES, Pick, TuneKey
from .routes import DECODE_GEMM_SPLITS, DECODE_GEMM_TMA_SPLITS

#: largest batch: the widest wgmma N (gemm_decode_sm90.cu kMaxCols)
DECODE_MAX_M = 256
#: weight rows (outputs) per warpgroup: wgmma's M (kGroupRows)
DECODE_ROWS = 64
#: threads of a warpgroup (kGroupThreads)
DECODE_THREADS = 128
#: warpgroups a block may have (kMaxGroups = 2)
DECODE_GROUPS = (1, 2)
#: the wgmma widths a batch is rounded up to
DECODE_COLS = (16, 32, 64, 128, 256)
#: the narrowest width two-warpgroup blocks run (their x-tile copies need 256 16-byte chunks)
WIDE_MIN_COLS = 32
#: ring stages at most (kMaxStages) and the ring's byte budgets for two blocks per SM (one
#: warpgroup, N <= 128) and for one (N = 256, or two warpgroups) (kPairBudget, kSoloBudget)
DECODE_MAX_STAGES = 8
DECODE_PAIR_BUDGET = 110 * 1024
DECODE_SOLO_BUDGET = 200 * 1024
#: the TMA kernel's producer warp (gemm_decode_tma.cu kProducerThreads) and its ring's most
#: stages (kMaxStages; its byte budgets are the cp.async kernel's)
TMA_PRODUCER_THREADS = 32
TMA_MAX_STAGES = 16
#: the narrowest batch width the TMA kernel runs on two warpgroups by default (decode_groups)
TMA_WIDE_MIN_COLS = 64
#: a split of K keeps at least this many 64-column k-tiles per block: fewer would spend more
#: on the pipeline's fill and the partial sums than the extra blocks win
MIN_SPLIT_K_TILES = 4
#: the split value of a stream-K pick (the TMA kernel's *_streamk entries: no cluster)
STREAMK = 0
#: the widest batch stream-K runs at (gemm_decode_tma.cu kStreamkMaxCols)
STREAMK_MAX_COLS = 128

_SIGS: dict[tuple[int, bool], KernelSig] = {
    (1, False): GEMM_DECODE_SM90, (1, True): GEMM_DECODE_SM90_F32OUT,
    (2, False): GEMM_DECODE_SM90_SPLIT2, (2, True): GEMM_DECODE_SM90_F32OUT_SPLIT2,
    (4, False): GEMM_DECODE_SM90_SPLIT4, (4, True): GEMM_DECODE_SM90_F32OUT_SPLIT4,
    (8, False): GEMM_DECODE_SM90_SPLIT8, (8, True): GEMM_DECODE_SM90_F32OUT_SPLIT8,
}


class Glu(IntEnum):
    """The gated activation a [gate | up] product ends with (gemm_decode_tile.cuh Glu, the
    same values): NONE for a plain product, SWIGLU (silu_mul's arithmetic), GEGLU (Gemma 3's
    tanh-GELU GLU, gelu_tanh_mul's). An int, so a caller's `swiglu` flag (False / True) still
    says NONE / SWIGLU, and a TuneKey's `swiglu` field keeps its SwiGLU keys' text."""

    NONE = 0
    SWIGLU = 1
    GEGLU = 2


#: the SwiGLU entries by split
_SWIGLU_SIGS: dict[int, KernelSig] = {
    1: GEMM_DECODE_SM90_SWIGLU, 2: GEMM_DECODE_SM90_SWIGLU_SPLIT2,
    4: GEMM_DECODE_SM90_SWIGLU_SPLIT4, 8: GEMM_DECODE_SM90_SWIGLU_SPLIT8,
}
#: the TMA kernel's entries, keyed as _SIGS and _SWIGLU_SIGS
#: (every cluster size 1..8: DECODE_GEMM_TMA_SPLITS)
_TMA_SIGS: dict[tuple[int, bool], KernelSig] = {
    (1, False): GEMM_DECODE_TMA, (1, True): GEMM_DECODE_TMA_F32OUT,
    (2, False): GEMM_DECODE_TMA_SPLIT2, (2, True): GEMM_DECODE_TMA_F32OUT_SPLIT2,
    (3, False): GEMM_DECODE_TMA_SPLIT3, (3, True): GEMM_DECODE_TMA_F32OUT_SPLIT3,
    (4, False): GEMM_DECODE_TMA_SPLIT4, (4, True): GEMM_DECODE_TMA_F32OUT_SPLIT4,
    (5, False): GEMM_DECODE_TMA_SPLIT5, (5, True): GEMM_DECODE_TMA_F32OUT_SPLIT5,
    (6, False): GEMM_DECODE_TMA_SPLIT6, (6, True): GEMM_DECODE_TMA_F32OUT_SPLIT6,
    (7, False): GEMM_DECODE_TMA_SPLIT7, (7, True): GEMM_DECODE_TMA_F32OUT_SPLIT7,
    (8, False): GEMM_DECODE_TMA_SPLIT8, (8, True): GEMM_DECODE_TMA_F32OUT_SPLIT8,
}
_TMA_SWIGLU_SIGS: dict[int, KernelSig] = {
    1: GEMM_DECODE_TMA_SWIGLU, 2: GEMM_DECODE_TMA_SWIGLU_SPLIT2,
    3: GEMM_DECODE_TMA_SWIGLU_SPLIT3, 4: GEMM_DECODE_TMA_SWIGLU_SPLIT4,
    5: GEMM_DECODE_TMA_SWIGLU_SPLIT5, 6: GEMM_DECODE_TMA_SWIGLU_SPLIT6,
    7: GEMM_DECODE_TMA_SWIGLU_SPLIT7, 8: GEMM_DECODE_TMA_SWIGLU_SPLIT8,
}

#: the splits the TMA kernel has persistent entries for: the grids that run several waves
#: (the LM head unsplit, Qwen3-8B gate_up at 64 rows split 2: 384 blocks, 2.9 waves)
PERSISTENT_SPLITS = (1, 2)
_TMA_PERSISTENT_SIGS: dict[tuple[int, bool], KernelSig] = {
    (1, False): GEMM_DECODE_TMA_PERSISTENT, (1, True): GEMM_DECODE_TMA_F32OUT_PERSISTENT,
    (2, False): GEMM_DECODE_TMA_PERSISTENT_SPLIT2,
    (2, True): GEMM_DECODE_TMA_F32OUT_PERSISTENT_SPLIT2,
}
_TMA_PERSISTENT_SWIGLU_SIGS: dict[int, KernelSig] = {
    1: GEMM_DECODE_TMA_SWIGLU_PERSISTENT, 2: GEMM_DECODE_TMA_SWIGLU_PERSISTENT_SPLIT2,
}


_TMA_STREAMK_SIGS: dict[bool, KernelSig] = {
    False: GEMM_DECODE_TMA_STREAMK, True: GEMM_DECODE_TMA_F32OUT_STREAMK,
}


def _by_glu(swiglu: dict[int, KernelSig]) -> dict[Glu, dict[int, KernelSig]]:
    """A gated table by activation: the SwiGLU entries and their tanh-GELU twins
    (kernel_abi.geglu_twin: the same ABI, grid and threads)."""
    return {Glu.SWIGLU: swiglu,
            Glu.GEGLU: {split: geglu_twin(sig) for split, sig in swiglu.items()}}


#: the gated entries by activation, then split: cp.async, TMA, TMA persistent
_GLU_SIGS = _by_glu(_SWIGLU_SIGS)
_TMA_GLU_SIGS = _by_glu(_TMA_SWIGLU_SIGS)
_TMA_PERSISTENT_GLU_SIGS = _by_glu(_TMA_PERSISTENT_SWIGLU_SIGS)
_TMA_STREAMK_GLU_SIGS = _by_glu({STREAMK: GEMM_DECODE_TMA_SWIGLU_STREAMK})


def decode_cols(m: int) -> int:
    """The wgmma N an m-row batch runs at: m rounded up to a DECODE_COLS width."""
    for cols in DECODE_COLS:
        if 1 <= m <= cols:
            return cols
    raise ValueError(f"decode_gemm: m={m} must be in 1..{DECODE_MAX_M}")


def decode_groups(m: int, wide: bool | None, tma: bool = False) -> int:
    """Warpgroups per block: two (128 weight rows sharing each x tile) when `wide`
    (KernelRoutes.decode_gemm_wide) and the batch runs at N >= WIDE_MIN_COLS (any N on the
    TMA kernel, whose x copy is one instruction), else one. `wide` None: the kernel's default,
    two on the TMA kernel from N = TMA_WIDE_MIN_COLS (x's L2 re-reads 1 + N / 128 times the
    weight bytes instead of 1 + N / 64, and one 8-stage ring of 16 KB weight tiles an SM
    instead of two 6-stage rings of 8 KB at N = 64), one on the cp.async kernel."""
    if wide is None:
        wide = tma and decode_cols(m) >= TMA_WIDE_MIN_COLS
    return 2 if wide and (tma or decode_cols(m) >= WIDE_MIN_COLS) else 1


def stage_bytes(cols: int, groups: int = 1) -> int:
    """One ring stage: a [64 groups][64] weight tile and a [cols][64] x tile, bf16."""
    return (DECODE_ROWS * groups + cols) * 64 * 2


def blocks_per_sm(cols: int, groups: int = 1) -> int:
    """Blocks whose rings fit on one SM together: two one-warpgroup blocks up to N = 128,
    else one (200-210 registers a thread also keep a two-warpgroup block alone on its SM)."""
    return 2 if cols <= 128 and groups == 1 else 1


def ring_stages(cols: int, groups: int = 1, max_stages: int = DECODE_MAX_STAGES) -> int:
    """Stages of the ring (the cp.async kernel's; TMA_MAX_STAGES: the TMA kernel's)."""
    budget = (DECODE_PAIR_BUDGET if blocks_per_sm(cols, groups) == 2
              else DECODE_SOLO_BUDGET)
    return min(max_stages, budget // stage_bytes(cols, groups))


def smem_bytes(cols: int, groups: int = 1, max_stages: int = DECODE_MAX_STAGES) -> int:
    """Dynamic shared memory of a launch at wgmma width `cols` (the ring + 1 KiB to align
    its base to the 128-byte swizzle's 1024-byte atom)."""
    return ring_stages(cols, groups, max_stages) * stage_bytes(cols, groups) + 1024


#: the most dynamic shared memory any launch needs: what the kernels opt in to (<= 227 KiB)
DECODE_MAX_SHARED = max(smem_bytes(cols, groups) for cols in DECODE_COLS
                        for groups in DECODE_GROUPS)
TMA_MAX_SHARED = max(smem_bytes(cols, groups, TMA_MAX_STAGES) for cols in DECODE_COLS
                     for groups in DECODE_GROUPS)

#: a block's share of shared memory, static included (gemm_decode_tma.cu block_shared): half
#: an SM's 228 KiB less the 1 KiB the driver reserves a block for two blocks an SM, else 227 KiB
PAIR_BLOCK_SHARED = 113 * 1024
SOLO_BLOCK_SHARED = 227 * 1024
#: the TMA kernel's static shared memory: its full and empty mbarriers (kBarrierBytes)
TMA_BARRIER_BYTES = 2 * TMA_MAX_STAGES * 8


def partial_bytes(cols: int, groups: int) -> int:
    """The epilogue's f32 partial tile: [cols][64 groups + 4] (gemm_decode_tile.cuh
    partial_pitch)."""
    return cols * (DECODE_ROWS * groups + 4) * 4


def persistent_part_offset(cols: int, groups: int) -> int:
    """Where the persistent kernel's partial tile starts, in bytes past its ring's base: right
    past the ring where the block's share holds both, else as high as the share allows,
    over the ring's top slots (gemm_decode_tma.cu persistent_part_offset)."""
    ring = ring_stages(cols, groups, TMA_MAX_STAGES) * stage_bytes(cols, groups)
    share = PAIR_BLOCK_SHARED if blocks_per_sm(cols, groups) == 2 else SOLO_BLOCK_SHARED
    top = (share - TMA_BARRIER_BYTES - 1024 - partial_bytes(cols, groups)) // 16 * 16
    return min(top, ring)


def persistent_smem_bytes(cols: int, groups: int) -> int:
    """Dynamic shared memory of a persistent launch: the ring and the partial tile past or
    over it, + 1 KiB to align the ring's base (gemm_decode_tma.cu persistent_smem_bytes); the
    blocks an SM stay the one-tile form's."""
    ring = ring_stages(cols, groups, TMA_MAX_STAGES) * stage_bytes(cols, groups)
    return max(ring, persistent_part_offset(cols, groups) + partial_bytes(cols, groups)) + 1024


TMA_PERSISTENT_MAX_SHARED = max(persistent_smem_bytes(cols, groups) for cols in DECODE_COLS
                                for groups in DECODE_GROUPS)


def streamk_stages(cols: int, groups: int) -> int:
    """A stream-K block's ring: the TMA ring's stages, or fewer so that the partial tile fits
    past them in the block's share of shared memory (gemm_decode_tma.cu streamk_stages)."""
    share = PAIR_BLOCK_SHARED if blocks_per_sm(cols, groups) == 2 else SOLO_BLOCK_SHARED
    room = (share - TMA_BARRIER_BYTES - 1024 - partial_bytes(cols, groups)) \
        // stage_bytes(cols, groups)
    return min(ring_stages(cols, groups, TMA_MAX_STAGES), room)


def streamk_smem_bytes(cols: int, groups: int) -> int:
    """Dynamic shared memory of a stream-K launch: its ring, the partial tile past it, and
    1 KiB to align the ring's base (gemm_decode_tma.cu streamk_smem_bytes)."""
    return (streamk_stages(cols, groups) * stage_bytes(cols, groups)
            + partial_bytes(cols, groups) + 1024)


TMA_STREAMK_MAX_SHARED = max(streamk_smem_bytes(cols, groups) for cols in DECODE_COLS
                             if cols <= STREAMK_MAX_COLS for groups in DECODE_GROUPS)


def streamk_flags_offset(sm_count: int) -> int:
    """Where the stream-K workspace's flags start: past the partials of the most blocks a
    launch has (two one-warpgroup blocks an SM, or one of two warpgroups: 128 accumulator
    threads a warpgroup, STREAMK_MAX_COLS / 2 f32 accumulators a thread, either way)."""
    return sm_count * 2 * DECODE_THREADS * (STREAMK_MAX_COLS // 2) * 4


def streamk_workspace_bytes(sm_count: int) -> int:
    """The stream-K workspace of a device: the partials ([blocks][cols / 2][threads] f32),
    then a u32 flag a block (0 between launches)."""
    return streamk_flags_offset(sm_count) + 2 * sm_count * 4


def streamk_units(n: int, k: int, groups: int) -> int:
    """The (tile, k-tile) pairs a stream-K launch shares out."""
    return -(-n // (DECODE_ROWS * groups)) * -(-k // 64)


def wave_fill(blocks: int, slots: int) -> float:
    """How full a grid keeps the device's `slots` resident blocks over its waves: blocks /
    (slots x waves). A memory-bound grid's last partial wave streams with the few blocks it
    has, so a low fill is bandwidth lost."""
    return blocks / (slots * -(-blocks // slots))


#: a split beyond 1 must fill the waves by this much more to pay for its partial sums
SPLIT_FILL_GAIN = 0.05


def decode_split(m: int, n: int, k: int, sm_count: int = H200_FACTS.sm_count,
                 forced: int | None = None, groups: int = 1,
                 resident: Mapping[int, int] | None = None,
                 splits: tuple[int, ...] = DECODE_GEMM_SPLITS) -> int:
    """Blocks per cluster that split K, one of `splits` (the kernel's candidates,
    `rule_splits`; each beyond the smallest -- 1, except for gemm_decode_fp8, whose blocks
    hold their whole k range of x -- keeps at least MIN_SPLIT_K_TILES k-tiles a block). Under a
    wave of tiles, ceil(n / (64 groups)), the largest split whose grid still runs in one wave
    (sm_count x blocks_per_sm): a narrow projection (Qwen3-8B o_proj, n = 4096: 64
    one-warpgroup tiles) gets 4 x 64 = 256 blocks on an H200's 264 modelled slots. From a
    wave up, the split whose waves are fullest (`wave_fill`, by SPLIT_FILL_GAIN or more over
    a smaller one): gate_up's 384 tiles are 1.45 waves of 264 (the second one 45% full),
    split 2 makes 768 blocks, 2.9 waves (97%); the LM head's
    2,374 tiles fill 9 waves alone. (Measured PDL on, H200, b64: the unsplit gate_up at
    65 us, 3.1 TB/s, the LM head's nine waves at 3.84 TB/s.) `forced`
    (KernelRoutes.decode_gemm_split, ATLAS_DECODE_GEMM_SPLIT) overrides the rule for A/B runs.
    `resident`: the blocks the device holds at once for each split, as the driver computes
    them (`resident_blocks`; a cluster's blocks must share a GPC), replacing the modelled
    slots split by split; a split the device cannot hold a cluster of is never chosen.
    With every cluster size a candidate (the TMA kernel, ATLAS_DECODE_GEMM_ANY_SPLIT=1) the
    same rule reaches grids between the powers of two: Qwen3-8B o_proj / down at m = 64 (32
    two-warpgroup tiles, one block an SM; 124 blocks resident in clusters of 4) get split 3,
    96 blocks, where the powers of two give split 2, 64 blocks on 132 SMs.
    """
    if forced is not None:
        if forced not in DECODE_GEMM_TMA_SPLITS:
            raise ValueError(f"decode_gemm: split {forced} is not one of "
                             f"{DECODE_GEMM_TMA_SPLITS}")
        return forced
    tiles = -(-n // (DECODE_ROWS * groups))
    k_tiles = -(-k // 64)
    modelled = sm_count * blocks_per_sm(decode_cols(m), groups)
    slots = {s: modelled if resident is None else resident.get(s, modelled) for s in splits}
    base = min(splits)  # 1, except where a kernel cannot run unsplit (gemm_decode_fp8's x)
    fitting = [s for s in splits if s == base
               or (k_tiles >= MIN_SPLIT_K_TILES * s and slots[s] >= s)]
    if tiles * base < slots[base]:
        return max(s for s in fitting if tiles * s <= slots[s])
    best = base
    for split in fitting:
        if (wave_fill(tiles * split, slots[split])
                >= wave_fill(tiles * best, slots[best]) + SPLIT_FILL_GAIN):
            best = split
    return best


def rule_splits(kc: KernelCache, tma: bool) -> tuple[int, ...]:
    """The splits decode_split chooses among: every cluster size 1..8 on the TMA kernel where
    the routes ask (KernelRoutes.decode_gemm_any_split, ATLAS_DECODE_GEMM_ANY_SPLIT=1), else
    the powers of two both kernels have."""
    if tma and kc.routes.decode_gemm_any_split:
        return DECODE_GEMM_TMA_SPLITS
    return DECODE_GEMM_SPLITS


def resident_blocks(kc: KernelCache, m: int, out_f32: bool, glu: Glu, tma: bool,
                    groups: int) -> dict[int, int] | None:
    """The blocks of each candidate split's entry point (`rule_splits`) the device holds at
    once at this launch shape (KernelCache.resident_blocks: the driver's cluster occupancy,
    asked once per shape), for decode_split; None where the backend has no such model (no
    device) or the routes do not ask (KernelRoutes.decode_gemm_occupancy;
    ATLAS_DECODE_GEMM_OCCUPANCY=0 turns it off)."""
    if not kc.routes.decode_gemm_occupancy:
        return None
    cols = decode_cols(m)
    stages = TMA_MAX_STAGES if tma else DECODE_MAX_STAGES
    threads = DECODE_THREADS * groups + (TMA_PRODUCER_THREADS if tma else 0)
    out = {}
    for split in rule_splits(kc, tma):
        launch = kc.get_with_shared(entry_point(split, out_f32, glu, tma),
                                    TMA_MAX_SHARED if tma else DECODE_MAX_SHARED)
        blocks = kc.resident_blocks(launch.handle, threads, smem_bytes(cols, groups, stages),
                                    split)
        if blocks is None:
            return None
        out[split] = blocks
    return out


def launch_split(kc: KernelCache, m: int, n: int, k: int, out_f32: bool, glu: Glu,
                 tma: bool, groups: int) -> int:
    """The split a decode_gemm launch runs when the caller forces none: the routes' forced
    one (ATLAS_DECODE_GEMM_SPLIT), else decode_split over `rule_splits` with the device's
    resident blocks (not asked for when the routes force one)."""
    forced = kc.routes.decode_gemm_split
    resident = None if forced is not None else resident_blocks(kc, m, out_f32, glu, tma,
                                                               groups)
    return decode_split(m, n, k, kc.facts.sm_count, forced, groups, resident,
                        rule_splits(kc, tma))


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include gemm_decode_sm90 (sm_90a sets do; gb10
    sets, and backends that load no compiled modules, do not)."""
    return GEMM_DECODE_SM90.module in kc.backend.module_names


def uses_tma(kc: KernelCache, tma: bool | None = None) -> bool:
    """Whether decode_gemm runs the TMA kernel: `tma` when given (a check case or benchmark
    forcing one kernel), else the routes' decode_gemm_tma where the loaded set has it."""
    if tma is not None:
        return tma
    return kc.routes.decode_gemm_tma and GEMM_DECODE_TMA.module in kc.backend.module_names


def entry_point(split: int, out_f32: bool = False, glu: Glu = Glu.NONE,
                tma: bool = False, persistent: bool = False) -> KernelSig:
    """The decode GEMM entry point of a launch: its cluster split, f32 logits or the gated
    epilogue `glu`, on the TMA or the cp.async kernel; `persistent`: the TMA kernel's tile
    loop (a split of PERSISTENT_SPLITS); split STREAMK: the TMA kernel's stream-K entry."""
    if split == STREAMK:
        assert tma and not persistent, "stream-K is a TMA entry of its own"
        return _TMA_STREAMK_GLU_SIGS[Glu(glu)][STREAMK] if glu else _TMA_STREAMK_SIGS[out_f32]
    if persistent:
        assert tma, "only the TMA kernel has persistent entries"
        if glu:
            return _TMA_PERSISTENT_GLU_SIGS[Glu(glu)][split]
        return _TMA_PERSISTENT_SIGS[split, out_f32]
    if glu:
        return (_TMA_GLU_SIGS if tma else _GLU_SIGS)[Glu(glu)][split]
    return (_TMA_SIGS if tma else _SIGS)[split, out_f32]


def decode_gemm(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr,
                m: int, n: int, k: int, out_f32: bool = False, split: int | None = None,
                wide: bool | None = None, glu: Glu = Glu.NONE,
                tma: bool | None = None) -> None:
    """y = x @ w.T for 1 <= m <= 256 rows (bf16 in; bf16, or for logits the bf16-rounded
    value as f32, out); every weight byte is read once. With `glu` (Glu.SWIGLU, Glu.GEGLU), w
    is a fused [gate | up] weight [n, k] (n even) and y the activation [m, n / 2]: the
    unfused product, then silu_mul (gelu_tanh_mul), bit for bit (the same split's sums), in
    one launch.

    Preconditions: n >= 1, k a positive multiple of 8, x and w 16-byte aligned, y aligned to its
    element; the module must be loaded (`available`). `split` forces the cluster split, `wide`
    two-warpgroup blocks, `tma` the kernel (None: `uses_tma`). With neither split nor wide
    forced, a cache that `tunes` gives both (`tuned_pick`); otherwise split None is
    `launch_split` (the routes' override, else the rule) and wide None the routes'
    decode_gemm_wide, whose None is the kernel's default.
    Launched with ceil(n / (64 G)) * split blocks (G = `decode_groups`; a gated block's 64 G
    weight rows are 32 G gate/up pairs, so the grid is the same) of 128 G threads (+
    TMA_PRODUCER_THREADS on the TMA kernel) and `smem_bytes(decode_cols(m), G, stages)` of
    dynamic shared memory (each entry point is opted in to its kernel's most once); a TMA grid
    of several waves under the persistent route runs `persistent_launch_grid`'s instead. The
    cp.async kernel's blocks keep the routes' decode_gemm_l2_tiles k-tiles of their weight rows
    prefetched into L2 ahead of the ring, from before the PDL wait (ATLAS_DECODE_GEMM_L2_TILES);
    the TMA kernel's ring holds its weight rows' next tiles in flight itself.
    """
    tma = uses_tma(kc, tma)
    decode_cols(m)  # m in range
    if n < 1:
        raise ValueError(f"decode_gemm: n={n} must be positive")
    glu = Glu(glu)
    if glu and (n % 2 or out_f32):
        raise ValueError(f"decode_gemm: the {glu.name} epilogue needs an even n ([gate | up] "
                         f"halves) and bf16 output, got n={n} out_f32={out_f32}")
    require_multiple("decode_gemm", "k", k, 8)
    require_aligned("decode_gemm", "x", x, 16)
    require_aligned("decode_gemm", "w", w, 16)
    require_aligned("decode_gemm", "y", y, 4 if out_f32 else 2)
    if split is None and wide is None and tunes(kc):
        split, groups = tuned_pick(kc, stream, x, w, y, m, n, k, out_f32, glu, tma)
    else:
        groups = decode_groups(m, kc.routes.decode_gemm_wide if wide is None else wide, tma)
        if split is None:
            split = launch_split(kc, m, n, k, out_f32, glu, tma, groups)
    compiled = (DECODE_GEMM_TMA_SPLITS + (STREAMK,)) if tma else DECODE_GEMM_SPLITS
    if split not in compiled:
        raise ValueError(f"decode_gemm: split {split} is not one of {compiled} "
                         f"({'gemm_decode_tma' if tma else 'gemm_decode_sm90'})")
    launch_pick(kc, stream, x, w, y, m, n, k, out_f32, glu, tma, (split, groups))


def launch_pick(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr,
                m: int, n: int, k: int, out_f32: bool, glu: Glu, tma: bool,
                pick: Pick, clusters: int | None = None) -> None:
    """One decode GEMM launch at `pick` = (split, warpgroups), of a product decode_gemm has
    checked (the tuner's candidates; tools that time a pick). `clusters` (TMA, a split of
    PERSISTENT_SPLITS): the persistent form at that many clusters, whatever the routes say
    (check cases that give each cluster several tiles, or fewer than one); None: the
    persistent form where `persistent_launch_grid` gives one. For STREAMK, `clusters` is the
    block count (None: `streamk_blocks`)."""
    split, groups = pick
    cols = decode_cols(m)
    if split == STREAMK:
        launch_streamk(kc, stream, x, w, y, m, n, k, out_f32, glu, groups, clusters)
        return
    grid = -(-n // (DECODE_ROWS * groups)) * split
    if tma:
        rows = DECODE_ROWS * groups  # a gated stage's weight tile is two half boxes
        wmap = kc.tensor_map(w, n, k, rows // 2 if glu else rows)
        xmap = kc.tensor_map(x, m, k, cols)
        threads = DECODE_THREADS * groups + TMA_PRODUCER_THREADS
        looped = (clusters * split if clusters is not None
                  else persistent_launch_grid(kc, m, n, out_f32, glu, pick))
        if looped is not None:
            launch = kc.get_with_shared(entry_point(split, out_f32, glu, tma, True),
                                        TMA_PERSISTENT_MAX_SHARED)
            launch(stream, looped, threads, persistent_smem_bytes(cols, groups), x, w, y, m,
                   n, k, wmap, xmap)
            return
        launch = kc.get_with_shared(entry_point(split, out_f32, glu, tma), TMA_MAX_SHARED)
        launch(stream, grid, threads, smem_bytes(cols, groups, TMA_MAX_STAGES), x, w, y, m, n,
               k, wmap, xmap)
        return
    launch = kc.get_with_shared(entry_point(split, out_f32, glu), DECODE_MAX_SHARED)
    launch(stream, grid, DECODE_THREADS * groups, smem_bytes(cols, groups), x, w, y, m, n, k,
           kc.routes.decode_gemm_l2_tiles)


def streamk_blocks(kc: KernelCache, m: int, n: int, k: int, out_f32: bool, glu: Glu,
                   groups: int) -> int:
    """The blocks of a stream-K launch: the device's resident blocks of the entry at this
    shape (KernelCache.resident_blocks; else the modelled sm_count x blocks_per_sm), at most
    one a unit."""
    cols = decode_cols(m)
    launch = kc.get_with_shared(entry_point(STREAMK, out_f32, glu, True), TMA_STREAMK_MAX_SHARED)
    resident = kc.resident_blocks(launch.handle, DECODE_THREADS * groups + TMA_PRODUCER_THREADS,
                                  streamk_smem_bytes(cols, groups), 1)
    if resident is None:
        resident = kc.facts.sm_count * blocks_per_sm(cols, groups)
    return max(1, min(resident, 2 * kc.facts.sm_count, streamk_units(n, k, groups)))


def streamk_workspace(kc: KernelCache, stream: Stream) -> DevicePtr | None:
    """The device's stream-K workspace (KernelCache.workspace), None where it does not exist
    yet and `stream` is capturing or the device cannot hold it (then no launch is stream-K)."""
    try:
        return kc.workspace("decode_gemm_streamk", streamk_workspace_bytes(kc.facts.sm_count),
                            stream)
    except GpuError:
        return None


def launch_streamk(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr,
                   m: int, n: int, k: int, out_f32: bool, glu: Glu, groups: int,
                   blocks: int | None = None) -> None:
    """One stream-K launch (module docstring) over `blocks` blocks (None: `streamk_blocks`;
    check cases give fewer, so that tiles spread over several blocks at small shapes)."""
    cols = decode_cols(m)
    if cols > STREAMK_MAX_COLS:
        raise ValueError(f"decode_gemm: stream-K runs up to {STREAMK_MAX_COLS} rows, got m={m}")
    work = streamk_workspace(kc, stream)
    if work is None:
        raise GpuError("decode_gemm: the stream-K workspace cannot be made inside a capture")
    rows = DECODE_ROWS * groups
    wmap = kc.tensor_map(w, n, k, rows // 2 if glu else rows)
    xmap = kc.tensor_map(x, m, k, cols)
    if blocks is None:
        blocks = streamk_blocks(kc, m, n, k, out_f32, glu, groups)
    launch = kc.get_with_shared(entry_point(STREAMK, out_f32, glu, True), TMA_STREAMK_MAX_SHARED)
    launch(stream, blocks, DECODE_THREADS * groups + TMA_PRODUCER_THREADS,
           streamk_smem_bytes(cols, groups), x, w, y, m, n, k, wmap, xmap, work,
           work + streamk_flags_offset(kc.facts.sm_count))


def persistent_grid(tiles: int, split: int, resident: int) -> int | None:
    """The grid of a persistent launch of `tiles` output tiles at `split`, with `resident`
    blocks of the persistent entry on the device at once: every cluster the device holds
    (resident // split, each looping over tiles c, c + C, ...), where the one-tile grid
    (tiles x split blocks) would run more than one wave; None where it runs in one (each
    cluster would get one tile: nothing to overlap), the split has no persistent entry
    (PERSISTENT_SPLITS) or the device holds no cluster of it. A cluster's tiles are
    ceil(tiles / C) or fewer, so the fill over clusters is the one-tile grid's over waves
    (`wave_fill`): the split rule's choice stands, and only the refill between waves goes."""
    clusters = resident // split
    if split not in PERSISTENT_SPLITS or clusters < 1 or tiles * split <= resident:
        return None
    return clusters * split


def persistent_launch_grid(kc: KernelCache, m: int, n: int, out_f32: bool, glu: Glu,
                           pick: Pick) -> int | None:
    """The grid of the persistent form of a TMA launch at `pick` (`persistent_grid` over
    the device's resident blocks of the persistent entry, KernelCache.resident_blocks, else
    the modelled sm_count x blocks_per_sm), or None for the one-tile form: always None unless
    the routes ask (KernelRoutes.decode_gemm_persistent, on unless
    ATLAS_DECODE_GEMM_PERSISTENT=0)."""
    split, groups = pick
    if not kc.routes.decode_gemm_persistent or split not in PERSISTENT_SPLITS:
        return None
    cols = decode_cols(m)
    launch = kc.get_with_shared(entry_point(split, out_f32, glu, True, True),
                                TMA_PERSISTENT_MAX_SHARED)
    resident = kc.resident_blocks(launch.handle, DECODE_THREADS * groups + TMA_PRODUCER_THREADS,
                                  persistent_smem_bytes(cols, groups), split)
    if resident is None:
        resident = kc.facts.sm_count * blocks_per_sm(cols, groups)
    return persistent_grid(-(-n // (DECODE_ROWS * groups)), split, resident)


def tunes(kc: KernelCache) -> bool:
    """Whether decode_gemm takes its split and block shape from the tuning table: the cache
    has one (a device, ATLAS_DECODE_GEMM_TUNE not 0) and the routes force neither
    (ATLAS_DECODE_GEMM_SPLIT, ATLAS_DECODE_GEMM_WIDE keep their A/B meaning)."""
    return (kc.decode_tune is not None and kc.routes.decode_gemm_split is None
            and kc.routes.decode_gemm_wide is None)


def valid_picks(m: int, k: int, tma: bool, streamk: bool = False) -> list[Pick]:
    """Every (split, warpgroups) a product may launch with, by the kernel alone: the compiled
    splits that keep MIN_SPLIT_K_TILES k-tiles a block, times the block shapes decode_groups
    allows at this width (the cp.async kernel has no two-warpgroup blocks under N = 32); with
    `streamk` (TMA, N <= STREAMK_MAX_COLS) also STREAMK at each block shape."""
    k_tiles = -(-k // 64)
    splits = [s for s in (DECODE_GEMM_TMA_SPLITS if tma else DECODE_GEMM_SPLITS)
              if s == 1 or k_tiles >= MIN_SPLIT_K_TILES * s]
    if streamk and tma and decode_cols(m) <= STREAMK_MAX_COLS:
        splits.append(STREAMK)
    groups = sorted({decode_groups(m, False, tma), decode_groups(m, True, tma)})
    return [(s, g) for s in splits for g in groups]


def tunes_streamk(kc: KernelCache, tma: bool) -> bool:
    """Whether the tuner times stream-K picks: the TMA kernel's launches under
    KernelRoutes.decode_gemm_streamk."""
    return tma and kc.routes.decode_gemm_streamk


def tune_candidates(kc: KernelCache, m: int, k: int, out_f32: bool, glu: Glu,
                    tma: bool, streamk: bool = False) -> Iterator[Pick]:
    """The `valid_picks` the device can run (`streamk`: with the stream-K picks, whose
    workspace exists): a split whose cluster the device cannot hold at this shape
    (KernelCache.resident_blocks below the split) would fail to launch. Lazy: a
    device error asking the driver surfaces inside the tuner's timing, which then keeps the
    model's pick (DecodeGemmTuner.tune)."""
    cols = decode_cols(m)
    stages = TMA_MAX_STAGES if tma else DECODE_MAX_STAGES
    for split, groups in valid_picks(m, k, tma, streamk):
        if split == STREAMK:  # no cluster: it launches wherever one block fits
            yield split, groups
            continue
        launch = kc.get_with_shared(entry_point(split, out_f32, glu, tma),
                                    TMA_MAX_SHARED if tma else DECODE_MAX_SHARED)
        threads = DECODE_THREADS * groups + (TMA_PRODUCER_THREADS if tma else 0)
        blocks = kc.resident_blocks(launch.handle, threads, smem_bytes(cols, groups, stages),
                                    split)
        if blocks is None or blocks >= split:
            yield split, groups


def tune_key(kc: KernelCache, m: int, n: int, k: int, out_f32: bool, glu: Glu,
             tma: bool) -> TuneKey:
    """The tuning table's key of a launch under the cache's routes (TuneKey.swiglu holds the
    Glu: a SwiGLU key's text as before (1), GeGLU's its own (2))."""
    return TuneKey(decode_cols(m), n, k, out_f32, glu, tma,
                   tma and kc.routes.decode_gemm_persistent, tunes_streamk(kc, tma))


def tuned_pick(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr,
               m: int, n: int, k: int, out_f32: bool, glu: Glu, tma: bool) -> Pick:
    """The (split, warpgroups) of a launch that `tunes`: the table's pick for its TuneKey;
    on a miss, the model's pick (`launch_split` at decode_groups' default) while `stream` is
    being captured, else every `tune_candidates` pick timed now with the call's own x, w and
    y (each launch overwrites y; the caller's launch after them writes it last) and the
    fastest kept (decode_gemm_tune.choose)."""
    tuner = kc.decode_tune
    assert tuner is not None
    module = (GEMM_DECODE_TMA if tma else GEMM_DECODE_SM90).module
    streamk = tunes_streamk(kc, tma)
    key = tune_key(kc, m, n, k, out_f32, glu, tma)
    groups = decode_groups(m, None, tma)
    model = (launch_split(kc, m, n, k, out_f32, glu, tma, groups), groups)
    # the stream-K workspace is made at the first launch outside a capture (warm-up runs every
    # decode shape eagerly before the graphs are captured), so a table pick of stream-K met
    # first inside a capture, which cannot allocate, is rare; it then runs the model's pick
    workspace = streamk_workspace(kc, stream) if streamk else None
    pick = tuner.lookup(module, key)
    if pick is not None and pick in valid_picks(m, k, tma, streamk):
        return model if pick[0] == STREAMK and workspace is None else pick
    if not tuner.can_tune(module, key) or kc.backend.is_capturing(stream):
        return model

    pool, weights = cold_weights(kc, w, n * k * 2)
    turn = itertools.count()

    def launch(candidate: Pick, on: Stream) -> None:
        launch_pick(kc, on, x, weights[next(turn) % len(weights)], y, m, n, k, out_f32, glu,
                    tma, candidate)

    try:
        return tuner.tune(module, key,
                          tune_candidates(kc, m, k, out_f32, glu, tma, workspace is not None),
                          model,
                          stream, launch, iters=max(LAUNCHES_PER_REP, len(weights)))
    finally:
        if pool:
            kc.backend.free(pool)


def cold_weights(kc: KernelCache, w: DevicePtr, wbytes: int) -> tuple[DevicePtr, list[DevicePtr]]:
    """The weights the tuner's timed launches cycle through: w and enough scratch copies of
    its size (`rotation_copies`, their bytes a finite bf16 pattern: timing needs no values)
    that ROTATE_BYTES pass between two reads of one, so each launch reads its weight from
    DRAM as a decode step does (timed back to back on w alone, a weight under the L2 size ran
    from L2 and won picks it lost cold: gpu43, Llama-3.2-3B o_proj at 128 rows 0.90x);
    (0, [w]) when one copy is enough or the scratch does not fit (then timed warm)."""
    copies = rotation_copies(wbytes, ROTATE_BYTES, MAX_COPIES)
    if copies == 1:
        return 0, [w]
    try:
        pool = kc.backend.alloc((copies - 1) * wbytes)
    except GpuError:
        return 0, [w]
    kc.backend.memset(pool, 0x3C, (copies - 1) * wbytes)  # bf16 0x3C3C: 0.0115
    return pool, [w] + [pool + i * wbytes for i in range(copies - 1)]
