"""HostBackend: the GpuBackend theory modelled on the CPU with numpy reference kernels.

Device memory is numpy byte arrays behind fake device addresses, so pointer arithmetic in
layers (`base + offset`) works unchanged; a launch calls the reference kernel registered
under the same (module, function) as the CUDA entry point. Work runs synchronously in
issue order, which is a legal schedule of any correctly synchronized CUDA program.

The model is strict where CUDA is strict and a bug would otherwise hide until the GPU:
out-of-bounds and freed pointers raise, allocating or synchronizing while a graph is being
captured raises, and a captured graph replays its launches and copies against the
*current* contents of device and host buffers, exactly like a CUDA graph.
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .capture import StreamCaptures
from .gpu import (ArgKind, DevicePtr, Dim3, EventHandle, GpuBackend, GpuError, GraphHandle,
                  KernelHandle, Stream)
from .reference import ReferenceFn, load_all

#: every allocation starts on this boundary, like cuMemAlloc's
ALIGNMENT = 256
#: first fake address: far from 0 so a null or small integer is never a valid pointer
_BASE_ADDRESS = 0x7F00_0000_0000
#: unmapped bytes between allocations so that running off one never lands in the next
_GUARD_BYTES = 4096

Op = Callable[[], None]


def host_bytes(array: np.ndarray, what: str) -> np.ndarray:
    """The bytes of a C-contiguous host array as a flat uint8 view (no copy).

    A copy must read or write the caller's memory itself (a captured graph replays it
    later), so non-contiguous arrays are refused rather than silently copied.
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{what}: host buffer must be a numpy array, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{what}: host buffer must be C-contiguous")
    return array.reshape(-1).view(np.uint8)


class _HostGraph:
    __slots__ = ("ops", "destroyed")

    def __init__(self, ops: list[Op]) -> None:
        self.ops = ops
        self.destroyed = False


class _HostEvent:
    __slots__ = ("time",)

    def __init__(self) -> None:
        self.time: float | None = None


