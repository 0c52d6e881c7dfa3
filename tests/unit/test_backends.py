"""The GpuBackend models: host memory semantics, graph capture and replay, events, the mock's
records, backend selection, and CudaBackend's driver plumbing against a scripted driver."""

from __future__ import annotations

import ctypes
import enum
import threading
import types

import numpy as np
import pytest

from atlas.kernels.registry import KernelsNotFound, hardware_for_capability
from atlas.runtime import backend_select, cuda, kernel_abi
from atlas.runtime.backend_select import kernel_hardware
from atlas.runtime.gpu import (H200_FACTS, ArgKind, DeviceFacts, GpuError, KernelLaunch,
                               KernelSig, Param)
from atlas.runtime.host import ALIGNMENT, HostBackend
from atlas.runtime.mock import GraphLaunchRecord, MockGpuBackend

# A toy kernel and its reference, so these tests do not depend on the real kernel set:
# y[i] = a * x[i] + bias for i < n (f32).
AXPY = KernelSig.of("toy", "axpy_f32", "x:ptr y:ptr n:u32 bias:i32 a:f32")


def _axpy_reference(mem, grid, block, x, y, n, bias, a):
    mem.view(y, np.float32, n)[:] = np.float32(a) * mem.view(x, np.float32, n) + np.float32(bias)


REFS = {(AXPY.module, AXPY.func): _axpy_reference}


@pytest.fixture
def host() -> HostBackend:
    return HostBackend(references=REFS, total_memory=1 << 20)


# ---- HostBackend memory -----------------------------------------------------------------

def test_host_allocations_are_aligned_distinct_and_nonzero(host: HostBackend) -> None:
    ptrs = [host.alloc(n) for n in (1, 255, 256, 1000)]
    assert all(p != 0 and p % ALIGNMENT == 0 for p in ptrs)
    assert len(set(ptrs)) == 4
    assert host.num_allocations == 4


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32, np.float32, np.int64])
def test_host_upload_download_round_trip(host: HostBackend, dtype) -> None:
    data = (np.arange(37) * 3 - 20).astype(dtype)
    ptr = host.upload(data)
    np.testing.assert_array_equal(host.download(ptr, dtype, 37), data)


def test_host_interior_pointers_address_inside_the_allocation(host: HostBackend) -> None:
    ptr = host.alloc(64)
    host.memset(ptr, 0, 64)
    host.copy_h2d(ptr + 40, np.array([7, 8, 9], dtype=np.uint8))
    got = host.download(ptr, np.uint8, 64)
    assert got[40:43].tolist() == [7, 8, 9]
    assert got[:40].sum() == 0 and got[43:].sum() == 0
    v = host.view(ptr + 4, np.int32, 2)
    v[:] = [1, -1]
    assert host.download(ptr + 4, np.int32, 2).tolist() == [1, -1]


def test_host_out_of_bounds_and_wild_pointers_raise(host: HostBackend) -> None:
    ptr = host.alloc(16)
    with pytest.raises(GpuError, match="runs past the end"):
        host.view(ptr + 8, np.float32, 3)
    with pytest.raises(GpuError, match="runs past the end"):
        host.copy_h2d(ptr, np.zeros(17, np.uint8))
    with pytest.raises(GpuError, match="not inside any allocation"):
        host.view(ptr - 8, np.uint8, 1)
    with pytest.raises(GpuError, match="not inside any allocation"):
        host.view(0, np.uint8, 1)
    assert host.view(ptr + 16, np.uint8, 0).size == 0  # an end pointer with nothing to read


def test_host_use_after_free_and_double_free_raise(host: HostBackend) -> None:
    ptr = host.alloc(32)
    host.free(ptr)
    with pytest.raises(GpuError, match="use after free"):
        host.view(ptr + 4, np.uint8, 4)
    with pytest.raises(GpuError, match="use after free"):
        host.free(ptr)
    other = host.alloc(32)
    with pytest.raises(GpuError):
        host.free(other + 8)  # only allocation starts can be freed


def test_host_memset_copies_and_overlap(host: HostBackend) -> None:
    ptr = host.alloc(16)
    host.memset(ptr, 0x1FF, 16)  # only the low byte counts, like cuMemsetD8
    assert host.download(ptr, np.uint8, 16).tolist() == [0xFF] * 16
    host.copy_h2d(ptr, np.arange(16, dtype=np.uint8))
    host.copy_d2d(ptr + 4, ptr, 8)  # overlapping: behaves as memmove
    assert host.download(ptr, np.uint8, 16).tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7,
                                                         12, 13, 14, 15]


def test_host_rejects_non_contiguous_host_buffers(host: HostBackend) -> None:
    ptr = host.alloc(64)
    with pytest.raises(ValueError, match="C-contiguous"):
        host.copy_h2d(ptr, np.zeros((4, 4), np.float32).T)
    with pytest.raises(TypeError):
        host.copy_h2d(ptr, b"bytes")  # type: ignore[arg-type]


