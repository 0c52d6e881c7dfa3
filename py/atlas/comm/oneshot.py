"""The one-shot all-reduce: every rank reads every peer's copy of the message straight from
its memory (CUDA IPC over NVLink) and sums, in one kernel (runtime/ops/allreduce.py,
kernels/*/common/allreduce.cu). For the small bf16 messages of decode it skips NCCL's
protocol latency; which is faster at which size is measured by `tools/gpu/bench_tp.py
allreduce` (NCCL and this, side by side) before any layer routes to it.

Setup, once per group: each rank allocates and zeroes its workspace, exports it
(cuIpcGetMemHandle), the 64-byte handles are all-gathered over the group's TCP star, each
rank maps its peers' (cuIpcOpenMemHandle, enabling peer access) and uploads the world's
workspace addresses; a barrier makes sure no rank launches before every workspace is zero.
A world of one maps nothing (its only peer is itself), so the kernel runs on one GPU too.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..runtime.gpu import DevicePtr, GpuBackend, Stream
from ..runtime.ops import KernelCache
from ..runtime.ops.allreduce import ERROR_OFFSET, oneshot, workspace_bytes
from .backend import CommError
from .transport import Star

HANDLE_BYTES = 64  # sizeof(CUipcMemHandle)


def _check(result: tuple, what: str) -> object:
    if result[0]:
        raise CommError(f"{what} failed: {result[0]}")
    return result[1] if len(result) > 1 else None


def export_handle(ptr: DevicePtr) -> bytes:
    """The IPC handle of an allocation (its base pointer), as bytes."""
    from cuda.bindings import driver
    handle = _check(driver.cuIpcGetMemHandle(ptr), "cuIpcGetMemHandle")
    return ctypes.string_at(handle.getPtr(), HANDLE_BYTES)  # type: ignore[attr-defined]


def open_handle(raw: bytes) -> DevicePtr:
    """Map a peer's exported allocation into this process (peer access enabled)."""
    from cuda.bindings import driver
    handle = driver.CUipcMemHandle()
    ctypes.memmove(handle.getPtr(), raw, HANDLE_BYTES)
    flags = driver.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
    return int(_check(driver.cuIpcOpenMemHandle(handle, flags), "cuIpcOpenMemHandle"))


def close_handle(ptr: DevicePtr) -> None:
    from cuda.bindings import driver
    _check(driver.cuIpcCloseMemHandle(ptr), "cuIpcCloseMemHandle")


class OneShotAllReduce:
    """In-place bf16 all-reduce of up to `capacity` elements over peer-mapped workspaces."""

    def __init__(self, gpu: GpuBackend, star: Star, capacity: int) -> None:
        self._gpu = gpu
        self.rank, self.world_size = star.rank, star.world_size
        self.capacity = capacity
        nbytes = workspace_bytes(capacity)
        self.workspace = gpu.alloc(nbytes)
        gpu.memset(self.workspace, 0, nbytes)
        gpu.synchronize()
        mine = export_handle(self.workspace) if self.world_size > 1 else b""
        handles = star.exchange(mine, lambda parts: [b"".join(parts)] * len(parts))
        self._mapped: list[DevicePtr] = []
        bases = []
        for r in range(self.world_size):
            if r == self.rank:
                bases.append(self.workspace)
                continue
            ptr = open_handle(handles[r * HANDLE_BYTES:(r + 1) * HANDLE_BYTES])
            self._mapped.append(ptr)
            bases.append(ptr)
        self.peers = gpu.upload(np.array(bases, dtype=np.uint64))
        self._kc = KernelCache(gpu)
        star.exchange(b"", lambda parts: [b""] * len(parts))  # every workspace is zero now

    def all_reduce(self, buf: DevicePtr, count: int, stream: Stream) -> None:
        """`buf` (bf16 [count], count % 8 == 0) becomes the sum over ranks, on `stream`."""
        oneshot(self._kc, stream, self.peers, buf, buf, count, self.capacity,
                self.world_size, self.rank)

    def timed_out(self) -> bool:
        """Whether a call gave up waiting for a peer (its outputs are NaN); synchronizes."""
        self._gpu.synchronize()
        word = self._gpu.download(self.workspace + ERROR_OFFSET, np.uint32, (1,))
        return bool(word[0])

    def close(self) -> None:
        for ptr in self._mapped:
            close_handle(ptr)
        self._mapped = []
        self._gpu.free(self.peers)
        self._gpu.free(self.workspace)
