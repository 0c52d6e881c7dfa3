"""CudaBackend: the GpuBackend theory on a real NVIDIA GPU, through the cuda-bindings driver API.

The only module in Atlas that imports `cuda.bindings`, and it does so lazily: importing this
file never touches the driver, so CPU-only machines import it freely and fail only when a
CudaBackend is constructed (with a message that says why and what to use instead).

Every driver call returns `(CUresult, values...)`; `_ok` turns a failure into a GpuError
naming the call and the error. The launch path is kept short because decode graphs are
captured from it and eager prefill launches run through it: argument bytes are packed by a
`struct.Struct` cached per kernel into one fixed parameter block whose slot addresses
never change, and `cuLaunchKernel` gets the address of that pointer array. A kernel taking
a TMA tensor map (ArgKind.TMAP, 128 bytes, 64-byte aligned) lays its slots out around it,
with its own slot-address array (made once per thread); a captured graph keeps the bytes.

Kernels whose PTX waits on `griddepcontrol.wait` (ptx_entries.pdl_entries) are launched
with programmatic stream serialization through `cuLaunchKernelEx`: inside a captured decode
graph each one may start while its predecessor drains, which hides the launch and the first
DRAM round trip of ~300 small kernels per step. `pdl=False` (or a pre-Hopper device) turns
that off, for A/B measurements.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

import numpy as np

from .gpu import (TENSOR_MAP_BOX_COLS, TENSOR_MAP_BYTES, ArgKind, DeviceFacts, DevicePtr,
                  Dim3, EventHandle, GpuBackend, GpuError, GraphHandle, KernelHandle, Stream,
                  check_tensor_map_2d)
from .host import host_bytes
from ..kernels.ptx_entries import pdl_entries
from ..kernels.sass import find_sass

#: most parameters one kernel may take (each gets an 8-byte slot in the parameter block)
MAX_PARAMS = 64
#: bytes of the parameter block: 8-byte slots for MAX_PARAMS scalars, or fewer beside up to
#: four tensor maps
PARAM_BLOCK_BYTES = MAX_PARAMS * 8 + 4 * 128

#: little-endian packing of one slot per kind; the driver reads the first sizeof(param)
#: bytes of a slot, which on a little-endian host is the value itself
_SLOT_FORMAT = {ArgKind.PTR: "Q", ArgKind.U64: "Q", ArgKind.U32: "I4x", ArgKind.I32: "i4x",
                ArgKind.F32: "f4x", ArgKind.TMAP: "128s"}
#: (bytes, alignment) of a slot: 8 for scalars; a CUtensorMap is 128 bytes, 64-byte aligned
_SLOT_SHAPE = {kind: (8, 8) for kind in ArgKind} | {ArgKind.TMAP: (128, 64)}


def slot_layout(kinds: Sequence[ArgKind]) -> tuple[struct.Struct, tuple[int, ...]]:
    """The packer of a kernel's parameter block and each parameter's byte offset in it (from
    a 64-byte aligned base): 8-byte slots in order, a tensor map on the next 64-byte boundary.
    Only scalars: slot i at 8 i (the shared slot-address array serves)."""
    if len(kinds) > MAX_PARAMS:
        raise GpuError(f"{len(kinds)} parameters exceed {MAX_PARAMS}")
    fmt, offsets, at = ["<"], [], 0
    for kind in kinds:
        size, align = _SLOT_SHAPE[kind]
        pad = -at % align
        if pad:
            fmt.append(f"{pad}x")
        offsets.append(at + pad)
        fmt.append(_SLOT_FORMAT[kind])
        at += pad + size
    if at > PARAM_BLOCK_BYTES:
        raise GpuError(f"parameters of {at} bytes exceed the {PARAM_BLOCK_BYTES}-byte block")
    return struct.Struct("".join(fmt)), tuple(offsets)

CAPTURE_MODES = ("global", "thread_local", "relaxed")

#: the driver's JIT cache ceiling Atlas asks for unless the user set one: the SASS the
#: driver compiles from one model's PTX sets outgrows its 256 MB default, and a cache that
#: evicts makes every process pay the whole JIT again (about a minute on an H200 host)
JIT_CACHE_BYTES = 4 << 30


def _load_driver() -> Any:
    # read by the driver at cuInit, so it must be in the environment before the first call
    os.environ.setdefault("CUDA_CACHE_MAXSIZE", str(JIT_CACHE_BYTES))
    try:
        from cuda.bindings import driver
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise GpuError("cuda-bindings is not installed (pip install cuda-bindings); use the "
                       "host backend to run without a GPU") from exc
    return driver


def device_count() -> int:
    """How many CUDA devices the driver reports; 0 when there is no usable driver. Never raises."""
    try:
        drv = _load_driver()
        (err,) = drv.cuInit(0)
        if err:
            return 0
        err, count = drv.cuDeviceGetCount()
        return 0 if err else int(count)
    except Exception:  # a missing libcuda raises from inside cuda-bindings
        return 0


def device_capability(ordinal: int = 0) -> tuple[int, int] | None:
    """Compute capability of device `ordinal`, without creating a context; None when there
    is no usable driver or no such device. Never raises (startup asks it before choosing)."""
    try:
        drv = _load_driver()
        (err,) = drv.cuInit(0)
        if err:
            return None
        err, dev = drv.cuDeviceGet(ordinal)
        if err:
            return None
        attr = drv.CUdevice_attribute
        values = []
        for which in (attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                      attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR):
            err, value = drv.cuDeviceGetAttribute(which, dev)
            if err:
                return None
            values.append(int(value))
        return values[0], values[1]
    except Exception:  # a missing libcuda raises from inside cuda-bindings
        return None


def _describe(drv: Any, err: Any) -> str:
    """'CUDA_ERROR_NAME (driver's description)' for a CUresult."""
    name = getattr(err, "name", None) or str(err)
    try:
        e2, text = drv.cuGetErrorString(err)
        if not e2 and text:
            return f"{name} ({text.decode(errors='replace')})"
    except Exception:  # the description is a nicety; the name is what matters
        pass
    return name


