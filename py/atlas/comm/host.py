"""Collectives between CPU processes: the host GPU backend's memory moved over a TCP star.

The same results as NCCL up to summation order: reductions run on rank 0 in rank order,
in float32 for bf16/fp16/fp32 (rounded back to the buffer's dtype) and exactly for integers.
This is what lets CI run tensor- and expert-parallel paths without a GPU.
"""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np

from ..core.dtype import DType
from ..core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..runtime.gpu import DevicePtr, GpuBackend, Stream
from .backend import CommBackend, CommError, ReduceOp, check_counts
from .transport import Star

_STORAGE = {DType.BF16: np.uint16, DType.FP16: np.float16, DType.FP32: np.float32,
            DType.I32: np.int32, DType.U8: np.uint8, DType.FP8E4M3: np.uint8,
            DType.FP8E5M2: np.uint8}


class HostComm(CommBackend):
    capturable = False  # TCP transfers between synchronizations, not stream work

    def __init__(self, gpu: GpuBackend, star: Star) -> None:
        self._gpu = gpu
        self._star = star
        self.rank = star.rank
        self.world_size = star.world_size

    # ---- device bytes <-> numpy ------------------------------------------------------------
    def _read(self, ptr: DevicePtr, count: int, dtype: DType, stream: Stream) -> np.ndarray:
        out = np.empty(count, dtype=_storage(dtype))
        if count:
            self._gpu.synchronize(stream)
            self._gpu.copy_d2h(out, ptr)
        return out

    def _write(self, ptr: DevicePtr, data: np.ndarray) -> None:
        if data.size:
            self._gpu.copy_h2d(ptr, np.ascontiguousarray(data))

    # ---- collectives ------------------------------------------------------------------------
    def all_reduce(self, buf: DevicePtr, count: int, dtype: DType, stream: Stream,
                   op: ReduceOp = ReduceOp.SUM) -> None:
        mine = self._read(buf, count, dtype, stream)

        def reply(parts: list[bytes]) -> list[bytes]:
            total = _reduce([np.frombuffer(p, mine.dtype) for p in parts], dtype, op).tobytes()
            return [total] * len(parts)

        self._write(buf, np.frombuffer(self._star.exchange(mine.tobytes(), reply), mine.dtype))

    def all_gather(self, send: DevicePtr, recv: DevicePtr, count: int, dtype: DType,
                   stream: Stream) -> None:
        mine = self._read(send, count, dtype, stream)
        got = self._star.exchange(mine.tobytes(), lambda parts: [b"".join(parts)] * len(parts))
        self._write(recv, np.frombuffer(got, mine.dtype))

    def reduce_scatter(self, send: DevicePtr, recv: DevicePtr, count: int, dtype: DType,
                       stream: Stream, op: ReduceOp = ReduceOp.SUM) -> None:
        mine = self._read(send, count * self.world_size, dtype, stream)

        def reply(parts: list[bytes]) -> list[bytes]:
            arrays = [np.frombuffer(p, mine.dtype).reshape(len(parts), count) for p in parts]
            return [_reduce([a[r] for a in arrays], dtype, op).tobytes()
                    for r in range(len(parts))]

        self._write(recv, np.frombuffer(self._star.exchange(mine.tobytes(), reply), mine.dtype))

    def all_to_all(self, send: DevicePtr, send_counts: Sequence[int], recv: DevicePtr,
                   recv_counts: Sequence[int], dtype: DType, stream: Stream) -> None:
        check_counts(self.world_size, send_counts, recv_counts)
        mine = self._read(send, sum(send_counts), dtype, stream)
        header = struct.pack(f"<{2 * self.world_size}q", *send_counts, *recv_counts)
        itemsize = mine.dtype.itemsize

        def reply(parts: list[bytes]) -> list[bytes]:
            world = len(parts)
            counts = [struct.unpack_from(f"<{2 * world}q", p) for p in parts]
            sends, recvs = [c[:world] for c in counts], [c[world:] for c in counts]
            bodies = [memoryview(p)[len(header):] for p in parts]
            offsets = [np.concatenate([[0], np.cumsum(s)]) for s in sends]
            for src in range(world):
                for dst in range(world):
                    if sends[src][dst] != recvs[dst][src]:
                        raise CommError(f"all_to_all: rank {src} sends {sends[src][dst]} "
                                        f"elements to rank {dst}, which expects "
                                        f"{recvs[dst][src]}")
            return [b"".join(bytes(bodies[src][offsets[src][dst] * itemsize:
                                               offsets[src][dst + 1] * itemsize])
                             for src in range(world)) for dst in range(world)]

        got = self._star.exchange(header + mine.tobytes(), reply)
        self._write(recv, np.frombuffer(got, mine.dtype))

    def broadcast(self, buf: DevicePtr, count: int, dtype: DType, root: int,
                  stream: Stream) -> None:
        if not 0 <= root < self.world_size:
            raise ValueError(f"broadcast root {root} outside a world of {self.world_size}")
        mine = self._read(buf, count, dtype, stream)
        got = self._star.exchange(mine.tobytes(), lambda parts: [parts[root]] * len(parts))
        self._write(buf, np.frombuffer(got, mine.dtype))

    def barrier(self) -> None:
        self._star.exchange(b"", lambda parts: [b""] * len(parts))

    def close(self) -> None:
        self._star.close()


def _storage(dtype: DType) -> type:
    try:
        return _STORAGE[dtype]
    except KeyError:
        raise ValueError(f"the host collectives do not move {dtype.label}") from None


def _reduce(arrays: list[np.ndarray], dtype: DType, op: ReduceOp) -> np.ndarray:
    """Reduce in rank order; floats accumulate in float32 and round back once."""
    if dtype in (DType.FP8E4M3, DType.FP8E5M2, DType.U8):
        raise ValueError(f"cannot reduce {dtype.label} buffers")
    if dtype is DType.BF16:
        values = [bf16_bits_to_f32(a) for a in arrays]
    elif dtype is DType.I32:
        values = [a.astype(np.int64) for a in arrays]
    else:
        values = [a.astype(np.float32) for a in arrays]
    acc = values[0].copy()
    for v in values[1:]:
        acc = acc + v if op is ReduceOp.SUM else np.maximum(acc, v)
    if dtype is DType.BF16:
        return f32_to_bf16_bits(acc.astype(np.float32))
    return acc.astype(_storage(dtype))
