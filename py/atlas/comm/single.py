"""The one-rank group: collectives are identities (copies where source and destination differ)."""

from __future__ import annotations

from typing import Sequence

from ..core.dtype import DType
from ..runtime.gpu import DevicePtr, GpuBackend, Stream
from .backend import CommBackend, ReduceOp, check_counts


class SingleComm(CommBackend):
    """What a single-GPU engine holds, so layers call collectives unconditionally."""

    rank = 0
    world_size = 1

    def __init__(self, gpu: GpuBackend) -> None:
        self._gpu = gpu

    def _copy(self, dst: DevicePtr, src: DevicePtr, count: int, dtype: DType,
              stream: Stream) -> None:
        if dst != src and count:
            self._gpu.copy_d2d(dst, src, dtype.nbytes(count), stream)

    def all_reduce(self, buf: DevicePtr, count: int, dtype: DType, stream: Stream,
                   op: ReduceOp = ReduceOp.SUM) -> None:
        return None

    def all_gather(self, send: DevicePtr, recv: DevicePtr, count: int, dtype: DType,
                   stream: Stream) -> None:
        self._copy(recv, send, count, dtype, stream)

    def reduce_scatter(self, send: DevicePtr, recv: DevicePtr, count: int, dtype: DType,
                       stream: Stream, op: ReduceOp = ReduceOp.SUM) -> None:
        self._copy(recv, send, count, dtype, stream)

    def all_to_all(self, send: DevicePtr, send_counts: Sequence[int], recv: DevicePtr,
                   recv_counts: Sequence[int], dtype: DType, stream: Stream) -> None:
        check_counts(1, send_counts, recv_counts)
        if send_counts[0] != recv_counts[0]:
            raise ValueError(f"one rank sends {send_counts[0]} elements to itself but "
                             f"expects {recv_counts[0]}")
        self._copy(recv, send, send_counts[0], dtype, stream)

    def broadcast(self, buf: DevicePtr, count: int, dtype: DType, root: int,
                  stream: Stream) -> None:
        if root != 0:
            raise ValueError(f"broadcast root {root} outside a world of 1")

    def barrier(self) -> None:
        return None
