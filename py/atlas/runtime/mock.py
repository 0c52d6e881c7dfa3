"""MockGpuBackend: records what business logic asks of a GPU, and executes nothing.

Tests of launch order, argument plumbing and allocation hygiene use it: every launch is
kept as a `LaunchRecord` whose arguments are named after the kernel ABI, memory is a bump
allocator of fake pointers whose ranges are still checked (a copy into freed or foreign
memory raises), and counters say how many copies and synchronizations a step issued.

Device memory has no contents: a device-to-host copy fills the host buffer with zeros, so
code that reads sampled token ids back sees a deterministic token 0.
"""

from __future__ import annotations

import bisect
import collections
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import kernel_abi
from .capture import StreamCaptures
from .gpu import (ArgKind, DevicePtr, Dim3, EventHandle, GpuBackend, GpuError, GraphHandle,
                  KernelHandle, KernelSig, Stream)
from .host import ALIGNMENT, host_bytes

_BASE_ADDRESS = 0x10_0000_0000


def abi_signatures() -> dict[tuple[str, str], KernelSig]:
    """Every KernelSig declared in `kernel_abi`, keyed by (module, func)."""
    return {(s.module, s.func): s for s in vars(kernel_abi).values() if isinstance(s, KernelSig)}


@dataclass(frozen=True, slots=True)
class LaunchRecord:
    """One kernel launch as issued. `args` maps ABI parameter names to values (argN where
    the kernel is not in the ABI table)."""

    module: str
    func: str
    grid: Dim3
    block: Dim3
    shared: int
    stream: Stream
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class GraphLaunchRecord:
    graph: tuple[LaunchRecord, ...]
    stream: Stream


