"""GpuBackend: the one theory of a GPU that model and server code are written against.

Three models implement it: CudaBackend (the real driver), HostBackend (numpy reference
kernels on the CPU) and MockGpuBackend (records launches). Layers never know which one
they hold; that is what lets the whole engine run and be tested without a GPU.
"""

from __future__ import annotations

import abc
import enum
import struct
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

DevicePtr = int
Stream = int
Dim3 = tuple[int, int, int]


class ArgKind(enum.Enum):
    """How a kernel parameter is passed: a device pointer, a 32/64-bit scalar, or a TMA
    tensor map (TMAP: the 128 bytes of a CUtensorMap, a `const __grid_constant__` parameter
    64-byte aligned in the parameter block; `GpuBackend.tensor_map_2d` makes them)."""

    PTR = "ptr"
    U32 = "u32"
    I32 = "i32"
    F32 = "f32"
    U64 = "u64"
    TMAP = "tmap"


#: bytes of a CUtensorMap (cuda.h: 64-byte aligned, opaque)
TENSOR_MAP_BYTES = 128
#: a tensor map's inner box: 64 bf16 = 128 bytes, one row of the 128-byte swizzle
TENSOR_MAP_BOX_COLS = 64
#: the largest box extent the TMA unit takes per dimension
TENSOR_MAP_MAX_BOX = 256
#: the fields a backend without a TMA unit records in its stand-in map bytes
_TENSOR_MAP_FIELDS = struct.Struct("<QQQII")


def check_tensor_map_2d(ptr: int, rows: int, cols: int, box_rows: int, box_cols: int) -> None:
    """Raise ValueError unless the TMA unit can describe this bf16 matrix and box: a 16-byte
    aligned base, a row pitch (cols * 2 bytes) that is a multiple of 16, a box of 1..256 rows
    and TENSOR_MAP_BOX_COLS columns (the 128-byte swizzle's row)."""
    if ptr % 16:
        raise ValueError(f"tensor map: base {ptr:#x} is not 16-byte aligned")
    if rows < 1 or cols < 1 or cols * 2 % 16:
        raise ValueError(f"tensor map: a [{rows}][{cols}] bf16 matrix needs rows, cols >= 1 "
                         f"and a row pitch that is a multiple of 16 bytes (cols % 8 == 0)")
    if not 1 <= box_rows <= TENSOR_MAP_MAX_BOX or box_cols != TENSOR_MAP_BOX_COLS:
        raise ValueError(f"tensor map: box [{box_rows}][{box_cols}] must be 1..."
                         f"{TENSOR_MAP_MAX_BOX} rows of {TENSOR_MAP_BOX_COLS} columns")


#: inclusive value range of each integer ArgKind (F32 has none)
_INT_BOUNDS: dict[ArgKind, tuple[int, int]] = {
    ArgKind.U32: (0, 2**32 - 1), ArgKind.I32: (-2**31, 2**31 - 1),
    ArgKind.PTR: (0, 2**64 - 1), ArgKind.U64: (0, 2**64 - 1)}


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: ArgKind


@dataclass(frozen=True, slots=True)
class KernelSig:
    """The ABI of one `extern "C" __global__` entry point: module, function, parameters.

    The same signature drives the CUDA launch, the host reference call and the mock
    record, so a kernel and its reference cannot disagree about argument order.

    Launch builders look a signature up in dicts on every launch (KernelCache), so its
    hash is computed once: the generated one hashed every Param and ArgKind each time
    (~55,000 hash calls in an eager Qwen3-8B prefill step of 330 launches). Measured on the
    mock backend (`tools/profile_host_step.py --prefill 24 --cached 2040 --sm90-modules`, a
    2-core CPU, twice each): host time a step 7.50 / 7.88 ms -> 5.36 / 5.71.
    """

    module: str
    func: str
    params: tuple[Param, ...]
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.module, self.func, self.params)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple:
        """Rebuilt through __init__ when unpickled: str hashes differ between processes, so
        the cached one must not travel."""
        return (KernelSig, (self.module, self.func, self.params))

    @classmethod
    def of(cls, module: str, func: str, spec: str) -> "KernelSig":
        """Build from a compact spec: "x:ptr w:ptr rows:u32 eps:f32"."""
        params = []
        for item in spec.split():
            name, kind = item.split(":")
            params.append(Param(name, ArgKind(kind)))
        return cls(module, func, tuple(params))

    def pack(self, values: Sequence[Any]) -> tuple[tuple[ArgKind, Any], ...]:
        """Check arity and types, returning (kind, value) pairs for GpuBackend.launch."""
        if len(values) != len(self.params):
            raise TypeError(f"{self.module}.{self.func} takes {len(self.params)} arguments "
                            f"({', '.join(p.name for p in self.params)}), got {len(values)}")
        out = []
        for p, v in zip(self.params, values):
            if p.kind is ArgKind.F32:
                v = float(v)
            elif p.kind is ArgKind.TMAP:
                if not isinstance(v, bytes) or len(v) != TENSOR_MAP_BYTES:
                    raise TypeError(f"{self.module}.{self.func}: {p.name} must be the "
                                    f"{TENSOR_MAP_BYTES} bytes of a tensor map, got {v!r:.60}")
            else:
                if isinstance(v, float) or not isinstance(v, (int, np.integer)):
                    raise TypeError(f"{self.module}.{self.func}: {p.name} must be an integer "
                                    f"({p.kind.value}), got {v!r}")
                v = int(v)
                lo, hi = _INT_BOUNDS[p.kind]
                if not lo <= v <= hi:
                    raise ValueError(f"{self.module}.{self.func}: {p.name}={v} does not fit "
                                     f"{p.kind.value}")
            out.append((p.kind, v))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class KernelHandle:
    module: str
    func: str
    native: Any = None


