"""The one-shot all-reduce on a real GPU: routed by NcclComm for small bf16 sums and captured
in a CUDA graph (one rank), and two processes on the same GPU mapping each other's
workspaces over CUDA IPC and summing through them (the two-GPU protocol, on one device).
Marked `gpu`: skipped where no CUDA device or no built PTX set is usable."""

from __future__ import annotations

import multiprocessing as mp
import socket

import numpy as np
import pytest

from atlas.comm.nccl import NcclComm
from atlas.comm.oneshot import OneShotAllReduce
from atlas.comm.transport import Star
from atlas.core.dtype import DType
from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits

pytestmark = pytest.mark.gpu
COUNT = 5120 * 4


def test_small_bf16_sums_take_the_oneshot_kernel_in_a_graph(hopper_ptx_backend) -> None:
    _, gpu = hopper_ptx_backend
    star = Star.connect(0, 1, "127.0.0.1", 0)
    comm = NcclComm(star, oneshot=OneShotAllReduce(gpu, star, COUNT))
    s = gpu.create_stream()
    x = np.linspace(-4, 4, COUNT).astype(np.float32)
    buf = gpu.upload(f32_to_bf16_bits(x))
    gpu.begin_capture(s)
    comm.all_reduce(buf, COUNT, DType.BF16, s)
    graph = gpu.end_capture(s)
    for _ in range(3):  # both halves of the double buffer, graph replays
        gpu.launch_graph(graph, s)
    gpu.synchronize(s)
    np.testing.assert_array_equal(bf16_bits_to_f32(gpu.download(buf, np.uint16, COUNT)),
                                  bf16_bits_to_f32(f32_to_bf16_bits(x)))
    assert not comm._oneshot.timed_out()
    gpu.destroy_graph(graph)
    comm.close()


def _rank(rank: int, port: int, out: "mp.Queue") -> None:
    from atlas.kernels.registry import load_registry
    from atlas.runtime.cuda import CudaBackend
    registry = load_registry()
    target = next(t for t in registry.targets() if t.hw == "hopper")
    ptx = registry.select_target(target.hw, target.model, target.quant)
    gpu = CudaBackend(0, modules={n: m.image() for n, m in ptx.modules.items()})
    one = OneShotAllReduce(gpu, Star.connect(rank, 2, "127.0.0.1", port, 60.0), COUNT)
    s = gpu.create_stream()
    sums = []
    for call in range(3):
        buf = gpu.upload(f32_to_bf16_bits(np.full(COUNT, rank + 1 + call, np.float32)))
        one.all_reduce(buf, COUNT, s)
        gpu.synchronize(s)
        sums.append(np.unique(bf16_bits_to_f32(gpu.download(buf, np.uint16, COUNT))).tolist())
    out.put((rank, sums, one.timed_out()))
    one.close()
    gpu.close()


def test_two_processes_on_one_gpu_sum_through_ipc(hopper_ptx_backend) -> None:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = [ctx.Process(target=_rank, args=(r, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    got = dict((rank, (sums, timed_out)) for rank, sums, timed_out in
               (out.get(timeout=120) for _ in procs))
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    want = [[float(1 + 2 + 2 * call)] for call in range(3)]  # (1 + c) + (2 + c)
    assert got[0] == (want, False) and got[1] == (want, False)