class _Kernel:
    """A resolved CUfunction and the packer for the argument kinds it was last launched with.

    A kernel is launched with the same kinds every time (its KernelSig), so one cached
    Struct suffices; the kinds tuple is compared, never hashed (hashing enums runs Python
    code per element and would dominate the launch).
    """

    __slots__ = ("func", "label", "kinds", "struct", "offsets", "pdl")

    def __init__(self, func: Any, label: str, pdl: bool) -> None:
        self.func = func
        self.label = label
        self.pdl = pdl  # launched with programmatic stream serialization
        self.kinds: tuple[ArgKind, ...] | None = None
        self.struct = struct.Struct("")
        self.offsets: tuple[int, ...] | None = None  # None: slot i at 8 i

    def repack(self, kinds: tuple[ArgKind, ...]) -> struct.Struct:
        try:
            self.struct, offsets = slot_layout(kinds)
        except GpuError as exc:
            raise GpuError(f"{self.label}: {exc}") from None
        self.offsets = None if offsets == tuple(range(0, 8 * len(kinds), 8)) else offsets
        self.kinds = kinds
        return self.struct


class _ThreadState:
    """Per-thread launch state: proof the context is current here, and a parameter block
    (MAX_PARAMS 8-byte slots plus the array of their addresses) that only this thread
    writes, so launches from several threads never race on argument bytes."""

    __slots__ = ("params", "ptrs", "ptrs_addr", "pdl_config", "layouts")

    def __init__(self) -> None:
        raw = np.zeros(PARAM_BLOCK_BYTES + 64, dtype=np.uint8)
        skip = -raw.ctypes.data % 64  # a 64-byte aligned base, as a tensor map slot wants
        self.params = raw[skip:skip + PARAM_BLOCK_BYTES]
        base = np.uint64(self.params.ctypes.data)
        self.ptrs = np.arange(MAX_PARAMS, dtype=np.uint64) * np.uint64(8) + base
        self.ptrs_addr = int(self.ptrs.ctypes.data)
        self.pdl_config: Any = None  # CUlaunchConfig, made on this thread's first PDL launch
        # slot-address arrays of the kernels with other layouts (tensor maps), by offsets
        self.layouts: dict[tuple[int, ...], np.ndarray] = {}

    def ptrs_for(self, offsets: tuple[int, ...] | None) -> int:
        """The address of the slot-address array for a kernel's parameter offsets."""
        if offsets is None:
            return self.ptrs_addr
        ptrs = self.layouts.get(offsets)
        if ptrs is None:
            ptrs = self.layouts[offsets] = (np.array(offsets, dtype=np.uint64)
                                            + np.uint64(self.params.ctypes.data))
        return int(ptrs.ctypes.data)


def _pdl_config(drv: Any) -> Any:
    """A CUlaunchConfig carrying the programmatic-stream-serialization attribute; the
    launch fills in grid, block, shared memory and stream each time."""
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    config = drv.CUlaunchConfig()
    config.attrs = [attr]
    config.numAttrs = 1
    return config


