"""Launch builder for the batched decode GEMV on tensor cores (kernels/hopper/common/gemv_mma.cu).

y[m, n] = x[m, k] @ w[n, k].T for decode batches too large for the GEMV's per-row registers
(m > 8) and too small for a GEMM tile to be anything but padding: weights stream from HBM
once, 32 weight rows per block as the MMA's M dimension, the batch rows as its N. Only
hopper sets build the module; `available` says whether the loaded kernels have it.
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import GEMV_MMA, GEMV_MMA_F32OUT
from . import KernelCache
from ._preconditions import require_aligned, require_multiple

#: largest batch the kernel takes (eight 8-row MMA B tiles; gemv_mma.cu kMaxBTiles * 8)
BATCHED_MAX_M = 64
#: weight rows per block (gemv_mma.cu kRowsPerBlock)
BATCHED_ROWS_PER_BLOCK = 32
#: threads per block: eight warps splitting K (gemv_mma.cu kWarps * 32)
BATCHED_THREADS = 256


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include gemv_mma (hopper sets do; gb10 sets,
    and backends that load no compiled modules, do not)."""
    # getattr: GpuBackend.module_names is optional for backends without compiled modules
    return GEMV_MMA.module in getattr(kc.backend, "module_names", ())


def batched_gemv(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr,
                 m: int, n: int, k: int, out_f32: bool = False) -> None:
    """y = x @ w.T for 1 <= m <= 64 rows (bf16 in; bf16, or for logits the bf16-rounded
    value as f32, out); every weight byte is read once.

    Preconditions: n >= 1, k a positive multiple of 8, x and w 16-byte aligned, y aligned
    to its element; the module must be loaded (`available`).
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
    grid = -(-n // BATCHED_ROWS_PER_BLOCK)
    kc.get(sig)(stream, grid, BATCHED_THREADS, 0, x, w, y, m, n, k)