@dataclass(frozen=True, slots=True)
class GraphHandle:
    native: Any


@dataclass(frozen=True, slots=True)
class EventHandle:
    native: Any


class GpuError(RuntimeError):
    """A device operation failed; the message names the call and the driver's error."""


def dim3(v: int | Sequence[int]) -> Dim3:
    if type(v) is int:  # the hot path: layers pass plain ints
        return (v, 1, 1)
    if isinstance(v, (int, np.integer)):
        return (int(v), 1, 1)
    t = tuple(int(x) for x in v) + (1, 1, 1)
    return (t[0], t[1], t[2])


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """The device properties launch geometry depends on, read from the driver on CUDA.

    Launch builders size grids in waves of `sm_count` blocks and opt kernels in to dynamic
    shared memory up to `shared_memory_per_block`; the model runner sizes decode splits by
    `sm_count`. Reading them from the device (not a constant) keeps an H100 PCIe (114 SMs)
    or a GB10 (48 SMs) from being planned as an H200.
    """

    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    shared_memory_per_block: int  # bytes a block may opt in to (cudaFuncSetAttribute max)
    shared_memory_per_sm: int  # bytes
    l2_cache_bytes: int


#: What backends without a device report (HostBackend, MockGpuBackend): an H200's facts, so
#: CPU runs plan the same grids, splits and batch routes as the shipped hardware and their
#: launch records match a real H200 run. Not measured: the datasheet values of the H200 SXM
#: (132 SMs, 227 KiB opt-in shared memory per block, 228 KiB per SM, 50 MiB L2 as the driver
#: reports it).
H200_FACTS = DeviceFacts(name="NVIDIA H200 (modelled by a backend without a device)",
                         compute_capability=(9, 0), sm_count=132,
                         shared_memory_per_block=227 * 1024, shared_memory_per_sm=228 * 1024,
                         l2_cache_bytes=50 * 1024 * 1024)