def test_host_memory_budget_is_enforced_and_reported(host: HostBackend) -> None:
    assert host.total_memory() == 1 << 20
    ptr = host.alloc(1 << 19)
    assert host.free_memory() == (1 << 20) - (1 << 19)
    with pytest.raises(GpuError, match="out of memory"):
        host.alloc(1 << 20)
    host.free(ptr)
    assert host.free_memory() == 1 << 20


# ---- HostBackend kernels, graphs, events ------------------------------------------------

def _axpy_setup(host: HostBackend, n: int = 8):
    x = host.upload(np.arange(n, dtype=np.float32))
    y = host.alloc(4 * n)
    return x, y, KernelLaunch(host, AXPY)


def test_host_launch_runs_the_reference(host: HostBackend) -> None:
    x, y, axpy = _axpy_setup(host)
    axpy(0, 1, 32, 0, x, y, 8, -1, 2.0)
    np.testing.assert_array_equal(host.download(y, np.float32, 8), 2 * np.arange(8) - 1)


def test_host_kernel_without_reference_names_it(host: HostBackend) -> None:
    with pytest.raises(GpuError, match=r"toy\.missing.*toy\.axpy_f32"):
        host.kernel("toy", "missing")
    with pytest.raises(GpuError, match="no reference registered for module 'nope'"):
        host.kernel("nope", "f")


def test_host_reference_errors_name_the_kernel(host: HostBackend) -> None:
    x, y, axpy = _axpy_setup(host)
    with pytest.raises(GpuError, match=r"toy\.axpy_f32: .*past the end"):
        axpy(0, 1, 32, 0, x, y, 9, 0, 1.0)


def test_host_graph_replays_with_current_buffer_contents(host: HostBackend) -> None:
    n = 8
    x, y, axpy = _axpy_setup(host, n)
    stream = host.create_stream()
    host_in = np.zeros(n, np.float32)
    host_out = np.zeros(n, np.float32)
    host.begin_capture(stream)
    host.copy_h2d(x, host_in, stream)
    axpy(stream, 1, 32, 0, x, y, n, 1, 3.0)
    host.copy_d2h(host_out, y, stream)
    graph = host.end_capture(stream)
    assert not host_out.any()  # nothing ran during capture
    for step in range(1, 3):
        host_in[:] = np.arange(n) * step  # the graph reads host memory at replay time
        host.launch_graph(graph, stream)
        np.testing.assert_array_equal(host_out, 3 * np.arange(n) * step + 1)
    host.destroy_graph(graph)
    with pytest.raises(GpuError, match="not a live graph"):
        host.launch_graph(graph, stream)


def test_host_capture_refuses_what_cuda_refuses(host: HostBackend) -> None:
    stream = host.create_stream()
    ptr = host.alloc(16)
    host.begin_capture(stream)
    with pytest.raises(GpuError, match="being captured"):
        host.alloc(16)
    with pytest.raises(GpuError, match="being captured"):
        host.free(ptr)
    with pytest.raises(GpuError, match="being captured"):
        host.synchronize(stream)
    with pytest.raises(GpuError, match="without a stream"):
        host.memset(ptr, 0, 16)
    with pytest.raises(GpuError, match="already being captured"):
        host.begin_capture(stream)
    host.end_capture(stream)
    with pytest.raises(GpuError, match="not being captured"):
        host.end_capture(stream)


def test_host_other_streams_run_eagerly_during_capture(host: HostBackend) -> None:
    captured, eager = host.create_stream(), host.create_stream()
    ptr = host.alloc(4)
    host.begin_capture(captured)
    host.memset(ptr, 5, 4, eager)
    assert host.view(ptr, np.uint8, 4).tolist() == [5] * 4
    host.end_capture(captured)


def test_host_events_measure_elapsed_time(host: HostBackend) -> None:
    start, end = host.create_event(), host.create_event()
    with pytest.raises(GpuError, match="recorded"):
        host.event_elapsed_ms(start, end)
    host.record_event(start, 0)
    host.record_event(end, 0)
    assert host.event_elapsed_ms(start, end) >= 0.0


# ---- MockGpuBackend ---------------------------------------------------------------------

def test_mock_records_launches_with_abi_names() -> None:
    mock = MockGpuBackend()
    x, w, out = mock.alloc(1024), mock.alloc(1024), mock.alloc(1024)
    rms = KernelLaunch(mock, kernel_abi.RMSNORM)
    rms(3, 4, 128, 0, x, w, out, 4, 256, 1e-6)
    rms(3, (2, 1), (64, 1, 1), 16, out, w, x, 2, 256, 1e-5)
    records = mock.drain_launches()
    assert [(r.module, r.func) for r in records] == [("rmsnorm", "rmsnorm_bf16")] * 2
    first = records[0]
    assert first.args == {"x": x, "w": w, "out": out, "rows": 4, "dim": 256, "eps": 1e-6}
    assert (first.grid, first.block, first.shared, first.stream) == ((4, 1, 1), (128, 1, 1),
                                                                     0, 3)
    assert records[1].grid == (2, 1, 1) and records[1].shared == 16
    assert mock.drain_launches() == []


