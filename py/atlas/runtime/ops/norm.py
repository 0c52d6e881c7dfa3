"""Launch builders for RMSNorm and the fused residual add + RMSNorm (rmsnorm.cu).

One block per row; each thread holds up to RMSNORM_MAX_VECS 16-byte vectors of the row in
registers, so dim is limited to 8 * RMSNORM_MAX_VECS * 1024 elements.
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import ADD_RMSNORM, RMSNORM
from . import KernelCache
from ._preconditions import require_aligned, require_multiple, warp_threads

#: rmsnorm.cu kMaxVecs: 16-byte vectors per thread
RMSNORM_MAX_VECS = 8
RMSNORM_MAX_THREADS = 1024
RMSNORM_MAX_DIM = 8 * RMSNORM_MAX_VECS * RMSNORM_MAX_THREADS


def rmsnorm_threads(dim: int) -> int:
    """One thread per 16-byte vector (fewest registers per thread), up to 1024."""
    return warp_threads(dim // 8, RMSNORM_MAX_THREADS)


def _check(kernel: str, dim: int, ptrs: dict[str, DevicePtr]) -> None:
    require_multiple(kernel, "dim", dim, 8)
    if dim > RMSNORM_MAX_DIM:
        raise ValueError(f"{kernel}: dim={dim} exceeds {RMSNORM_MAX_DIM}")
    for name, ptr in ptrs.items():
        require_aligned(kernel, name, ptr, 16)


def rmsnorm(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, out: DevicePtr,
            rows: int, dim: int, eps: float) -> None:
    """out[rows, dim] = RMSNorm(x) * w, all bf16."""
    _check("rmsnorm", dim, {"x": x, "w": w, "out": out})
    if rows:
        kc.get(RMSNORM)(stream, rows, rmsnorm_threads(dim), 0, x, w, out, rows, dim, eps)


def add_rmsnorm(kc: KernelCache, stream: Stream, residual: DevicePtr, delta: DevicePtr,
                w: DevicePtr, out: DevicePtr, rows: int, dim: int, eps: float) -> None:
    """residual += delta (bf16, in place); out = RMSNorm(residual) * w."""
    _check("add_rmsnorm", dim, {"residual": residual, "delta": delta, "w": w, "out": out})
    if rows:
        kc.get(ADD_RMSNORM)(stream, rows, rmsnorm_threads(dim), 0, residual, delta, w, out,
                            rows, dim, eps)