class GpuBackend(abc.ABC):
    """Memory, kernel launch, streams, graphs and events of one device.

    Host buffers passed to copies are numpy arrays (any dtype; their bytes are copied).
    Optional methods (graphs, events, pinned memory) have working defaults where a
    meaningful one exists.
    """

    name: str = "abstract"

    # ---- device facts -------------------------------------------------------------
    def device_facts(self) -> DeviceFacts:
        """SM count, shared memory and L2 of the device. Backends without a device report
        H200_FACTS (documented there); CudaBackend asks the driver."""
        return H200_FACTS

    # ---- memory -------------------------------------------------------------------
    @abc.abstractmethod
    def alloc(self, nbytes: int) -> DevicePtr: ...

    @abc.abstractmethod
    def free(self, ptr: DevicePtr) -> None: ...

    @abc.abstractmethod
    def copy_h2d(self, dst: DevicePtr, src: np.ndarray, stream: Stream | None = None) -> None: ...

    @abc.abstractmethod
    def copy_d2h(self, dst: np.ndarray, src: DevicePtr, stream: Stream | None = None) -> None: ...

    @abc.abstractmethod
    def copy_d2d(self, dst: DevicePtr, src: DevicePtr, nbytes: int,
                 stream: Stream | None = None) -> None: ...

    @abc.abstractmethod
    def memset(self, ptr: DevicePtr, value: int, nbytes: int,
               stream: Stream | None = None) -> None: ...

    @abc.abstractmethod
    def total_memory(self) -> int: ...

    @abc.abstractmethod
    def free_memory(self) -> int: ...

    def mark_constant(self, ptr: DevicePtr, nbytes: int) -> None:
        """Promise that these bytes stay unchanged until freed (weights, after upload).

        A backend may cache forms derived from them; HostBackend keeps widened weights so
        its reference GEMMs do not re-convert every matrix on every step.
        """
        return None

    def alloc_host_pinned(self, nbytes: int) -> np.ndarray:
        """Page-locked host memory for fast async copies; plain memory where none exists."""
        return np.empty(nbytes, dtype=np.uint8)

    def mapped_host_ptr(self, host: np.ndarray) -> DevicePtr | None:
        """The device address of page-locked memory from `alloc_host_pinned`, which kernels
        then read and write directly (a captured step's own input and output copies); None
        where the backend maps no host memory."""
        return None

    # ---- kernels ------------------------------------------------------------------
    @abc.abstractmethod
    def kernel(self, module: str, func: str) -> KernelHandle: ...

    @abc.abstractmethod
    def launch(self, handle: KernelHandle, grid: Dim3, block: Dim3, shared_mem: int,
               stream: Stream, args: Sequence[tuple[ArgKind, Any]]) -> None: ...

    @property
    def module_names(self) -> list[str]:
        """Names of the compiled kernel modules loaded (sorted). Ops use it to pick kernels
        that only some targets build (gemm_sm90); backends that resolve kernels otherwise
        (references, mocks) load none, so they take the paths every target has."""
        return []

    def module_digest(self, module: str) -> str | None:
        """The sha256 (hex) of the compiled module `module` as loaded, None where it is not
        loaded or the backend loads none: what keys measurements of that code (a launch
        builder's tuning table, ops/decode_gemm_tune.py) so a rebuilt kernel is measured
        again. Backends without a device return None, and so never tune."""
        return None

    def set_max_dynamic_shared(self, handle: KernelHandle, nbytes: int) -> None:
        """Let `handle` launch with up to `nbytes` of dynamic shared memory.

        CUDA needs this opt-in above 48 KiB; backends without such a limit ignore it.
        """
        return None

    def prefer_shared_memory(self, handle: KernelHandle) -> None:
        """Ask that SMs running `handle` be configured with the most shared memory (the least
        L1): CUDA's carveout preference. A kernel whose blocks take most of an SM's shared
        memory (the long-context attention's two ~100 KiB blocks, the persistent decode
        kernel) needs the whole configuration; left to choose, the driver may pick one that
        holds fewer of them, or none beside the previous kernel's under PDL. Backends
        without that hardware choice ignore it.
        """
        return None

    def allow_non_portable_cluster(self, handle: KernelHandle) -> None:
        """Let `handle` launch in thread-block clusters above the portable 8 blocks (its
        compiled cluster size: CUDA refuses such a launch without this opt-in). Backends
        without clusters ignore it.
        """
        return None

    def resident_blocks(self, handle: KernelHandle, block: int, shared_mem: int,
                        cluster: int) -> int | None:
        """How many blocks of `block` threads and `shared_mem` bytes of dynamic shared
        memory, in clusters of `cluster`, the device holds at once (the kernel opted in to
        that shared memory); None where the backend has no device to ask (launch builders
        then use their model of it)."""
        return None

    def tensor_map_2d(self, ptr: DevicePtr, rows: int, cols: int, box_rows: int,
                      box_cols: int = TENSOR_MAP_BOX_COLS) -> bytes:
        """A TMA tensor map (an ArgKind.TMAP value) over the row-major bf16 matrix
        [rows][cols] at `ptr`, copied in [box_rows][box_cols] boxes that land 128-byte
        swizzled in shared memory (wgmma's K-major layout), zero past the matrix
        (check_tensor_map_2d says what is accepted). A pure function of its arguments, so a
        caller may cache it by them. CudaBackend encodes it with the driver; backends without
        a TMA unit run reference kernels that read the matrices through their pointers, and
        return the checked fields as stand-in bytes (launch records show them)."""
        check_tensor_map_2d(ptr, rows, cols, box_rows, box_cols)
        return _TENSOR_MAP_FIELDS.pack(ptr, rows, cols, box_rows, box_cols).ljust(
            TENSOR_MAP_BYTES, b"\0")

    # ---- streams ------------------------------------------------------------------
    def default_stream(self) -> Stream:
        return 0

    def create_stream(self) -> Stream:
        return self.default_stream()

    def bind_to_thread(self) -> None:
        """Make this device current on the calling thread (engine steps run on their own
        thread; CUDA contexts are per thread). A no-op where there is no such state."""
        return None

    @abc.abstractmethod
    def synchronize(self, stream: Stream | None = None) -> None: ...

    # ---- graphs -------------------------------------------------------------------
    @property
    def supports_graphs(self) -> bool:
        return False

    def is_capturing(self, stream: Stream) -> bool:
        """Whether work issued on `stream` is being captured into a graph now: a launch
        builder that would synchronize (time candidates between events) must not then.
        Backends that never tune answer False (nothing that synchronizes asks them)."""
        return False

    def begin_capture(self, stream: Stream) -> None:
        raise GpuError(f"{self.name} backend does not support graph capture")

    def end_capture(self, stream: Stream) -> GraphHandle:
        raise GpuError(f"{self.name} backend does not support graph capture")

    def launch_graph(self, graph: GraphHandle, stream: Stream) -> None:
        raise GpuError(f"{self.name} backend does not support graph launch")

    def destroy_graph(self, graph: GraphHandle) -> None:
        return None

    # ---- events -------------------------------------------------------------------
    def create_event(self, timing: bool = True) -> EventHandle:
        """An event; `timing` False for one only waited on, never timed (cheaper to record:
        the driver's CU_EVENT_DISABLE_TIMING)."""
        raise GpuError(f"{self.name} backend has no events")

    def record_event(self, event: EventHandle, stream: Stream) -> None:
        raise GpuError(f"{self.name} backend has no events")

    def stream_wait_event(self, stream: Stream, event: EventHandle) -> None:
        raise GpuError(f"{self.name} backend has no events")

    def event_elapsed_ms(self, start: EventHandle, end: EventHandle) -> float:
        raise GpuError(f"{self.name} backend has no events")

    def event_synchronize(self, event: EventHandle) -> None:
        """Wait until the work before the event's last record has completed (the host
        waits for one step while later ones stay queued)."""
        raise GpuError(f"{self.name} backend has no events")

    # ---- lifetime -----------------------------------------------------------------
    def close(self) -> None:
        """Release what the backend holds (modules, streams, pinned memory); idempotent."""
        return None

    # ---- convenience --------------------------------------------------------------
    def upload(self, array: np.ndarray) -> DevicePtr:
        """Allocate device memory holding a copy of `array`."""
        arr = np.ascontiguousarray(array)
        ptr = self.alloc(max(arr.nbytes, 1))
        if arr.nbytes:
            self.copy_h2d(ptr, arr)
        return ptr

    def download(self, ptr: DevicePtr, dtype: Any, shape: Sequence[int] | int) -> np.ndarray:
        """Synchronously read a device buffer into a new numpy array."""
        out = np.empty(shape, dtype=dtype)
        if out.nbytes:
            self.copy_d2h(out, ptr)
        return out