class HostBackend(GpuBackend):
    """Runs every kernel through its numpy reference; see the module docstring."""

    name = "host"

    def __init__(self, references: Mapping[tuple[str, str], ReferenceFn] | None = None,
                 total_memory: int = 8 << 30) -> None:
        self._refs = load_all() if references is None else references
        self._total = int(total_memory)
        self._used = 0
        self._next_addr = _BASE_ADDRESS
        # live allocations, sorted by start address (addresses only grow, so append keeps order)
        self._starts: list[int] = []
        self._bufs: list[np.ndarray] = []
        # freed ranges, sorted by start, to tell a use-after-free from a wild pointer
        self._freed_starts: list[int] = []
        self._freed_ends: list[int] = []
        # ranges promised constant (mark_constant) and forms derived from them
        self._constants: list[tuple[int, int]] = []
        self._derived: dict[tuple[int, int, str], np.ndarray] = {}
        self._captures: StreamCaptures[Op] = StreamCaptures()
        self._next_stream = 1
        self._lock = threading.Lock()

    # ---- memory -------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DevicePtr:
        nbytes = max(int(nbytes), 1)
        self._refuse_during_capture("alloc")
        with self._lock:
            if self._used + nbytes > self._total:
                raise GpuError(f"host alloc of {nbytes} bytes: out of memory "
                               f"({self._total - self._used} of {self._total} bytes free)")
            ptr = self._next_addr
            self._next_addr += -(-(nbytes + _GUARD_BYTES) // ALIGNMENT) * ALIGNMENT
            self._starts.append(ptr)
            self._bufs.append(np.zeros(nbytes, dtype=np.uint8))
            self._used += nbytes
        return ptr

    def free(self, ptr: DevicePtr) -> None:
        self._refuse_during_capture("free")
        with self._lock:
            i = bisect.bisect_left(self._starts, ptr)
            if i == len(self._starts) or self._starts[i] != ptr:
                raise GpuError(f"host free of {ptr:#x}: {self._diagnose(ptr)}")
            size = self._bufs[i].size
            self._forget_constant(ptr, size)
            del self._starts[i]
            del self._bufs[i]
            self._used -= size
            j = bisect.bisect_left(self._freed_starts, ptr)
            self._freed_starts.insert(j, ptr)
            self._freed_ends.insert(j, ptr + size)

    def resolve(self, ptr: DevicePtr, nbytes: int) -> np.ndarray:
        """The `nbytes` device bytes at `ptr` (any interior pointer) as a writable uint8 view."""
        i = bisect.bisect_right(self._starts, ptr) - 1
        if i >= 0:
            buf = self._bufs[i]
            off = ptr - self._starts[i]
            if off <= buf.size:
                if nbytes < 0 or off + nbytes > buf.size:
                    raise GpuError(f"device range [{ptr:#x}, +{nbytes}) runs past the end of "
                                   f"its {buf.size}-byte allocation at {self._starts[i]:#x} "
                                   f"(offset {off})")
                return buf[off:off + nbytes]
        raise GpuError(f"device address {ptr:#x}: {self._diagnose(ptr)}")

    def view(self, ptr: int, dtype: Any, count: int) -> np.ndarray:
        """A writable 1-D view of `count` elements of `dtype` at device address `ptr`."""
        dt = np.dtype(dtype)
        return self.resolve(ptr, int(count) * dt.itemsize).view(dt)

    def copy_h2d(self, dst: DevicePtr, src: np.ndarray, stream: Stream | None = None) -> None:
        data = host_bytes(src, "copy_h2d")
        target = self.resolve(dst, data.size)
        self._forget_constant(dst, data.size)

        def op() -> None:
            target[:] = data

        self._issue(stream, op, "copy_h2d")

    def copy_d2h(self, dst: np.ndarray, src: DevicePtr, stream: Stream | None = None) -> None:
        out = host_bytes(dst, "copy_d2h")
        source = self.resolve(src, out.size)

        def op() -> None:
            out[:] = source

        self._issue(stream, op, "copy_d2h")

    def copy_d2d(self, dst: DevicePtr, src: DevicePtr, nbytes: int,
                 stream: Stream | None = None) -> None:
        target, source = self.resolve(dst, nbytes), self.resolve(src, nbytes)
        self._forget_constant(dst, nbytes)

        def op() -> None:
            target[:] = source  # numpy buffers overlapping ranges, so this is a memmove

        self._issue(stream, op, "copy_d2d")

    def memset(self, ptr: DevicePtr, value: int, nbytes: int,
               stream: Stream | None = None) -> None:
        target, byte = self.resolve(ptr, nbytes), int(value) & 0xFF
        self._forget_constant(ptr, nbytes)

        def op() -> None:
            target.fill(byte)

        self._issue(stream, op, "memset")

    # ---- constant ranges and their derived forms -------------------------------------
    def mark_constant(self, ptr: DevicePtr, nbytes: int) -> None:
        self.resolve(ptr, nbytes)  # must be a live range
        with self._lock:
            self._constants.append((ptr, ptr + nbytes))

    def derived(self, ptr: DevicePtr, count: int, dtype: Any, tag: str,
                make: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """`make(view)` of `count` elements at ptr, cached when the range is constant.

        Reference kernels use it for weights (e.g. bf16 widened to float64). Writing into a
        constant range through this backend drops the promise and the cached forms.
        """
        nbytes = int(count) * np.dtype(dtype).itemsize
        view = self.view(ptr, dtype, count)
        if not any(lo <= ptr and ptr + nbytes <= hi for lo, hi in self._constants):
            return make(view)
        key = (ptr, nbytes, tag)
        cached = self._derived.get(key)
        if cached is None:
            cached = self._derived[key] = make(view)
        return cached

    def _forget_constant(self, ptr: int, nbytes: int) -> None:
        end = ptr + nbytes
        if not self._constants or not any(lo < end and ptr < hi for lo, hi in self._constants):
            return
        self._constants = [(lo, hi) for lo, hi in self._constants if not (lo < end and ptr < hi)]
        self._derived = {k: v for k, v in self._derived.items()
                         if not (k[0] < end and ptr < k[0] + k[1])}

    def total_memory(self) -> int:
        return self._total

    def free_memory(self) -> int:
        return self._total - self._used

    @property
    def num_allocations(self) -> int:
        return len(self._starts)

    # ---- kernels ------------------------------------------------------------------
    def kernel(self, module: str, func: str) -> KernelHandle:
        fn = self._refs.get((module, func))
        if fn is None:
            known = sorted(f"{m}.{f}" for m, f in self._refs if m == module)
            hint = f"; module {module!r} has: {', '.join(known)}" if known else \
                f"; no reference registered for module {module!r} at all"
            raise GpuError(f"host backend: no reference kernel for {module}.{func}{hint}")
        return KernelHandle(module, func, fn)

    def launch(self, handle: KernelHandle, grid: Dim3, block: Dim3, shared_mem: int,
               stream: Stream, args: Sequence[tuple[ArgKind, Any]]) -> None:
        fn = handle.native
        if not callable(fn):
            raise GpuError(f"{handle.module}.{handle.func}: handle was not made by this backend")
        values = tuple(v for _, v in args)

        def op() -> None:
            try:
                fn(self, grid, block, *values)
            except GpuError as exc:
                raise GpuError(f"{handle.module}.{handle.func}: {exc}") from exc

        ops = self._captures.get(stream) if self._captures else None
        if ops is not None:
            ops.append(op)
        else:
            op()

    # ---- streams ------------------------------------------------------------------
    def create_stream(self) -> Stream:
        with self._lock:
            stream = self._next_stream
            self._next_stream += 1
        return stream

    def synchronize(self, stream: Stream | None = None) -> None:
        if stream is None:
            self._refuse_during_capture("synchronize(None)")
        elif stream in self._captures:
            raise GpuError(f"synchronize on stream {stream} while it is being captured")

    # ---- graphs -------------------------------------------------------------------
    @property
    def supports_graphs(self) -> bool:
        return True

    def begin_capture(self, stream: Stream) -> None:
        self._captures.begin(stream)

    def end_capture(self, stream: Stream) -> GraphHandle:
        ops = self._captures.end(stream)
        return GraphHandle(_HostGraph(ops))

    def launch_graph(self, graph: GraphHandle, stream: Stream) -> None:
        g = graph.native
        if not isinstance(g, _HostGraph) or g.destroyed:
            raise GpuError("launch_graph: not a live graph of this backend")
        for op in g.ops:
            self._issue(stream, op, "launch_graph")

    def destroy_graph(self, graph: GraphHandle) -> None:
        g = graph.native
        if isinstance(g, _HostGraph):
            g.destroyed = True
            g.ops = []

    # ---- events -------------------------------------------------------------------
    def create_event(self, timing: bool = True) -> EventHandle:
        return EventHandle(_HostEvent())

    def record_event(self, event: EventHandle, stream: Stream) -> None:
        ev: _HostEvent = event.native

        def op() -> None:
            ev.time = time.perf_counter()

        self._issue(stream, op, "record_event")

    def stream_wait_event(self, stream: Stream, event: EventHandle) -> None:
        return None  # everything already ran in issue order

    def event_synchronize(self, event: EventHandle) -> None:
        return None  # everything already ran in issue order

    def event_elapsed_ms(self, start: EventHandle, end: EventHandle) -> float:
        t0, t1 = start.native.time, end.native.time
        if t0 is None or t1 is None:
            raise GpuError("event_elapsed_ms: both events must have been recorded")
        return (t1 - t0) * 1e3

    # ---- internals ----------------------------------------------------------------
    def _issue(self, stream: Stream | None, op: Op, what: str) -> None:
        """Run `op` now, or append it to the graph being captured on `stream`."""
        if self._captures:
            if stream is None:
                raise GpuError(f"{what} without a stream while a graph is being captured "
                               "(CUDA forbids synchronous operations during capture)")
            ops = self._captures.get(stream)
            if ops is not None:
                ops.append(op)
                return
        op()

    def _refuse_during_capture(self, what: str) -> None:
        if self._captures:
            raise GpuError(f"{what} while stream(s) {sorted(self._captures)} are being "
                           "captured: a graph must not allocate, free or synchronize")

    def _diagnose(self, ptr: int) -> str:
        j = bisect.bisect_right(self._freed_starts, ptr) - 1
        if j >= 0 and ptr < self._freed_ends[j]:
            return (f"use after free (inside the freed allocation at "
                    f"{self._freed_starts[j]:#x})")
        return "not inside any allocation"
