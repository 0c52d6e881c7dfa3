"""NCCL through ctypes on the real GPU, as a one-rank communicator (the one-GPU machine):
every collective's data path, argument types and stream ordering, and capture in a CUDA
graph. Marked `gpu`: skipped where no CUDA device is usable."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.comm.backend import ReduceOp
from atlas.comm.nccl import NcclComm, NcclLibrary
from atlas.comm.transport import Star
from atlas.core.dtype import DType
from atlas.runtime.cuda import CudaBackend

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpu_comm():
    gpu = CudaBackend(modules={})
    comm = NcclComm(Star.connect(0, 1, "127.0.0.1", 0))
    yield gpu, comm
    comm.close()
    gpu.close()


def test_nccl_version_is_readable() -> None:
    assert NcclLibrary().version() >= 22000  # 2.20 or newer encodes as 22000+


def test_one_rank_collectives_move_the_right_bytes(gpu_comm) -> None:
    gpu, comm = gpu_comm
    s = gpu.create_stream()
    x = np.arange(1000, dtype=np.float32) - 500
    buf = gpu.upload(x)
    comm.all_reduce(buf, x.size, DType.FP32, s, ReduceOp.SUM)
    out = gpu.alloc(x.nbytes)
    comm.all_gather(buf, out, x.size, DType.FP32, s)
    gpu.synchronize(s)
    np.testing.assert_array_equal(gpu.download(out, np.float32, x.size), x)
    ids = np.arange(12, dtype=np.int32)
    recv = gpu.alloc(ids.nbytes)
    comm.all_to_all(gpu.upload(ids), [12], recv, [12], DType.I32, s)
    comm.reduce_scatter(recv, out, 12, DType.I32, s)
    gpu.synchronize(s)
    np.testing.assert_array_equal(gpu.download(out, np.int32, 12), ids)


def test_all_reduce_is_captured_in_a_graph(gpu_comm) -> None:
    gpu, comm = gpu_comm
    s = gpu.create_stream()
    x = np.full(4096, 3, dtype=np.uint16)  # bf16 bit patterns, passed through unchanged
    buf = gpu.upload(x)
    gpu.begin_capture(s)
    comm.all_reduce(buf, x.size, DType.BF16, s)
    graph = gpu.end_capture(s)
    for _ in range(3):
        gpu.launch_graph(graph, s)
    gpu.synchronize(s)
    np.testing.assert_array_equal(gpu.download(buf, np.uint16, x.size), x)
    gpu.destroy_graph(graph)
