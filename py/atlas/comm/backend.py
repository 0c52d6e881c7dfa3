"""The collective-communication interface every parallel layer talks to.

Buffers are device pointers of the rank's own `GpuBackend` and counts are in elements, as in
NCCL, so the same model code runs over NCCL on GPUs and over the host implementation on CPU
processes. Every call is enqueued on `stream` and ordered with the kernels around it; a
backend whose transport is not stream-ordered (the host one) synchronizes the stream first.
"""

from __future__ import annotations

import abc
import enum
import pickle
from typing import Sequence

from ..core.dtype import DType
from ..runtime.gpu import DevicePtr, Stream


class CommError(RuntimeError):
    """A collective failed or a peer went away; the message names the rank and the call."""


class ReduceOp(enum.Enum):
    SUM = "sum"
    MAX = "max"


class CommBackend(abc.ABC):
    """One rank's view of its group. `rank` is 0..world_size-1."""

    rank: int
    world_size: int
    #: whether the collectives can be recorded into a CUDA graph (stream-ordered device
    #: work); the host transport is not, so a runner over it runs decode eagerly
    capturable: bool = True

    @abc.abstractmethod
    def all_reduce(self, buf: DevicePtr, count: int, dtype: DType, stream: Stream,
                   op: ReduceOp = ReduceOp.SUM) -> None:
        """In place: every rank's `buf` becomes the reduction of all ranks' `buf`."""

    @abc.abstractmethod
    def all_gather(self, send: DevicePtr, recv: DevicePtr, count: int, dtype: DType,
                   stream: Stream) -> None:
        """`recv` (world_size * count elements) holds rank r's `send` at offset r * count."""

    @abc.abstractmethod
    def reduce_scatter(self, send: DevicePtr, recv: DevicePtr, count: int, dtype: DType,
                       stream: Stream, op: ReduceOp = ReduceOp.SUM) -> None:
        """`send` has world_size * count elements; rank r gets the reduction of block r."""

    @abc.abstractmethod
    def all_to_all(self, send: DevicePtr, send_counts: Sequence[int], recv: DevicePtr,
                   recv_counts: Sequence[int], dtype: DType, stream: Stream) -> None:
        """Rank r sends `send_counts[p]` elements (contiguous, in peer order) to peer p and
        receives `recv_counts[p]` from it into `recv`, also in peer order. Counts must agree
        pairwise (what r sends to p is what p expects from r)."""

    @abc.abstractmethod
    def broadcast(self, buf: DevicePtr, count: int, dtype: DType, root: int,
                  stream: Stream) -> None:
        """In place: every rank's `buf` becomes `root`'s."""

    @abc.abstractmethod
    def barrier(self) -> None:
        """Returns once every rank has called it."""

    def close(self) -> None:
        """Release the transport; idempotent."""

    def broadcast_object(self, obj: object = None) -> object:
        """Rank 0's `obj` on every rank (the others pass nothing), over the host transport,
        outside any stream: how the driver rank hands each step's chunks to the workers.

        Pickled: the workers trust rank 0, the process they dialed (rank 0 unpickles
        nothing it receives). A one-rank group has no transport and returns `obj`.
        """
        star = getattr(self, "_star", None)
        if star is None or self.world_size == 1:
            return obj
        payload = pickle.dumps(obj) if self.rank == 0 else b""
        return pickle.loads(star.exchange(payload, lambda parts: [parts[0]] * len(parts)))


def check_counts(world_size: int, send_counts: Sequence[int],
                 recv_counts: Sequence[int]) -> None:
    """All-to-all counts: one per peer, none negative."""
    for name, counts in (("send_counts", send_counts), ("recv_counts", recv_counts)):
        if len(counts) != world_size:
            raise ValueError(f"{name} has {len(counts)} entries for a world of {world_size}")
        if any(c < 0 for c in counts):
            raise ValueError(f"{name} has a negative count: {list(counts)}")