def test_mock_names_unknown_kernels_positionally_and_checks_abi_kinds() -> None:
    mock = MockGpuBackend()
    mock.launch(mock.kernel("custom", "f"), (1, 1, 1), (1, 1, 1), 0, 0,
                [(ArgKind.U32, 5), (ArgKind.F32, 0.5)])
    assert mock.drain_launches()[0].args == {"arg0": 5, "arg1": 0.5}
    with pytest.raises(GpuError, match="do not match the ABI"):
        mock.launch(mock.kernel("rmsnorm", "rmsnorm_bf16"), (1, 1, 1), (1, 1, 1), 0, 0,
                    [(ArgKind.U32, 5)])


def test_mock_capture_records_the_graph_not_the_launch_log() -> None:
    mock = MockGpuBackend()
    stream = mock.create_stream()
    launch = KernelLaunch(mock, kernel_abi.ARGMAX)
    launch(stream, 1, 32, 0, 0x1000, 0x2000, 0x3000, 0x4000, 1, 10)  # eager
    mock.begin_capture(stream)
    launch(stream, 2, 32, 0, 0x1000, 0x2000, 0x3000, 0x4000, 2, 10)
    launch(stream, 3, 32, 0, 0x1000, 0x2000, 0x3000, 0x4000, 3, 10)
    graph = mock.end_capture(stream)
    assert [r.args["rows"] for r in graph.native] == [2, 3]
    assert [r.args["rows"] for r in mock.drain_launches()] == [1]
    mock.launch_graph(graph, stream)
    assert mock.graph_launches == [GraphLaunchRecord(graph.native, stream)]


def test_mock_memory_hygiene() -> None:
    mock = MockGpuBackend(total_memory=4096)
    a = mock.alloc(100)
    b = mock.alloc(200)
    assert a % ALIGNMENT == 0 and b % ALIGNMENT == 0 and a != b
    assert mock.bytes_in_use == 300 and mock.free_memory() == 4096 - 300
    out = np.full(4, 9, np.int32)
    mock.copy_d2h(out, b + 16)
    assert out.tolist() == [0, 0, 0, 0]  # device memory reads as zeros
    with pytest.raises(GpuError, match="not inside a live allocation"):
        mock.copy_h2d(a + 96, np.zeros(8, np.uint8))
    mock.free(a)
    with pytest.raises(GpuError, match="double free"):
        mock.free(a)
    with pytest.raises(GpuError, match="not inside a live allocation"):
        mock.memset(a, 0, 4)
    with pytest.raises(GpuError, match="out of memory"):
        mock.alloc(8192)
    mock.synchronize(None)
    assert mock.op_counts["copy_d2h"] == 1 and mock.op_counts["synchronize"] == 1
    assert mock.live_allocations == {b: 200}


# ---- KernelLaunch argument checking -----------------------------------------------------

def test_kernel_launch_checks_arity_and_types() -> None:
    mock = MockGpuBackend()
    rms = KernelLaunch(mock, kernel_abi.RMSNORM)
    with pytest.raises(TypeError, match="takes 6 arguments"):
        rms(0, 1, 32, 0, 1, 2, 3)
    with pytest.raises(TypeError, match="rows must be an integer"):
        rms(0, 1, 32, 0, 1, 2, 3, 4.0, 8, 1e-6)
    with pytest.raises(ValueError, match="does not fit u32"):
        rms(0, 1, 32, 0, 1, 2, 3, -1, 8, 1e-6)
    assert mock.drain_launches() == []


def test_kernel_launch_converts_numpy_scalars_and_ints_for_floats() -> None:
    mock = MockGpuBackend()
    rms = KernelLaunch(mock, kernel_abi.RMSNORM)
    rms(0, 1, 32, 0, 1, 2, 3, 4, 8, 1.0)                                   # fast path
    rms(0, 1, 32, 0, np.uint64(1), 2, 3, np.int32(4), np.uint32(8), 1)     # converted
    fast, slow = mock.drain_launches()
    assert fast.args == slow.args
    assert all(type(v) is int for k, v in slow.args.items() if k != "eps")
    assert type(slow.args["eps"]) is float


# ---- backend selection ------------------------------------------------------------------

