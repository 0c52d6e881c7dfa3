"""CudaBackend on a real GPU: memory, pinned async copies, launches with every argument kind,
dynamic shared memory opt-in, graph capture and replay, events, other threads, and a kernel
from a real PTX set. Marked `gpu`: skipped where no CUDA device is usable."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from atlas.runtime.cuda import CudaBackend
from atlas.runtime.gpu import GpuError, KernelLaunch, KernelSig

pytestmark = pytest.mark.gpu

#: The probe kernels, for reading; PROBE_PTX is `nvcc -ptx -arch=sm_90 -O3` of exactly this
#: (sm_90 PTX so that any Hopper-or-newer driver JIT-compiles it).
PROBE_SOURCE = r"""
extern "C" __global__ void probe_axpy(const float* x, float* y, unsigned n, int bias, float a,
                                      unsigned long long tag, unsigned long long* tag_out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + (float)bias;
  if (i == 0) *tag_out = tag;
}
extern "C" __global__ void probe_reverse_smem(const float* in, float* out, unsigned n) {
  extern __shared__ float buf[];
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) buf[i] = in[i];
  __syncthreads();
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
}
"""

PROBE_PTX = r"""
.version 9.0
.target sm_90
.address_size 64
.extern .shared .align 16 .b8 buf[];
.visible .entry probe_axpy(
	.param .u64 probe_axpy_param_0,
	.param .u64 probe_axpy_param_1,
	.param .u32 probe_axpy_param_2,
	.param .u32 probe_axpy_param_3,
	.param .f32 probe_axpy_param_4,
	.param .u64 probe_axpy_param_5,
	.param .u64 probe_axpy_param_6
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<7>;
	.reg .b64 	%rd<11>;
	ld.param.u64 	%rd1, [probe_axpy_param_0];
	ld.param.u64 	%rd2, [probe_axpy_param_1];
	ld.param.u32 	%r3, [probe_axpy_param_2];
	ld.param.u32 	%r2, [probe_axpy_param_3];
	ld.param.f32 	%f1, [probe_axpy_param_4];
	ld.param.u64 	%rd3, [probe_axpy_param_5];
	ld.param.u64 	%rd4, [probe_axpy_param_6];
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %ctaid.x;
	mov.u32 	%r6, %tid.x;
	mad.lo.s32 	%r1, %r5, %r4, %r6;
	setp.ge.u32 	%p1, %r1, %r3;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd5, %rd1;
	mul.wide.u32 	%rd6, %r1, 4;
	add.s64 	%rd7, %rd5, %rd6;
	ld.global.f32 	%f2, [%rd7];
	cvt.rn.f32.s32 	%f3, %r2;
	fma.rn.f32 	%f4, %f2, %f1, %f3;
	cvta.to.global.u64 	%rd8, %rd2;
	add.s64 	%rd9, %rd8, %rd6;
	st.global.f32 	[%rd9], %f4;
$L__BB0_2:
	setp.ne.s32 	%p2, %r1, 0;
	@%p2 bra 	$L__BB0_4;
	cvta.to.global.u64 	%rd10, %rd4;
	st.global.u64 	[%rd10], %rd3;
$L__BB0_4:
	ret;
}
.visible .entry probe_reverse_smem(
	.param .u64 probe_reverse_smem_param_0,
	.param .u64 probe_reverse_smem_param_1,
	.param .u32 probe_reverse_smem_param_2
)
{
	.reg .pred 	%p<5>;
	.reg .f32 	%f<3>;
	.reg .b32 	%r<19>;
	.reg .b64 	%rd<9>;
	ld.param.u64 	%rd3, [probe_reverse_smem_param_0];
	ld.param.u64 	%rd4, [probe_reverse_smem_param_1];
	ld.param.u32 	%r8, [probe_reverse_smem_param_2];
	mov.u32 	%r18, %tid.x;
	setp.ge.u32 	%p1, %r18, %r8;
	@%p1 bra 	$L__BB1_3;
	mov.u32 	%r2, %ntid.x;
	cvta.to.global.u64 	%rd1, %rd3;
	mov.u32 	%r10, buf;
	mov.u32 	%r17, %r18;
$L__BB1_2:
	mul.wide.u32 	%rd5, %r17, 4;
	add.s64 	%rd6, %rd1, %rd5;
	ld.global.f32 	%f1, [%rd6];
	shl.b32 	%r9, %r17, 2;
	add.s32 	%r11, %r10, %r9;
	st.shared.f32 	[%r11], %f1;
	add.s32 	%r17, %r17, %r2;
	setp.lt.u32 	%p2, %r17, %r8;
	@%p2 bra 	$L__BB1_2;
$L__BB1_3:
	bar.sync 	0;
	@%p1 bra 	$L__BB1_6;
	mov.u32 	%r5, %ntid.x;
	cvta.to.global.u64 	%rd2, %rd4;
	mov.u32 	%r15, buf;
$L__BB1_5:
	not.b32 	%r12, %r18;
	add.s32 	%r13, %r12, %r8;
	shl.b32 	%r14, %r13, 2;
	add.s32 	%r16, %r15, %r14;
	ld.shared.f32 	%f2, [%r16];
	mul.wide.u32 	%rd7, %r18, 4;
	add.s64 	%rd8, %rd2, %rd7;
	st.global.f32 	[%rd8], %f2;
	add.s32 	%r18, %r18, %r5;
	setp.lt.u32 	%p4, %r18, %r8;
	@%p4 bra 	$L__BB1_5;
$L__BB1_6:
	ret;
}
"""

AXPY = KernelSig.of("probe", "probe_axpy",
                    "x:ptr y:ptr n:u32 bias:i32 a:f32 tag:u64 tag_out:ptr")
REVERSE = KernelSig.of("probe", "probe_reverse_smem", "in:ptr out:ptr n:u32")


@pytest.fixture(scope="module")
def gpu():
    backend = CudaBackend(modules={"probe": PROBE_PTX.encode()})
    yield backend
    backend.close()


def _axpy_buffers(gpu: CudaBackend, n: int):
    x = gpu.upload(np.arange(n, dtype=np.float32))
    y = gpu.alloc(4 * n)
    tag_out = gpu.alloc(8)
    return x, y, tag_out


def test_device_facts(gpu: CudaBackend) -> None:
    info = gpu.device_info()
    assert info["name"] and info["num_sms"] > 0
    assert 0 < gpu.free_memory() <= gpu.total_memory() == info["total_memory"]
    facts = gpu.device_facts()
    print(f"device facts: {facts}")  # the run's log shows what the driver reported
    assert facts.sm_count == info["num_sms"]
    assert f"{facts.compute_capability[0]}.{facts.compute_capability[1]}" == \
        info["compute_capability"]
    assert 48 << 10 < facts.shared_memory_per_block <= facts.shared_memory_per_sm
    assert facts.l2_cache_bytes >= 1 << 20
    if facts.compute_capability == (9, 0):  # the H100/H200 test machine: sm_90a sets run here
        from atlas.runtime.backend_select import kernel_hardware
        assert kernel_hardware("cuda", gpu, {"gb10": "sm_121", "hopper": "sm_90a"}) == "hopper"
        assert facts.shared_memory_per_block == 227 << 10


def test_memory_round_trips(gpu: CudaBackend) -> None:
    data = np.arange(-50, 50, dtype=np.int32)
    ptr = gpu.upload(data)
    np.testing.assert_array_equal(gpu.download(ptr, np.int32, 100), data)
    gpu.copy_h2d(ptr + 40, np.array([7, 8], dtype=np.int32))  # interior pointer
    got = gpu.download(ptr, np.int32, 100)
    assert got[10:12].tolist() == [7, 8] and got[9] == -41 and got[12] == -38
    gpu.memset(ptr, 0xAB, 16)
    assert gpu.download(ptr, np.uint8, 16).tolist() == [0xAB] * 16
    other = gpu.alloc(400)
    gpu.copy_d2d(other, ptr, 400)
    np.testing.assert_array_equal(gpu.download(other, np.int32, 100),
                                  gpu.download(ptr, np.int32, 100))
    gpu.free(ptr)
    gpu.free(other)
    with pytest.raises(GpuError, match="not a live allocation"):
        gpu.free(ptr)


def test_pinned_memory_async_copies_on_a_stream(gpu: CudaBackend) -> None:
    stream = gpu.create_stream()
    src = gpu.alloc_host_pinned(4096).view(np.float32)
    dst = gpu.alloc_host_pinned(4096).view(np.float32)
    src[:] = np.linspace(-1, 1, 1024, dtype=np.float32)
    dst[:] = 0
    ptr = gpu.alloc(4096)
    gpu.copy_h2d(ptr, src, stream)
    gpu.memset(ptr, 0, 16, stream)
    gpu.copy_d2h(dst, ptr, stream)
    gpu.synchronize(stream)
    assert not dst[:4].any()
    np.testing.assert_array_equal(dst[4:], src[4:])
    gpu.free(ptr)


def test_launch_passes_every_argument_kind(gpu: CudaBackend) -> None:
    n = 1000
    x, y, tag_out = _axpy_buffers(gpu, n)
    axpy = KernelLaunch(gpu, AXPY)
    tag = 0xFEED_FACE_CAFE_BEEF
    axpy(0, -(-n // 256), 256, 0, x, y, n, -3, 0.5, tag, tag_out)
    gpu.synchronize()
    np.testing.assert_array_equal(gpu.download(y, np.float32, n),
                                  np.float32(0.5) * np.arange(n, dtype=np.float32) - 3)
    assert int(gpu.download(tag_out, np.uint64, 1)[0]) == tag


def test_missing_kernels_are_named(gpu: CudaBackend) -> None:
    with pytest.raises(GpuError, match="'nope' not found in PTX module 'probe'"):
        gpu.kernel("probe", "nope")
    with pytest.raises(GpuError, match="no PTX module 'absent'"):
        gpu.kernel("absent", "f")


def test_dynamic_shared_memory_above_48k_needs_the_opt_in(gpu: CudaBackend) -> None:
    n = 16384  # 64 KiB of floats
    data = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    src, dst = gpu.upload(data), gpu.alloc(4 * n)
    reverse = KernelLaunch(gpu, REVERSE)
    with pytest.raises(GpuError, match="cuLaunchKernel"):
        reverse(0, 1, 1024, 4 * n, src, dst, n)
    gpu.set_max_dynamic_shared(reverse.handle, 4 * n)
    reverse(0, 1, 1024, 4 * n, src, dst, n)
    np.testing.assert_array_equal(gpu.download(dst, np.float32, n), data[::-1])


@pytest.mark.parametrize("mode", ["thread_local", "global"])
def test_graph_replays_with_current_inputs(gpu: CudaBackend, mode: str) -> None:
    n = 512
    x, y, tag_out = _axpy_buffers(gpu, n)
    axpy = KernelLaunch(gpu, AXPY)
    stream = gpu.create_stream()
    host_in = gpu.alloc_host_pinned(4 * n).view(np.float32)
    host_out = gpu.alloc_host_pinned(4 * n).view(np.float32)
    host_in[:] = 0
    host_out[:] = -1
    gpu.begin_capture(stream, mode=mode)
    gpu.copy_h2d(x, host_in, stream)
    axpy(stream, 2, 256, 0, x, y, n, 1, 2.0, 7, tag_out)
    gpu.copy_d2h(host_out, y, stream)
    graph = gpu.end_capture(stream)
    assert (host_out == -1).all()  # captured, not run
    for step in (1, 2):
        host_in[:] = np.arange(n, dtype=np.float32) * step
        gpu.launch_graph(graph, stream)
        gpu.synchronize(stream)
        np.testing.assert_array_equal(host_out, 2 * np.arange(n, dtype=np.float32) * step + 1)
    gpu.destroy_graph(graph)


def test_events_time_gpu_work(gpu: CudaBackend) -> None:
    n = 1 << 20
    x, y, tag_out = _axpy_buffers(gpu, n)
    axpy = KernelLaunch(gpu, AXPY)
    stream = gpu.create_stream()
    start, end = gpu.create_event(), gpu.create_event()
    gpu.record_event(start, stream)
    for _ in range(20):
        axpy(stream, n // 256, 256, 0, x, y, n, 0, 1.0, 0, tag_out)
    gpu.record_event(end, stream)
    other = gpu.create_stream()
    gpu.stream_wait_event(other, end)
    gpu.synchronize(other)
    assert gpu.event_elapsed_ms(start, end) > 0.0


def test_launches_from_another_thread_bind_the_context(gpu: CudaBackend) -> None:
    n = 256
    x, y, tag_out = _axpy_buffers(gpu, n)
    axpy = KernelLaunch(gpu, AXPY)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            axpy(0, 1, 256, 0, x, y, n, 5, 1.0, 0, tag_out)
            gpu.synchronize()
        except BaseException as exc:  # re-raised in the test thread below
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    np.testing.assert_array_equal(gpu.download(y, np.float32, n),
                                  np.arange(n, dtype=np.float32) + 5)


def test_a_real_ptx_set_runs_its_check_cases(hopper_ptx_backend) -> None:
    from atlas.runtime.kernel_check import all_cases, check

    ptx_set, backend = hopper_ptx_backend
    first_of_module = {}
    for case in all_cases(seed=0):
        if case.module in ptx_set.modules:
            first_of_module.setdefault(case.module, case)
    assert first_of_module
    for case in first_of_module.values():
        result = check(backend, case)
        assert result.passed, f"{case.name}: {result.detail}"