class MockGpuBackend(GpuBackend):
    """Records launches; memory operations succeed but are range-checked."""

    name = "mock"

    def __init__(self, total_memory: int = 80 << 30) -> None:
        self._total = int(total_memory)
        self._next_addr = _BASE_ADDRESS
        self._live: dict[int, int] = {}     # start -> nbytes
        self._in_use = 0
        self._starts: list[int] = []        # sorted live starts
        self._abi = abi_signatures()
        self.launches: list[LaunchRecord] = []
        self.graph_launches: list[GraphLaunchRecord] = []
        self.op_counts: collections.Counter[str] = collections.Counter()
        self._captures: StreamCaptures[LaunchRecord] = StreamCaptures()
        self._next_stream = 1

    # ---- memory -------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DevicePtr:
        nbytes = max(int(nbytes), 1)
        if self._captures:
            raise GpuError("alloc while a graph is being captured")
        if self.bytes_in_use + nbytes > self._total:
            raise GpuError(f"mock alloc of {nbytes} bytes: out of memory "
                           f"({self.free_memory()} of {self._total} bytes free)")
        ptr = self._next_addr
        self._next_addr += -(-nbytes // ALIGNMENT) * ALIGNMENT + ALIGNMENT
        self._live[ptr] = nbytes
        self._in_use += nbytes
        self._starts.append(ptr)
        return ptr

    def mapped_host_ptr(self, host: np.ndarray) -> DevicePtr | None:
        """Host memory "maps" at its own address (nothing runs on the mock)."""
        return int(host.ctypes.data)

    def free(self, ptr: DevicePtr) -> None:
        if self._captures:
            raise GpuError("free while a graph is being captured")
        nbytes = self._live.pop(ptr, None)
        if nbytes is None:
            raise GpuError(f"mock free of {ptr:#x}: not the start of a live allocation "
                           "(double free or foreign pointer)")
        self._in_use -= nbytes
        self._starts.remove(ptr)

    @property
    def bytes_in_use(self) -> int:
        return self._in_use

    @property
    def live_allocations(self) -> dict[int, int]:
        """start -> nbytes of every allocation not yet freed."""
        return dict(self._live)

    def check_range(self, ptr: DevicePtr, nbytes: int, what: str) -> None:
        """Raise unless [ptr, ptr+nbytes) lies inside one live allocation."""
        i = bisect.bisect_right(self._starts, ptr) - 1
        if i >= 0:
            start = self._starts[i]
            if ptr + nbytes <= start + self._live[start]:
                return
        raise GpuError(f"{what}: device range [{ptr:#x}, +{nbytes}) is not inside a live "
                       "allocation")

    def copy_h2d(self, dst: DevicePtr, src: np.ndarray, stream: Stream | None = None) -> None:
        self.check_range(dst, host_bytes(src, "copy_h2d").size, "copy_h2d")
        self.op_counts["copy_h2d"] += 1

    def copy_d2h(self, dst: np.ndarray, src: DevicePtr, stream: Stream | None = None) -> None:
        out = host_bytes(dst, "copy_d2h")
        self.check_range(src, out.size, "copy_d2h")
        out.fill(0)
        self.op_counts["copy_d2h"] += 1

    def copy_d2d(self, dst: DevicePtr, src: DevicePtr, nbytes: int,
                 stream: Stream | None = None) -> None:
        self.check_range(dst, nbytes, "copy_d2d dst")
        self.check_range(src, nbytes, "copy_d2d src")
        self.op_counts["copy_d2d"] += 1

    def memset(self, ptr: DevicePtr, value: int, nbytes: int,
               stream: Stream | None = None) -> None:
        self.check_range(ptr, nbytes, "memset")
        self.op_counts["memset"] += 1

    def total_memory(self) -> int:
        return self._total

    def free_memory(self) -> int:
        return self._total - self.bytes_in_use

    # ---- kernels ------------------------------------------------------------------
    def kernel(self, module: str, func: str) -> KernelHandle:
        return KernelHandle(module, func, self._abi.get((module, func)))

    def launch(self, handle: KernelHandle, grid: Dim3, block: Dim3, shared_mem: int,
               stream: Stream, args: Sequence[tuple[ArgKind, Any]]) -> None:
        sig: KernelSig | None = handle.native
        if sig is None:
            named = {f"arg{i}": v for i, (_, v) in enumerate(args)}
        else:
            kinds = tuple(k for k, _ in args)
            want = tuple(p.kind for p in sig.params)
            if kinds != want:
                raise GpuError(f"{handle.module}.{handle.func}: argument kinds "
                               f"{[k.value for k in kinds]} do not match the ABI "
                               f"{[k.value for k in want]}")
            named = {p.name: v for p, (_, v) in zip(sig.params, args)}
        record = LaunchRecord(handle.module, handle.func, tuple(grid), tuple(block),
                              int(shared_mem), stream, named)
        captured = self._captures.get(stream)
        (captured if captured is not None else self.launches).append(record)

    def drain_launches(self) -> list[LaunchRecord]:
        """Return the launches recorded so far (outside graph capture) and forget them."""
        out, self.launches = self.launches, []
        return out

    # ---- streams ------------------------------------------------------------------
    def create_stream(self) -> Stream:
        stream = self._next_stream
        self._next_stream += 1
        return stream

    def synchronize(self, stream: Stream | None = None) -> None:
        if stream is not None and stream in self._captures:
            raise GpuError(f"synchronize on stream {stream} while it is being captured")
        self.op_counts["synchronize"] += 1

    # ---- graphs -------------------------------------------------------------------
    @property
    def supports_graphs(self) -> bool:
        return True

    def begin_capture(self, stream: Stream) -> None:
        self._captures.begin(stream)

    def end_capture(self, stream: Stream) -> GraphHandle:
        records = self._captures.end(stream)
        return GraphHandle(tuple(records))

    def launch_graph(self, graph: GraphHandle, stream: Stream) -> None:
        self.graph_launches.append(GraphLaunchRecord(graph.native, stream))

    # ---- events -------------------------------------------------------------------
    def create_event(self, timing: bool = True) -> EventHandle:
        return EventHandle(object())

    def record_event(self, event: EventHandle, stream: Stream) -> None:
        self.op_counts["record_event"] += 1

    def stream_wait_event(self, stream: Stream, event: EventHandle) -> None:
        self.op_counts["stream_wait_event"] += 1

    def event_synchronize(self, event: EventHandle) -> None:
        self.op_counts["event_synchronize"] += 1

    def event_elapsed_ms(self, start: EventHandle, end: EventHandle) -> float:
        return 0.0