def test_make_backend_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(backend_select.make_backend("host"), HostBackend)
    assert isinstance(backend_select.make_backend("mock"), MockGpuBackend)
    monkeypatch.setattr(cuda, "device_count", lambda: 0)
    assert not backend_select.cuda_available()
    assert isinstance(backend_select.make_backend("auto"), HostBackend)
    with pytest.raises(ValueError, match="unknown backend"):
        backend_select.make_backend("metal")


def test_cuda_available_never_raises_without_a_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken():
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(cuda, "_load_driver", broken)
    assert cuda.device_count() == 0
    assert backend_select.cuda_available() is False


# ---- CudaBackend against a scripted driver ----------------------------------------------

class FakeResult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NOT_FOUND = 500


class FakeHandle:
    """Stands in for CUstream / CUfunction / ...: an int-convertible opaque handle."""

    def __init__(self, value: int = 0) -> None:
        self.value = int(value)

    def __int__(self) -> int:
        return self.value


class FakeDriver:
    """The subset of cuda.bindings.driver CudaBackend uses, with its return conventions:
    every call returns (CUresult, values...). Launches decode the kernelParams array."""

    CUresult = FakeResult
    CUstream = FakeHandle

    class CUstream_flags:
        CU_STREAM_NON_BLOCKING = 1

    class CUevent_flags:
        CU_EVENT_DEFAULT = 0

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
        CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9

    class CUstreamCaptureMode:
        CU_STREAM_CAPTURE_MODE_GLOBAL = 0
        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
        CU_STREAM_CAPTURE_MODE_RELAXED = 2

    class CUlaunchAttributeID:
        CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 3
        CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4

    class CUlaunchAttribute:
        def __init__(self) -> None:
            self.id = None
            self.value = types.SimpleNamespace(programmaticStreamSerializationAllowed=0,
                                               clusterDim=types.SimpleNamespace(x=0, y=0, z=0))

    class CUlaunchConfig:
        attrs: list = []
        numAttrs = 0

    class CUdevice_attribute:
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
        CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97

    #: attribute id -> value: an H200 as its driver reports it
    attributes = {75: 9, 76: 0, 16: 132, 38: 50 << 20, 81: 228 << 10, 97: 227 << 10}

    def __init__(self, functions: dict[str, list[ArgKind]]) -> None:
        self.functions = functions
        self.calls: list[tuple] = []
        self.launches: list[tuple] = []
        self.images: list[bytes] = []
        self.fail: dict[str, FakeResult] = {}
        self.next_ptr = 0x7000_0000
        self.current_threads: set[int] = set()
        self.pinned: list = []

    def _r(self, name: str, *values):
        self.calls.append((name,) + values)
        return (self.fail.get(name, FakeResult.CUDA_SUCCESS),) + values

    def cuInit(self, flags):
        return self._r("cuInit")

    def cuDeviceGetCount(self):
        return self._r("cuDeviceGetCount", 1)

    def cuDeviceGet(self, ordinal):
        return self._r("cuDeviceGet", FakeHandle(ordinal))

    def cuDevicePrimaryCtxRetain(self, dev):
        return self._r("cuDevicePrimaryCtxRetain", FakeHandle(0xC0))

    def cuDevicePrimaryCtxRelease(self, dev):
        return self._r("cuDevicePrimaryCtxRelease")

    def cuCtxSetCurrent(self, ctx):
        self.current_threads.add(threading.get_ident())
        return self._r("cuCtxSetCurrent")

    def cuCtxSynchronize(self):
        return self._r("cuCtxSynchronize")

    def cuGetErrorString(self, err):
        return (FakeResult.CUDA_SUCCESS, f"description of {err.name}".encode())

    def cuModuleLoadData(self, image):
        self.images.append(image)
        return self._r("cuModuleLoadData", FakeHandle(len(self.images)))

    def cuModuleUnload(self, mod):
        return self._r("cuModuleUnload")

    def cuModuleGetFunction(self, mod, name):
        if name.decode() not in self.functions:
            return (FakeResult.CUDA_ERROR_NOT_FOUND, None)
        return self._r("cuModuleGetFunction", name.decode())

    def cuFuncSetAttribute(self, func, attr, value):
        return self._r("cuFuncSetAttribute", func, attr, value)

    #: blocks an SM (any block size) and clusters a device the occupancy queries report
    blocks_per_sm = 10
    clusters = 264

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, func, block, shared_mem):
        return self._r("cuOccupancyMaxActiveBlocksPerMultiprocessor", self.blocks_per_sm)

    def cuOccupancyMaxActiveClusters(self, func, config):
        (attr,) = config.attrs[:config.numAttrs]
        self.calls.append(("cluster", attr.value.clusterDim.x, config.gridDimX))
        return self._r("cuOccupancyMaxActiveClusters", self.clusters)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        kinds = self.functions[f]
        values = []
        for i, kind in enumerate(kinds):
            slot = ctypes.c_uint64.from_address(params + 8 * i).value
            ctype = {ArgKind.PTR: ctypes.c_uint64, ArgKind.U64: ctypes.c_uint64,
                     ArgKind.U32: ctypes.c_uint32, ArgKind.I32: ctypes.c_int32,
                     ArgKind.F32: ctypes.c_float}[kind]
            values.append(ctype.from_address(slot).value)
        self.launches.append((f, (gx, gy, gz), (bx, by, bz), smem, int(stream), values))
        return self._r("cuLaunchKernel")

    def cuLaunchKernelEx(self, config, f, params, extra):
        (attr,) = config.attrs[:config.numAttrs]
        ids = self.CUlaunchAttributeID
        assert attr.id == ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        assert attr.value.programmaticStreamSerializationAllowed == 1
        self.cuLaunchKernel(f, config.gridDimX, config.gridDimY, config.gridDimZ,
                            config.blockDimX, config.blockDimY, config.blockDimZ,
                            config.sharedMemBytes, config.hStream, params, extra)
        self.calls[-1] = ("cuLaunchKernelEx",)
        return (self.fail.get("cuLaunchKernelEx", FakeResult.CUDA_SUCCESS),)

    def cuMemAlloc(self, n):
        self.next_ptr += 1 << 20
        return self._r("cuMemAlloc", FakeHandle(self.next_ptr))

    def cuMemFree(self, ptr):
        return self._r("cuMemFree", ptr)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        return self._r("cuMemcpyHtoDAsync", dst, n, int(stream))

    def cuMemsetD8Async(self, ptr, value, n, stream):
        return self._r("cuMemsetD8Async", ptr, value, n, int(stream))

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        return self._r("cuMemcpyDtoHAsync", src, n, int(stream))

    def cuMemGetInfo(self):
        return self._r("cuMemGetInfo", 100 << 30, 141 << 30)

    def cuDeviceGetName(self, length, dev):
        return self._r("cuDeviceGetName", b"NVIDIA H200".ljust(length, b"\0"))

    def cuDeviceGetAttribute(self, attr, dev):
        return self._r("cuDeviceGetAttribute", self.attributes[attr])

    def cuDriverGetVersion(self):
        return self._r("cuDriverGetVersion", 13000)

    def cuMemAllocHost(self, n):
        buf = ctypes.create_string_buffer(n)
        self.pinned.append(buf)
        return self._r("cuMemAllocHost", ctypes.addressof(buf))

    def cuMemFreeHost(self, addr):
        return self._r("cuMemFreeHost", addr)

    def cuEventCreate(self, flags):
        return self._r("cuEventCreate", FakeHandle(0x9000 + len(self.calls)))

    def cuEventRecord(self, event, stream):
        return self._r("cuEventRecord", int(event), int(stream))

    def cuEventSynchronize(self, event):
        return self._r("cuEventSynchronize", int(event))

    def cuEventElapsedTime(self, start, end):
        return self._r("cuEventElapsedTime", 1.5)

    def cuEventDestroy(self, event):
        return self._r("cuEventDestroy")

    def cuStreamWaitEvent(self, stream, event, flags):
        return self._r("cuStreamWaitEvent", int(stream), int(event), flags)

    def cuStreamSynchronize(self, stream):
        return self._r("cuStreamSynchronize", int(stream))

    def cuStreamCreate(self, flags):
        return self._r("cuStreamCreate", FakeHandle(0x5000 + len(self.calls)))

    def cuStreamDestroy(self, stream):
        return self._r("cuStreamDestroy")

    def cuStreamBeginCapture(self, stream, mode):
        return self._r("cuStreamBeginCapture", int(stream), mode)

    def cuStreamEndCapture(self, stream):
        return self._r("cuStreamEndCapture", FakeHandle(0x6000))

    def cuGraphInstantiate(self, graph, flags):
        return self._r("cuGraphInstantiate", FakeHandle(0x6001))

    def cuGraphLaunch(self, exec_, stream):
        return self._r("cuGraphLaunch", int(exec_), int(stream))

    def cuGraphExecDestroy(self, exec_):
        return self._r("cuGraphExecDestroy")

    def cuGraphDestroy(self, graph):
        return self._r("cuGraphDestroy")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    drv = FakeDriver({"axpy_f32": [p.kind for p in AXPY.params],
                      "wide": [ArgKind.PTR, ArgKind.U64, ArgKind.I32, ArgKind.F32, ArgKind.U32]})
    monkeypatch.setattr(cuda, "_load_driver", lambda: drv)
    return drv


