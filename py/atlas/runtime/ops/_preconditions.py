"""Precondition checks shared by the launch builders: fail in Python with a clear message
instead of faulting (or silently misreading memory) on the device."""

from __future__ import annotations

from ..gpu import DevicePtr


def require_aligned(kernel: str, name: str, ptr: DevicePtr, align: int) -> None:
    if ptr % align:
        raise ValueError(f"{kernel}: {name} pointer {ptr:#x} is not {align}-byte aligned")


def require_multiple(kernel: str, name: str, value: int, multiple: int) -> None:
    if value < multiple or value % multiple:
        raise ValueError(f"{kernel}: {name}={value} must be a positive multiple of {multiple}")


def proj_dim_of(head_dim: int, proj_dim: int | None) -> int:
    """An attention launch's proj_dim, a padded head's length in the projections (None:
    head_dim, no padding; ops/attention.py padded_head_dim), checked: a multiple of 8 (the
    kernels move a head's elements 8 at a time) up to head_dim."""
    if proj_dim is None:
        return head_dim
    if not 0 < proj_dim <= head_dim or proj_dim % 8:
        raise ValueError(f"attention: proj_dim={proj_dim} must be a positive multiple of 8 up "
                         f"to head_dim={head_dim}")
    return proj_dim


def warp_threads(work_items: int, cap: int) -> int:
    """Threads for `work_items` parallel items: rounded up to whole warps, 32..cap."""
    return min(cap, max(32, -(-work_items // 32) * 32))


def row_vector_grid(rows: int, width: int, cap: int) -> tuple[tuple[int, int, int], int]:
    """Grid and threads of an elementwise kernel over [rows, width] bf16 with one 16-byte
    vector a thread: grid (rows, ceil(vectors / threads)), up to `cap` threads a block."""
    vecs = width // 8
    threads = warp_threads(vecs, cap)
    return (rows, -(-vecs // threads), 1), threads