class KernelLaunch:
    """Resolves a kernel once and launches it with checked, typed arguments.

    Layers build these at load time (so handle lookup happens once) and call them on the
    hot path. Per-call work is a check of each value against precomputed bounds; anything
    unusual (numpy scalars, ints for f32, bad values) takes `KernelSig.pack`, which
    converts or raises the precise error.
    """

    __slots__ = ("backend", "sig", "handle", "_kinds", "_bounds")

    def __init__(self, backend: GpuBackend, sig: KernelSig) -> None:
        self.backend = backend
        self.sig = sig
        self.handle = backend.kernel(sig.module, sig.func)
        self._kinds = tuple(p.kind for p in sig.params)
        self._bounds = tuple(_INT_BOUNDS.get(p.kind) for p in sig.params)

    def __call__(self, stream: Stream, grid: int | Sequence[int], block: int | Sequence[int],
                 shared_mem: int, *values: Any) -> None:
        args = self._fast_pack(values)
        if args is None:
            args = self.sig.pack(values)
        self.backend.launch(self.handle, dim3(grid), dim3(block), shared_mem, stream, args)

    def _fast_pack(self, values: tuple[Any, ...]) -> tuple[tuple[ArgKind, Any], ...] | None:
        """(kind, value) pairs when every value is already a plain in-range int/float (or, for
        a tensor map, 128 bytes)."""
        if len(values) != len(self._bounds):
            return None
        for kind, bound, v in zip(self._kinds, self._bounds, values):
            if bound is not None:
                if type(v) is not int or not bound[0] <= v <= bound[1]:
                    return None
            elif kind is ArgKind.F32:
                if type(v) is not float:
                    return None
            elif type(v) is not bytes or len(v) != TENSOR_MAP_BYTES:
                return None
        return tuple(zip(self._kinds, values))