def test_cuda_loads_modules_nul_terminated(fake: FakeDriver) -> None:
    be = cuda.CudaBackend(modules={"toy": b".version 8.0", "other": "// text\0"})
    assert sorted(fake.images) == [b".version 8.0\0", b"// text\0"]  # loaded side by side
    assert be.module_names == ["other", "toy"]


def test_cuda_module_load_is_all_or_nothing(fake: FakeDriver,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    be = cuda.CudaBackend(modules={"keep": b"ptx"})
    real_load, unloaded = fake.cuModuleLoadData, []

    def load(image: bytes):
        if image.startswith(b"bad"):
            return (FakeResult.CUDA_ERROR_INVALID_VALUE, None)
        return real_load(image)

    monkeypatch.setattr(fake, "cuModuleLoadData", load)
    monkeypatch.setattr(fake, "cuModuleUnload",
                        lambda mod: (unloaded.append(mod), (FakeResult.CUDA_SUCCESS,))[1])
    with pytest.raises(GpuError, match="module 'b'"):
        be.load_modules({"a": b"ok", "b": b"bad", "c": b"ok too"})
    assert be.module_names == ["keep"]  # nothing half-applied
    assert len(unloaded) == 2  # the two that compiled are released
    with pytest.raises(GpuError, match="already loaded"):
        be.load_modules({"keep": b"ptx"})


def test_cuda_launch_packs_every_argument_kind(fake: FakeDriver) -> None:
    be = cuda.CudaBackend(modules={"toy": b"ptx"})
    wide = KernelLaunch(be, KernelSig("toy", "wide", (
        Param("p", ArgKind.PTR), Param("u", ArgKind.U64), Param("i", ArgKind.I32),
        Param("f", ArgKind.F32), Param("n", ArgKind.U32))))
    wide(0, (3, 2), 128, 4096, 0xDEAD_BEEF_F00D, 2**64 - 1, -7, 0.25, 2**32 - 1)
    wide(0, 1, 1, 0, 1, 2, 3, -1.5, 4)  # same packer, new values
    (f, grid, block, smem, stream, values), second = fake.launches
    assert (f, grid, block, smem, stream) == ("wide", (3, 2, 1), (128, 1, 1), 4096, 0)
    assert values == [0xDEAD_BEEF_F00D, 2**64 - 1, -7, 0.25, 2**32 - 1]
    assert second[-1] == [1, 2, 3, -1.5, 4]


# Two entries in one module: only the first waits on its programmatic dependency.
_PDL_PTX = b"""
.visible .entry axpy_f32(
  .param .u64 p0
)
{
  griddepcontrol.wait;
  ret;
}
.func (.reg .b32 r) helper(
)
{
  ret;
}
.visible .entry wide(
  .param .u64 p0
)
{
  ret;
}
"""


def test_cuda_launches_only_waiting_kernels_with_pdl(fake: FakeDriver) -> None:
    be = cuda.CudaBackend(modules={"toy": _PDL_PTX})
    assert be.pdl  # compute capability 9.0 in the fake
    KernelLaunch(be, AXPY)(0, (2, 1), 64, 0, 1, 2, 3, 4, 5.0)
    KernelLaunch(be, KernelSig("toy", "wide", ()))(0, 1, 1, 0)
    assert [c[0] for c in fake.calls if c[0].startswith("cuLaunch")] == [
        "cuLaunchKernelEx", "cuLaunchKernel"]
    assert fake.launches[0][:4] == ("axpy_f32", (2, 1, 1), (64, 1, 1), 0)
    assert fake.launches[0][5] == [1, 2, 3, 4, 5.0]  # same argument block either way
    fake.fail["cuLaunchKernelEx"] = FakeResult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(GpuError, match=r"cuLaunchKernelEx\(toy.axpy_f32"):
        KernelLaunch(be, AXPY)(0, 1, 1, 0, 1, 2, 3, 4, 5.0)


def test_cuda_pdl_off_launches_everything_plainly(fake: FakeDriver) -> None:
    be = cuda.CudaBackend(modules={"toy": _PDL_PTX}, pdl=False)
    KernelLaunch(be, AXPY)(0, 1, 1, 0, 1, 2, 3, 4, 5.0)
    assert not be.pdl and [c[0] for c in fake.calls if c[0].startswith("cuLaunch")] == [
        "cuLaunchKernel"]


def test_cuda_errors_name_the_call_and_the_result(fake: FakeDriver) -> None:
    be = cuda.CudaBackend(modules={"toy": b"ptx"})
    with pytest.raises(GpuError, match=r"'nope' not found in PTX module 'toy'.*NOT_FOUND"):
        be.kernel("toy", "nope")
    with pytest.raises(GpuError, match=r"no PTX module 'gone' is loaded \(loaded: toy\)"):
        be.kernel("gone", "f")
    fake.fail["cuMemAlloc"] = FakeResult.CUDA_ERROR_OUT_OF_MEMORY
    with pytest.raises(GpuError, match=r"cuMemAlloc\(64\) failed: CUDA_ERROR_OUT_OF_MEMORY "
                                       r"\(description of CUDA_ERROR_OUT_OF_MEMORY\)"):
        be.alloc(64)
    fake.fail["cuLaunchKernel"] = FakeResult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(GpuError, match=r"cuLaunchKernel\(toy.axpy_f32, grid=\(1, 1, 1\)"):
        KernelLaunch(be, AXPY)(0, 1, 1, 0, 1, 2, 3, 4, 5.0)


def test_cuda_unstreamed_operations_are_fully_synchronous(fake: FakeDriver) -> None:
    be = cuda.CudaBackend()
    ptr = be.alloc(16)
    fake.calls.clear()
    be.copy_h2d(ptr, np.zeros(4, np.float32))
    assert [c[0] for c in fake.calls] == ["cuCtxSynchronize", "cuMemcpyHtoDAsync",
                                          "cuCtxSynchronize"]
    stream = be.create_stream()
    fake.calls.clear()
    be.memset(ptr, 0x1AB, 16, stream)
    assert fake.calls == [("cuMemsetD8Async", ptr, 0xAB, 16, stream)]


def test_cuda_graph_capture_sequence(fake: FakeDriver) -> None:
    be = cuda.CudaBackend(modules={"toy": b"ptx"})
    with pytest.raises(GpuError, match="legacy default stream"):
        be.begin_capture(0)
    stream = be.create_stream()
    axpy = KernelLaunch(be, AXPY)
    be.begin_capture(stream, mode="global")
    axpy(stream, 1, 32, 0, 1, 2, 3, 4, 5.0)
    graph = be.end_capture(stream)
    be.launch_graph(graph, stream)
    names = [c[0] for c in fake.calls]
    assert names[-5:] == ["cuStreamBeginCapture", "cuLaunchKernel", "cuStreamEndCapture",
                          "cuGraphInstantiate", "cuGraphLaunch"]
    assert fake.calls[-5][1:] == (stream, 0)  # global mode
    be.destroy_graph(graph)
    with pytest.raises(GpuError, match="destroyed"):
        be.launch_graph(graph, stream)


def test_cuda_binds_the_context_on_each_new_thread(fake: FakeDriver) -> None:
    be = cuda.CudaBackend(modules={"toy": b"ptx"})
    launch = KernelLaunch(be, AXPY)
    worker = threading.Thread(target=lambda: launch(0, 1, 1, 0, 1, 2, 3, 4, 5.0))
    worker.start()
    worker.join()
    assert worker.ident in fake.current_threads and len(fake.launches) == 1


def test_cuda_set_max_dynamic_shared_and_close(fake: FakeDriver) -> None:
    be = cuda.CudaBackend(modules={"toy": b"ptx"})
    handle = be.kernel("toy", "axpy_f32")
    be.set_max_dynamic_shared(handle, 100 * 1024)
    assert fake.calls[-1] == ("cuFuncSetAttribute", "axpy_f32", 8, 100 * 1024)
    be.prefer_shared_memory(handle)  # the carveout preference, in percent: all shared
    assert fake.calls[-1] == ("cuFuncSetAttribute", "axpy_f32", 9, 100)
    be.alloc(8)
    be.create_stream()
    be.close()
    closing = [c[0] for c in fake.calls]
    for name in ("cuStreamDestroy", "cuMemFree", "cuModuleUnload", "cuDevicePrimaryCtxRelease"):
        assert name in closing
    be.close()  # idempotent


def test_cuda_resident_blocks_ask_the_per_sm_query_without_a_cluster(fake: FakeDriver) -> None:
    """One-block launches take the per-SM occupancy times the SMs: the cluster query caps
    them at 8 an SM (gpu174); clusters of two or more keep the cluster query (a cluster's
    blocks must share a GPC), asked over a grid larger than any device holds."""
    be = cuda.CudaBackend(modules={"toy": b"ptx"})
    handle = be.kernel("toy", "axpy_f32")
    assert be.resident_blocks(handle, 128, 0, 1) == 10 * 132
    assert ("cuOccupancyMaxActiveBlocksPerMultiprocessor", 10) in fake.calls
    assert not any(c[0] == "cluster" for c in fake.calls)
    assert be.resident_blocks(handle, 128, 4096, 4) == 264 * 4
    assert ("cluster", 4, 4 * 65536) in fake.calls
    fake.fail["cuOccupancyMaxActiveBlocksPerMultiprocessor"] = FakeResult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(GpuError, match=r"cuOccupancyMaxActiveBlocksPerMultiprocessor\(toy"):
        be.resident_blocks(handle, 2048, 0, 1)


def test_cuda_device_facts_come_from_the_driver(fake: FakeDriver) -> None:
    fake.attributes = {**fake.attributes, 75: 12, 76: 1, 16: 48, 38: 24 << 20}  # a GB10
    facts = cuda.CudaBackend().device_facts()
    assert facts == DeviceFacts(name="NVIDIA H200", compute_capability=(12, 1), sm_count=48,
                                shared_memory_per_block=227 << 10,
                                shared_memory_per_sm=228 << 10, l2_cache_bytes=24 << 20)
    assert cuda.device_capability(0) == (12, 1)
    archs = {"gb10": "sm_121", "hopper": "sm_90a"}
    assert kernel_hardware("cuda", None, archs) == "gb10"
    assert kernel_hardware("host", None, archs) == "hopper"  # the default, not the first


def test_backends_without_a_device_report_the_documented_h200_facts() -> None:
    for backend in (HostBackend(), MockGpuBackend()):
        assert backend.device_facts() is H200_FACTS
    assert (H200_FACTS.sm_count, H200_FACTS.compute_capability) == (132, (9, 0))


@pytest.mark.parametrize("capability, hw", [
    ((9, 0), "hopper"), ((12, 1), "gb10"), ((12, 3), "gb10"), ((8, 6), None), ((9, 1), None),
    ((10, 0), None)])
def test_hardware_for_capability(capability: tuple[int, int], hw: str | None) -> None:
    """sm_90a (arch-specific) runs only on 9.0; plain sm_121 on later 12.x minors too."""
    archs = {"gb10": "sm_121", "hopper": "sm_90a"}
    if hw is None:
        with pytest.raises(KernelsNotFound, match="built: gb10 \\(sm_121\\), hopper"):
            hardware_for_capability(archs, capability)
    else:
        assert hardware_for_capability(archs, capability) == hw


def test_cuda_device_info_pinned_memory_and_events(fake: FakeDriver) -> None:
    be = cuda.CudaBackend()
    info = be.device_info()
    assert info == {"name": "NVIDIA H200", "ordinal": 0, "compute_capability": "9.0",
                    "num_sms": 132, "total_memory": 141 << 30, "driver_cuda_version": "13.0"}
    assert be.free_memory() == 100 << 30
    pinned = be.alloc_host_pinned(64)
    assert pinned.dtype == np.uint8 and pinned.size == 64
    pinned.view(np.float32)[:] = 2.5  # writable, and really the driver's buffer
    assert np.frombuffer(fake.pinned[0], np.float32, 16).tolist() == [2.5] * 16
    stream, other = be.create_stream(), be.create_stream()
    start, end = be.create_event(), be.create_event()
    be.record_event(start, stream)
    be.record_event(end, stream)
    be.stream_wait_event(other, end)
    assert be.event_elapsed_ms(start, end) == 1.5
    assert [c[0] for c in fake.calls[-2:]] == ["cuEventSynchronize", "cuEventElapsedTime"]
    be.synchronize(other)
    assert fake.calls[-1] == ("cuStreamSynchronize", other)
    out = np.zeros(4, np.float32)
    be.copy_d2h(out, 0x7000_1000, stream)
    assert fake.calls[-1] == ("cuMemcpyDtoHAsync", 0x7000_1000, 16, stream)
    be.close()
    closing = [c[0] for c in fake.calls]
    assert closing.count("cuEventDestroy") == 2 and "cuMemFreeHost" in closing


def test_host_memory_follows_atlas_host_memory_gib(monkeypatch) -> None:
    from atlas.runtime.backend_select import host_memory_bytes, make_backend

    monkeypatch.delenv("ATLAS_HOST_MEMORY_GIB", raising=False)
    assert host_memory_bytes() == 8 << 30
    monkeypatch.setenv("ATLAS_HOST_MEMORY_GIB", "0.5")
    assert make_backend("host").total_memory() == 1 << 29
    for bad in ("lots", "0", "-2"):
        monkeypatch.setenv("ATLAS_HOST_MEMORY_GIB", bad)
        with pytest.raises(ValueError, match="ATLAS_HOST_MEMORY_GIB"):
            host_memory_bytes()


def test_kernel_sig_hash_is_cached_and_rebuilt_where_unpickled() -> None:
    """KernelSig caches its hash (launch builders look signatures up on every launch); an
    equal signature hashes equal, and one unpickled in another process (another str hash
    seed) finds that process's dict entries."""
    import dataclasses
    import os
    import pickle
    import subprocess
    import sys

    sig = kernel_abi.RMSNORM
    twin = KernelSig.of(sig.module, sig.func, " ".join(f"{p.name}:{p.kind.value}"
                                                        for p in sig.params))
    assert twin == sig and hash(twin) == hash(sig) and {sig: 1}[twin] == 1
    other = dataclasses.replace(sig, func="other")
    assert other != sig and hash(other) == hash((sig.module, "other", sig.params))
    code = ("import pickle, sys; from atlas.runtime import kernel_abi as k; "
            "s = pickle.loads(sys.stdin.buffer.read()); "
            "assert s == k.RMSNORM and {k.RMSNORM: 1}[s] == 1; print('ok')")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(sig), env=env,
                          capture_output=True, check=True)
    assert done.stdout.strip() == b"ok"
