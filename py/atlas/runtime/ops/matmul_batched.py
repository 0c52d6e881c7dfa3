"""Launch builder for the batched decode GEMV on tensor cores (hopper/common/gemv_mma.cu).

y[m, n] = x[m, k] @ w[n, k].T for decode batches too large for the GEMV's per-row registers
(m > 8) and too small for a GEMM tile to be anything but padding: weights stream from HBM
once, 32 or 64 weight rows per block as the MMA's M dimension, the batch rows as its N, through
a per-warp cp.async ring in dynamic shared memory. Only hopper sets build the module;
`available` says whether the loaded kernels have it.
"""

from __future__ import annotations

from ..gpu import H200_FACTS, DevicePtr, Stream
from ..kernel_abi import GEMV_MMA, GEMV_MMA_F32OUT
from . import KernelCache
from ._preconditions import require_aligned, require_multiple

#: largest batch the kernel takes (eight 8-row MMA B tiles; gemv_mma.cu kMaxBTiles * 8)
BATCHED_MAX_M = 64
#: weight rows per block of the narrow and the wide variant (gemv_mma.cu kNarrowTiles and
#: kWideTiles 16-row A tiles); the kernel tells them apart by the grid
NARROW_ROWS = 32
WIDE_ROWS = 64
#: fewest rows that may take the wide variant: below, x is at most half the weight stream
#: and the narrow blocks measured 64..85% of copy bandwidth (H200, 2026-11-30)
WIDE_MIN_M = 17
#: threads per block: eight warps splitting K (gemv_mma.cu kWarps * 32)
BATCHED_THREADS = 256
#: a warp's ring holds at most this many 32-k steps in flight (gemv_mma.cu kMaxStages)
BATCHED_MAX_STAGES = 8
#: the rings of a block use at most this many bytes of shared memory (gemv_mma.cu kRingBudget)
BATCHED_RING_BUDGET = 192 * 1024


def rows_per_block(m: int, n: int, override: bool | None = None,
                   sm_count: int = H200_FACTS.sm_count) -> int:
    """NARROW_ROWS or WIDE_ROWS for an m x n product, whichever streams fewer bytes through
    the busiest SM. A block streams its weight rows plus all m (padded to 8) activation rows
    over its k-range, one block per SM, so the time goes as waves x (rows + padded m): wide
    blocks halve the x share but also the grid, which on narrow projections (down_proj,
    n = 4096: 128 -> 64 blocks) leaves SMs idle; a wave is `sm_count` blocks (the device's).
    Ties keep the narrow block; wide needs n > WIDE_ROWS, so that the grid says which variant
    runs (gemv_mma.cu dispatch).
    `override` True / False forces the wide / narrow blocks (where n allows) for A/B runs
    (KernelRoutes.gemv_mma_wide, ATLAS_GEMV_MMA_WIDE)."""
    if n <= WIDE_ROWS or override is False:
        return NARROW_ROWS
    if override:
        return WIDE_ROWS
    if m < WIDE_MIN_M:
        return NARROW_ROWS
    padded = 8 * -(-m // 8)

    def cost(rows: int) -> int:
        waves = -(-(-(-n // rows)) // sm_count)
        return waves * (rows + padded)

    return WIDE_ROWS if cost(WIDE_ROWS) < cost(NARROW_ROWS) else NARROW_ROWS


def ring_bytes(m: int, rows: int = NARROW_ROWS) -> int:
    """Dynamic shared memory of a launch for m rows and `rows` weight rows per block
    (gemv_mma.cu ring_bytes): each warp's ring stage holds, per lane, two 16-byte weight
    chunks per 16-row A tile and one x chunk per 8-row B tile."""
    warps = BATCHED_THREADS // 32
    stage = (rows // 8 + -(-m // 8)) * 32 * 16
    stages = min(BATCHED_MAX_STAGES, BATCHED_RING_BUDGET // (warps * stage))
    return warps * stages * stage


#: the most dynamic shared memory any launch needs: what the kernels opt in to (<= 227 KiB)
BATCHED_MAX_SHARED = max(ring_bytes(m, rows) for m in range(1, BATCHED_MAX_M + 1)
                         for rows in (NARROW_ROWS, WIDE_ROWS))


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include gemv_mma (hopper sets do; gb10 sets,
    and backends that load no compiled modules, do not)."""
    return GEMV_MMA.module in kc.backend.module_names


def batched_gemv(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr,
                 m: int, n: int, k: int, out_f32: bool = False) -> None:
    """y = x @ w.T for 1 <= m <= 64 rows (bf16 in; bf16, or for logits the bf16-rounded
    value as f32, out); every weight byte is read once.

    Preconditions: n >= 1, k a positive multiple of 8, x and w 16-byte aligned, y aligned
    to its element; the module must be loaded (`available`). Launched with ceil(n / rows)
    blocks of `rows_per_block(m, n)` weight rows and `ring_bytes(m, rows)` of dynamic shared
    memory (the kernel is opted in to BATCHED_MAX_SHARED once).
    """
    if not 1 <= m <= BATCHED_MAX_M:
        raise ValueError(f"batched_gemv: m={m} must be in 1..{BATCHED_MAX_M}")
    if n < 1:
        raise ValueError(f"batched_gemv: n={n} must be positive")
    require_multiple("batched_gemv", "k", k, 8)
    require_aligned("batched_gemv", "x", x, 16)
    require_aligned("batched_gemv", "w", w, 16)
    require_aligned("batched_gemv", "y", y, 4 if out_f32 else 2)
    sig = GEMV_MMA_F32OUT if out_f32 else GEMV_MMA
    rows = rows_per_block(m, n, kc.routes.gemv_mma_wide, kc.facts.sm_count)
    # opt in once to the largest ring, whatever m the first launch has
    launch = kc.get_with_shared(sig, BATCHED_MAX_SHARED)
    launch(stream, -(-n // rows), BATCHED_THREADS, ring_bytes(m, rows), x, w, y, m, n, k)