class _Graph:
    __slots__ = ("graph", "exec")

    def __init__(self, graph: Any, exec_: Any) -> None:
        self.graph = graph
        self.exec = exec_


class CudaBackend(GpuBackend):
    """One CUDA device: its primary context, the given PTX modules, streams, graphs, events.

    `modules` maps module name -> PTX text (bytes); each is loaded once with
    cuModuleLoadData. Operations given `stream=None` are fully synchronous: ordered after
    all earlier work on the device and complete on return. Operations given a stream are
    asynchronous on it; with pinned host buffers a copy is complete only after a
    synchronize. `capture_mode` is the default stream-capture mode for `begin_capture`.
    """

    name = "cuda"

    def __init__(self, ordinal: int = 0, modules: Mapping[str, bytes | str] | None = None,
                 capture_mode: str = "thread_local", pdl: bool = True) -> None:
        if capture_mode not in CAPTURE_MODES:
            raise ValueError(f"capture_mode must be one of {CAPTURE_MODES}, got {capture_mode!r}")
        try:
            drv = _load_driver()
            (err,) = drv.cuInit(0)
        except GpuError:
            raise
        except Exception as exc:
            raise GpuError(f"the CUDA driver could not be loaded ({exc}); use the host "
                           "backend on machines without an NVIDIA GPU") from exc
        self._drv = drv
        self._ok((err,), "cuInit")
        count = self._ok(drv.cuDeviceGetCount(), "cuDeviceGetCount")
        if not 0 <= ordinal < count:
            raise GpuError(f"CUDA device {ordinal} requested, but the driver reports {count}")
        self.ordinal = ordinal
        self._dev = self._ok(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self._ctx = self._ok(drv.cuDevicePrimaryCtxRetain(self._dev), "cuDevicePrimaryCtxRetain")
        self._tls = threading.local()
        self._capture_mode = capture_mode
        self._closed = False
        self._facts: DeviceFacts | None = None
        self._modules: dict[str, Any] = {}
        self._pdl_entries: dict[str, frozenset[str]] = {}
        self._digests: dict[str, str] = {}
        self._kernels: dict[tuple[str, str], KernelHandle] = {}
        self._streams: dict[int, Any] = {0: drv.CUstream(0)}
        self._events: list[Any] = []
        self._graphs: set[_Graph] = set()
        self._pinned: list[int] = []
        self._allocs: set[int] = set()
        self._cu_launch = drv.cuLaunchKernel
        self.bind_to_thread()
        major = self._ok(drv.cuDeviceGetAttribute(
            drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self._dev),
            "cuDeviceGetAttribute(compute capability)")
        self.pdl = bool(pdl) and int(major) >= 9
        self.load_modules(modules or {})

    # ---- driver plumbing ----------------------------------------------------------
    def _ok(self, result: tuple, what: str) -> Any:
        """Check a `(CUresult, values...)` tuple; return the value(s) or raise GpuError."""
        err = result[0]
        if err:
            raise GpuError(f"{what} failed: {_describe(self._drv, err)}")
        if len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]

    def bind_to_thread(self) -> None:
        self._ok(self._drv.cuCtxSetCurrent(self._ctx), "cuCtxSetCurrent")
        if getattr(self._tls, "state", None) is None:
            self._tls.state = _ThreadState()

    def _bound(self) -> _ThreadState:
        """This thread's launch state, binding the context on a thread's first call."""
        ts = getattr(self._tls, "state", None)
        if ts is None:
            self.bind_to_thread()
            ts = self._tls.state
        return ts

    def _cu_stream(self, stream: Stream) -> Any:
        s = self._streams.get(stream)
        return s if s is not None else self._drv.CUstream(stream)

    def _synchronous(self, what: str, issue: Any) -> None:
        """Run `issue(stream0)` ordered after, and completed before, everything else."""
        drv = self._drv
        self._ok(drv.cuCtxSynchronize(), f"{what}: cuCtxSynchronize")
        issue(self._streams[0])
        self._ok(drv.cuCtxSynchronize(), f"{what}: cuCtxSynchronize")

    # ---- device facts -------------------------------------------------------------
    def _attribute(self, name: str) -> int:
        """One cuDeviceGetAttribute value, by its CU_DEVICE_ATTRIBUTE_ suffix."""
        attr = getattr(self._drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(self._ok(self._drv.cuDeviceGetAttribute(attr, self._dev),
                            f"cuDeviceGetAttribute({name})"))

    def device_facts(self) -> DeviceFacts:
        """The device's SM count, shared memory (per block opt-in, per SM) and L2 size, read
        once from the driver."""
        if self._facts is None:
            raw = self._ok(self._drv.cuDeviceGetName(256, self._dev), "cuDeviceGetName")
            self._facts = DeviceFacts(
                name=bytes(raw).split(b"\0", 1)[0].decode(errors="replace"),
                compute_capability=(self._attribute("COMPUTE_CAPABILITY_MAJOR"),
                                    self._attribute("COMPUTE_CAPABILITY_MINOR")),
                sm_count=self._attribute("MULTIPROCESSOR_COUNT"),
                shared_memory_per_block=self._attribute(
                    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
                shared_memory_per_sm=self._attribute("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
                l2_cache_bytes=self._attribute("L2_CACHE_SIZE"))
        return self._facts

    def device_info(self) -> dict[str, Any]:
        """Name, compute capability, SM count, memory and driver version of this device."""
        drv = self._drv
        attr = drv.CUdevice_attribute
        raw = self._ok(drv.cuDeviceGetName(256, self._dev), "cuDeviceGetName")
        major = self._ok(drv.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self._dev), "cuDeviceGetAttribute")
        minor = self._ok(drv.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self._dev), "cuDeviceGetAttribute")
        sms = self._ok(drv.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self._dev), "cuDeviceGetAttribute")
        version = self._ok(drv.cuDriverGetVersion(), "cuDriverGetVersion")
        return {"name": bytes(raw).split(b"\0", 1)[0].decode(errors="replace"),
                "ordinal": self.ordinal, "compute_capability": f"{major}.{minor}",
                "num_sms": int(sms), "total_memory": self.total_memory(),
                "driver_cuda_version": f"{version // 1000}.{(version % 1000) // 10}"}

    # ---- memory -------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DevicePtr:
        self._bound()
        ptr = int(self._ok(self._drv.cuMemAlloc(max(int(nbytes), 1)), f"cuMemAlloc({nbytes})"))
        self._allocs.add(ptr)
        return ptr

    def free(self, ptr: DevicePtr) -> None:
        self._bound()
        if ptr not in self._allocs:
            raise GpuError(f"free of {ptr:#x}: not a live allocation of this backend")
        self._ok(self._drv.cuMemFree(ptr), "cuMemFree")
        self._allocs.discard(ptr)

    def copy_h2d(self, dst: DevicePtr, src: np.ndarray, stream: Stream | None = None) -> None:
        self._bound()
        data = host_bytes(src, "copy_h2d")
        n, addr = data.size, data.ctypes.data
        if not n:
            return
        copy = self._drv.cuMemcpyHtoDAsync
        if stream is None:
            self._synchronous("copy_h2d", lambda s: self._ok(copy(dst, addr, n, s),
                                                             "cuMemcpyHtoDAsync"))
        else:
            self._ok(copy(dst, addr, n, self._cu_stream(stream)), "cuMemcpyHtoDAsync")

    def copy_d2h(self, dst: np.ndarray, src: DevicePtr, stream: Stream | None = None) -> None:
        self._bound()
        out = host_bytes(dst, "copy_d2h")
        n, addr = out.size, out.ctypes.data
        if not n:
            return
        copy = self._drv.cuMemcpyDtoHAsync
        if stream is None:
            self._synchronous("copy_d2h", lambda s: self._ok(copy(addr, src, n, s),
                                                             "cuMemcpyDtoHAsync"))
        else:
            self._ok(copy(addr, src, n, self._cu_stream(stream)), "cuMemcpyDtoHAsync")

    def copy_d2d(self, dst: DevicePtr, src: DevicePtr, nbytes: int,
                 stream: Stream | None = None) -> None:
        self._bound()
        if not nbytes:
            return
        copy = self._drv.cuMemcpyDtoDAsync
        if stream is None:
            self._synchronous("copy_d2d", lambda s: self._ok(copy(dst, src, nbytes, s),
                                                             "cuMemcpyDtoDAsync"))
        else:
            self._ok(copy(dst, src, nbytes, self._cu_stream(stream)), "cuMemcpyDtoDAsync")

    def memset(self, ptr: DevicePtr, value: int, nbytes: int,
               stream: Stream | None = None) -> None:
        self._bound()
        if not nbytes:
            return
        fill = self._drv.cuMemsetD8Async
        byte = int(value) & 0xFF
        if stream is None:
            self._synchronous("memset", lambda s: self._ok(fill(ptr, byte, nbytes, s),
                                                           "cuMemsetD8Async"))
        else:
            self._ok(fill(ptr, byte, nbytes, self._cu_stream(stream)), "cuMemsetD8Async")

    def total_memory(self) -> int:
        self._bound()
        _, total = self._ok(self._drv.cuMemGetInfo(), "cuMemGetInfo")
        return int(total)

    def free_memory(self) -> int:
        self._bound()
        free, _ = self._ok(self._drv.cuMemGetInfo(), "cuMemGetInfo")
        return int(free)

    def alloc_host_pinned(self, nbytes: int) -> np.ndarray:
        """Page-locked host memory (cuMemAllocHost), valid until `close()`."""
        self._bound()
        n = max(int(nbytes), 1)
        addr = int(self._ok(self._drv.cuMemAllocHost(n), f"cuMemAllocHost({n})"))
        self._pinned.append(addr)
        return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(addr))[:int(nbytes)]

    def mapped_host_ptr(self, host: np.ndarray) -> DevicePtr | None:
        """cuMemHostGetDevicePointer of page-locked memory from `alloc_host_pinned` (mapped
        under unified addressing)."""
        self._bound()
        return int(self._ok(self._drv.cuMemHostGetDevicePointer(host.ctypes.data, 0),
                            "cuMemHostGetDevicePointer"))

    # ---- kernels ------------------------------------------------------------------
    def load_module(self, name: str, ptx: bytes | str) -> None:
        """Load one PTX module (NUL-terminated for cuModuleLoadData) under `name`."""
        self.load_modules({name: ptx})

    def load_modules(self, modules: Mapping[str, bytes | str]) -> None:
        """Load PTX modules side by side, one driver JIT per thread (or each module's
        precompiled cubin from $ATLAS_SASS_DIR, kernels/sass.py, where one matches).

        cuModuleLoadData compiles PTX to SASS on one host thread and cuda-bindings releases
        the GIL around it, so a cold start (empty JIT cache) of a model's ~100 modules takes
        about its longest module instead of their sum. All or nothing: on any failure the
        modules this call loaded are unloaded and the first error (in name order) raises.
        """
        self._bound()
        for name in modules:
            if name in self._modules:
                raise GpuError(f"PTX module {name!r} is already loaded")

        def load(item: tuple[str, bytes | str]) -> tuple[str, Any, frozenset[str], str]:
            name, ptx = item
            self._ok(self._drv.cuCtxSetCurrent(self._ctx), "cuCtxSetCurrent")
            image = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
            if not image.endswith(b"\0"):
                image += b"\0"
            sass = find_sass(image)
            err, module = self._drv.cuModuleLoadData(sass) if sass else (1, None)
            if err:  # no cubin, or one the device cannot run: JIT-compile the PTX
                module = self._ok(self._drv.cuModuleLoadData(image),
                                  f"cuModuleLoadData(module {name!r})")
            return name, module, pdl_entries(image), hashlib.sha256(image).hexdigest()

        items = sorted(modules.items())
        workers = min(len(items), os.cpu_count() or 1, 32)
        loaded: list[tuple[str, Any, frozenset[str], str]] = []
        errors: list[tuple[str, BaseException]] = []
        with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
            futures = [(name, pool.submit(load, (name, ptx))) for name, ptx in items]
            for name, fut in futures:
                try:
                    loaded.append(fut.result())
                except BaseException as exc:  # collected; re-raised below after cleanup
                    errors.append((name, exc))
        if errors:
            for _, module, _, _ in loaded:
                self._drv.cuModuleUnload(module)
            raise errors[0][1]
        for name, module, entries, digest in loaded:
            self._modules[name] = module
            self._pdl_entries[name] = entries
            self._digests[name] = digest

    @property
    def module_names(self) -> list[str]:
        return sorted(self._modules)

    def module_digest(self, module: str) -> str | None:
        """sha256 of the PTX image the module was loaded from (GpuBackend.module_digest)."""
        return self._digests.get(module)

    def kernel(self, module: str, func: str) -> KernelHandle:
        handle = self._kernels.get((module, func))
        if handle is not None:
            return handle
        self._bound()
        mod = self._modules.get(module)
        if mod is None:
            raise GpuError(f"kernel {module}.{func}: no PTX module {module!r} is loaded "
                           f"(loaded: {', '.join(self.module_names) or 'none'})")
        err, fn = self._drv.cuModuleGetFunction(mod, func.encode())
        if err:
            raise GpuError(f"cuModuleGetFunction: kernel {func!r} not found in PTX module "
                           f"{module!r}: {_describe(self._drv, err)}")
        pdl = self.pdl and func in self._pdl_entries[module]
        handle = self._kernels[(module, func)] = KernelHandle(
            module, func, _Kernel(fn, f"{module}.{func}", pdl))
        return handle

    def set_max_dynamic_shared(self, handle: KernelHandle, nbytes: int) -> None:
        self._bound()
        attr = self._drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        self._ok(self._drv.cuFuncSetAttribute(handle.native.func, attr, int(nbytes)),
                 f"cuFuncSetAttribute({handle.module}.{handle.func}, max dynamic smem {nbytes})")

    def prefer_shared_memory(self, handle: KernelHandle) -> None:
        self._bound()
        attr = self._drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
        self._ok(self._drv.cuFuncSetAttribute(handle.native.func, attr, 100),  # percent: max
                 f"cuFuncSetAttribute({handle.module}.{handle.func}, shared memory carveout)")

    def allow_non_portable_cluster(self, handle: KernelHandle) -> None:
        self._bound()
        attr = self._drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
        self._ok(self._drv.cuFuncSetAttribute(handle.native.func, attr, 1),
                 f"cuFuncSetAttribute({handle.module}.{handle.func}, non-portable cluster size)")

    def resident_blocks(self, handle: KernelHandle, block: int, shared_mem: int,
                        cluster: int) -> int:
        """GpuBackend.resident_blocks: max_active_clusters x cluster for clusters of two or
        more; without a cluster the per-SM count (cuOccupancyMaxActiveBlocksPerMultiprocessor)
        x the SMs, since the cluster query caps a one-block cluster at 8 an SM (gpu174, H100:
        1,056 for the 64-thread GEMV, which the register file holds 16 an SM of)."""
        if cluster > 1:
            return self.max_active_clusters(handle, block, shared_mem, cluster) * cluster
        return self.blocks_per_sm(handle, block, shared_mem) * self.device_facts().sm_count

    def blocks_per_sm(self, handle: KernelHandle, block: int, shared_mem: int) -> int:
        """cuOccupancyMaxActiveBlocksPerMultiprocessor: blocks of `block` threads and
        `shared_mem` bytes of dynamic shared memory one SM holds at once."""
        self._bound()
        return int(self._ok(self._drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            handle.native.func, block, shared_mem),
            f"cuOccupancyMaxActiveBlocksPerMultiprocessor({handle.module}.{handle.func})"))

    def max_active_clusters(self, handle: KernelHandle, block: int, shared_mem: int,
                            cluster: int) -> int:
        """cuOccupancyMaxActiveClusters: how many clusters of `cluster` blocks of `block`
        threads and `shared_mem` bytes of dynamic shared memory the device holds at once
        (the kernel must be opted in to that shared memory first; the driver's model of
        the scheduler: a cluster's blocks share a GPC)."""
        self._bound()
        drv = self._drv
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
        config = drv.CUlaunchConfig()
        # a grid larger than any device holds (32 blocks an SM x thousands of SMs), so that the
        # count is the device's and not the grid's
        config.gridDimX, config.gridDimY, config.gridDimZ = cluster * 65536, 1, 1
        config.blockDimX, config.blockDimY, config.blockDimZ = block, 1, 1
        config.sharedMemBytes = shared_mem
        config.hStream = self._streams[0]
        config.attrs = [attr]
        config.numAttrs = 1
        return int(self._ok(drv.cuOccupancyMaxActiveClusters(handle.native.func, config),
                            f"cuOccupancyMaxActiveClusters({handle.module}.{handle.func})"))

    def tensor_map_2d(self, ptr: DevicePtr, rows: int, cols: int, box_rows: int,
                      box_cols: int = TENSOR_MAP_BOX_COLS) -> bytes:
        """cuTensorMapEncodeTiled of the bf16 matrix [rows][cols] at `ptr` (row pitch cols * 2
        bytes) in [box_rows][box_cols] boxes, 128-byte swizzle, 256-byte L2 promotion (a
        streamed weight row is fetched 256 bytes at a time, as the cp.async kernels ask),
        zero fill past the matrix: the map's 128 bytes (GpuBackend.tensor_map_2d)."""
        check_tensor_map_2d(ptr, rows, cols, box_rows, box_cols)
        drv = self._drv
        u32, u64 = drv.cuuint32_t, drv.cuuint64_t
        tmap = self._ok(drv.cuTensorMapEncodeTiled(
            drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr,
            [u64(cols), u64(rows)], [u64(cols * 2)], [u32(box_cols), u32(box_rows)],
            [u32(1), u32(1)], drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            f"cuTensorMapEncodeTiled([{rows}][{cols}] at {ptr:#x}, box [{box_rows}][{box_cols}])")
        return ctypes.string_at(tmap.getPtr(), TENSOR_MAP_BYTES)

    def launch(self, handle: KernelHandle, grid: Dim3, block: Dim3, shared_mem: int,
               stream: Stream, args: Sequence[tuple[ArgKind, Any]]) -> None:
        ts = getattr(self._tls, "state", None) or self._bound()
        k: _Kernel = handle.native
        kinds, values = zip(*args) if args else ((), ())
        st = k.struct if kinds == k.kinds else k.repack(kinds)
        s = self._streams.get(stream)
        if s is None:
            s = self._drv.CUstream(stream)
        try:
            st.pack_into(ts.params, 0, *values)
        except struct.error as exc:
            raise GpuError(f"{k.label}: bad argument values {values}: {exc}") from None
        # the driver copies the argument bytes before returning, so the block is reusable
        ptrs = ts.ptrs_addr if k.offsets is None else ts.ptrs_for(k.offsets)
        if k.pdl:
            err = self._launch_pdl(ts, k, grid, block, shared_mem, s, ptrs)
        else:
            (err,) = self._cu_launch(k.func, grid[0], grid[1], grid[2], block[0], block[1],
                                     block[2], shared_mem, s, ptrs, 0)
        if err:
            call = "cuLaunchKernelEx" if k.pdl else "cuLaunchKernel"
            raise GpuError(f"{call}({k.label}, grid={tuple(grid)}, block={tuple(block)}, "
                           f"smem={shared_mem}) failed: {_describe(self._drv, err)}")

    def _launch_pdl(self, ts: _ThreadState, k: _Kernel, grid: Dim3, block: Dim3,
                    shared_mem: int, s: Any, ptrs: int) -> Any:
        c = ts.pdl_config
        if c is None:
            c = ts.pdl_config = _pdl_config(self._drv)
        c.gridDimX, c.gridDimY, c.gridDimZ = grid[0], grid[1], grid[2]
        c.blockDimX, c.blockDimY, c.blockDimZ = block[0], block[1], block[2]
        c.sharedMemBytes = shared_mem
        c.hStream = s
        (err,) = self._drv.cuLaunchKernelEx(c, k.func, ptrs, 0)
        return err

    # ---- streams ------------------------------------------------------------------
    def create_stream(self) -> Stream:
        """A non-blocking stream (no implicit synchronization with stream 0)."""
        self._bound()
        flags = int(self._drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
        s = self._ok(self._drv.cuStreamCreate(flags), "cuStreamCreate")
        self._streams[int(s)] = s
        return int(s)

    def synchronize(self, stream: Stream | None = None) -> None:
        self._bound()
        if stream is None:
            self._ok(self._drv.cuCtxSynchronize(), "cuCtxSynchronize")
        else:
            self._ok(self._drv.cuStreamSynchronize(self._cu_stream(stream)),
                     f"cuStreamSynchronize(stream {stream:#x})")

    # ---- graphs -------------------------------------------------------------------
    @property
    def supports_graphs(self) -> bool:
        return True

    def begin_capture(self, stream: Stream, mode: str | None = None) -> None:
        """Start stream capture; `mode` is "global", "thread_local" or "relaxed"."""
        self._bound()
        if stream == 0:
            raise GpuError("begin_capture: the legacy default stream cannot be captured; "
                           "capture on a stream from create_stream()")
        mode = mode or self._capture_mode
        if mode not in CAPTURE_MODES:
            raise ValueError(f"capture mode must be one of {CAPTURE_MODES}, got {mode!r}")
        cm = getattr(self._drv.CUstreamCaptureMode, f"CU_STREAM_CAPTURE_MODE_{mode.upper()}")
        self._ok(self._drv.cuStreamBeginCapture(self._cu_stream(stream), cm),
                 "cuStreamBeginCapture")

    def end_capture(self, stream: Stream) -> GraphHandle:
        self._bound()
        graph = self._ok(self._drv.cuStreamEndCapture(self._cu_stream(stream)),
                         "cuStreamEndCapture")
        try:
            exec_ = self._ok(self._drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        except GpuError:
            self._drv.cuGraphDestroy(graph)
            raise
        g = _Graph(graph, exec_)
        self._graphs.add(g)
        return GraphHandle(g)

    def is_capturing(self, stream: Stream) -> bool:
        """cuStreamIsCapturing: whether `stream` is capturing (or its capture was
        invalidated); a query the driver refuses (the legacy stream while another stream
        captures globally) answers True, the answer that keeps callers from synchronizing."""
        self._bound()
        err, status = self._drv.cuStreamIsCapturing(self._cu_stream(stream))
        return bool(err) or (status
                             != self._drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)

    def launch_graph(self, graph: GraphHandle, stream: Stream) -> None:
        self._bound()
        g: _Graph = graph.native
        if g not in self._graphs:
            raise GpuError("launch_graph: graph was destroyed or belongs to another backend")
        self._ok(self._drv.cuGraphLaunch(g.exec, self._cu_stream(stream)), "cuGraphLaunch")

    def destroy_graph(self, graph: GraphHandle) -> None:
        g: _Graph = graph.native
        if g in self._graphs:
            self._bound()
            self._graphs.discard(g)
            self._ok(self._drv.cuGraphExecDestroy(g.exec), "cuGraphExecDestroy")
            self._ok(self._drv.cuGraphDestroy(g.graph), "cuGraphDestroy")

    # ---- events -------------------------------------------------------------------
    def create_event(self, timing: bool = True) -> EventHandle:
        self._bound()
        flags = int(self._drv.CUevent_flags.CU_EVENT_DEFAULT if timing
                    else self._drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        ev = self._ok(self._drv.cuEventCreate(flags), "cuEventCreate")
        self._events.append(ev)
        return EventHandle(ev)

    def record_event(self, event: EventHandle, stream: Stream) -> None:
        self._bound()
        self._ok(self._drv.cuEventRecord(event.native, self._cu_stream(stream)), "cuEventRecord")

    def stream_wait_event(self, stream: Stream, event: EventHandle) -> None:
        self._bound()
        self._ok(self._drv.cuStreamWaitEvent(self._cu_stream(stream), event.native, 0),
                 "cuStreamWaitEvent")

    def event_synchronize(self, event: EventHandle) -> None:
        self._bound()
        self._ok(self._drv.cuEventSynchronize(event.native), "cuEventSynchronize")

    def event_elapsed_ms(self, start: EventHandle, end: EventHandle) -> float:
        """Milliseconds between two recorded events; waits for `end` to complete."""
        self._bound()
        self._ok(self._drv.cuEventSynchronize(end.native), "cuEventSynchronize")
        return float(self._ok(self._drv.cuEventElapsedTime(start.native, end.native),
                              "cuEventElapsedTime"))

    # ---- lifetime -----------------------------------------------------------------
    def close(self) -> None:
        """Destroy graphs, events and streams, free device and pinned memory, unload
        modules and release the primary context. Arrays from alloc_host_pinned die here.

        Every release is attempted even after one fails (a context with a sticky error
        fails them all); the failures are then raised together.
        """
        if self._closed:
            return
        self._closed = True
        drv = self._drv
        failures: list[str] = []

        def attempt(result: tuple, what: str) -> None:
            if result[0]:
                failures.append(f"{what}: {_describe(drv, result[0])}")

        attempt(drv.cuCtxSetCurrent(self._ctx), "cuCtxSetCurrent")
        attempt(drv.cuCtxSynchronize(), "cuCtxSynchronize")
        for g in self._graphs:
            attempt(drv.cuGraphExecDestroy(g.exec), "cuGraphExecDestroy")
            attempt(drv.cuGraphDestroy(g.graph), "cuGraphDestroy")
        for ev in self._events:
            attempt(drv.cuEventDestroy(ev), "cuEventDestroy")
        for key, s in self._streams.items():
            if key != 0:
                attempt(drv.cuStreamDestroy(s), "cuStreamDestroy")
        for ptr in self._allocs:
            attempt(drv.cuMemFree(ptr), "cuMemFree")
        for addr in self._pinned:
            attempt(drv.cuMemFreeHost(addr), "cuMemFreeHost")
        for mod in self._modules.values():
            attempt(drv.cuModuleUnload(mod), "cuModuleUnload")
        self._graphs, self._events, self._pinned, self._allocs = set(), [], [], set()
        self._streams = {0: self._streams[0]}
        self._modules.clear()
        self._pdl_entries.clear()
        self._digests.clear()
        self._kernels.clear()
        attempt(drv.cuDevicePrimaryCtxRelease(self._dev), "cuDevicePrimaryCtxRelease")
        if failures:
            raise GpuError("CudaBackend.close: " + "; ".join(failures))
