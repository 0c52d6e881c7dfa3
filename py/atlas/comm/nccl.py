"""NCCL collectives through ctypes, on the caller's CUDA stream (capturable in CUDA graphs).

The library is the one the `nvidia-nccl-cu13` wheel ships, else the system `libnccl.so.2`.
Enum values and signatures are NCCL's public C API (nccl.h); an error from any call raises a
`CommError` carrying `ncclGetErrorString`. NVLink multicast (NVLS) stays off: it is set in
the environment before the communicator is created, unless the user set it.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..core.dtype import DType
from ..runtime.gpu import DevicePtr, Stream
from .backend import CommBackend, CommError, ReduceOp, check_counts
from .transport import Star

if TYPE_CHECKING:
    from .oneshot import OneShotAllReduce

_NCCL_DTYPE = {DType.U8: 1, DType.FP8E4M3: 1, DType.FP8E5M2: 1, DType.I32: 2,
               DType.FP16: 6, DType.FP32: 7, DType.BF16: 9}
_NCCL_OP = {ReduceOp.SUM: 0, ReduceOp.MAX: 2}
UNIQUE_ID_BYTES = 128


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


def find_library() -> str:
    """Path of libnccl: the pip wheel's copy first (it matches the CUDA 13 runtime), then
    the system loader's."""
    try:
        import nvidia.nccl as wheel  # type: ignore[import-not-found]
        for root in wheel.__path__:
            lib = Path(root) / "lib" / "libnccl.so.2"
            if lib.exists():
                return str(lib)
    except ImportError:
        pass
    return "libnccl.so.2"


class NcclLibrary:
    """The loaded library with argument types declared once."""

    def __init__(self, path: str | None = None) -> None:
        path = path or find_library()
        try:
            self._lib = ctypes.CDLL(path)
        except OSError as exc:
            raise CommError(f"cannot load NCCL ({path}): {exc}; install the "
                            "nvidia-nccl-cu13 wheel or the system libnccl2 package") from None
        lib = self._lib
        vp, sz, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        lib.ncclGetErrorString.restype = ctypes.c_char_p
        lib.ncclGetErrorString.argtypes = [i]
        lib.ncclGetVersion.argtypes = [ctypes.POINTER(i)]
        lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(_UniqueId)]
        lib.ncclCommInitRank.argtypes = [ctypes.POINTER(vp), i, _UniqueId, i]
        lib.ncclCommDestroy.argtypes = [vp]
        lib.ncclAllReduce.argtypes = [vp, vp, sz, i, i, vp, vp]
        lib.ncclAllGather.argtypes = [vp, vp, sz, i, vp, vp]
        lib.ncclReduceScatter.argtypes = [vp, vp, sz, i, i, vp, vp]
        lib.ncclBroadcast.argtypes = [vp, vp, sz, i, i, vp, vp]
        lib.ncclSend.argtypes = [vp, sz, i, i, vp, vp]
        lib.ncclRecv.argtypes = [vp, sz, i, i, vp, vp]

    def call(self, name: str, *args: object) -> None:
        rc = getattr(self._lib, name)(*args)
        if rc != 0:
            msg = self._lib.ncclGetErrorString(rc).decode(errors="replace")
            raise CommError(f"{name} failed: {msg} (ncclResult {rc})")

    def version(self) -> int:
        v = ctypes.c_int()
        self.call("ncclGetVersion", ctypes.byref(v))
        return v.value

    def unique_id(self) -> bytes:
        uid = _UniqueId()
        self.call("ncclGetUniqueId", ctypes.byref(uid))
        # the raw 128 bytes: `uid.internal` as a c_char array would stop at the first NUL
        return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)

    def init_rank(self, world_size: int, uid: bytes, rank: int) -> ctypes.c_void_p:
        if len(uid) != UNIQUE_ID_BYTES:
            raise CommError(f"NCCL unique id must be {UNIQUE_ID_BYTES} bytes, got {len(uid)}")
        comm = ctypes.c_void_p()
        handle = _UniqueId()
        ctypes.memmove(ctypes.addressof(handle), uid, UNIQUE_ID_BYTES)
        self.call("ncclCommInitRank", ctypes.byref(comm), world_size, handle, rank)
        return comm


class NcclComm(CommBackend):
    """One rank of an NCCL communicator; the current CUDA context must be the rank's GPU.

    With `oneshot` set, bf16 sums of up to its capacity go through the one-shot peer-memory
    kernel instead (comm/oneshot.py; opt-in until measured: connect_world)."""

    def __init__(self, star: Star, library: NcclLibrary | None = None,
                 oneshot: "OneShotAllReduce | None" = None) -> None:
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        self._lib = library or NcclLibrary()
        self._star = star
        self._oneshot = oneshot
        self.rank = star.rank
        self.world_size = star.world_size
        uid = self._lib.unique_id() if self.rank == 0 else b""
        uid = star.exchange(uid, lambda parts: [parts[0]] * len(parts))
        self._comm = self._lib.init_rank(self.world_size, uid, self.rank)

    def all_reduce(self, buf: DevicePtr, count: int, dtype: DType, stream: Stream,
                   op: ReduceOp = ReduceOp.SUM) -> None:
        one = self._oneshot
        if (one is not None and dtype is DType.BF16 and op is ReduceOp.SUM
                and count <= one.capacity and count % 8 == 0):
            one.all_reduce(buf, count, stream)
            return
        self._lib.call("ncclAllReduce", buf, buf, count, _dtype(dtype), _NCCL_OP[op],
                       self._comm, stream)

    def all_gather(self, send: DevicePtr, recv: DevicePtr, count: int, dtype: DType,
                   stream: Stream) -> None:
        self._lib.call("ncclAllGather", send, recv, count, _dtype(dtype), self._comm, stream)

    def reduce_scatter(self, send: DevicePtr, recv: DevicePtr, count: int, dtype: DType,
                       stream: Stream, op: ReduceOp = ReduceOp.SUM) -> None:
        self._lib.call("ncclReduceScatter", send, recv, count, _dtype(dtype), _NCCL_OP[op],
                       self._comm, stream)

    def all_to_all(self, send: DevicePtr, send_counts: Sequence[int], recv: DevicePtr,
                   recv_counts: Sequence[int], dtype: DType, stream: Stream) -> None:
        check_counts(self.world_size, send_counts, recv_counts)
        code, size = _dtype(dtype), dtype.nbytes(1)
        self._lib.call("ncclGroupStart")
        try:
            s_off = r_off = 0
            for peer in range(self.world_size):
                if send_counts[peer]:
                    self._lib.call("ncclSend", send + s_off * size, send_counts[peer], code,
                                   peer, self._comm, stream)
                if recv_counts[peer]:
                    self._lib.call("ncclRecv", recv + r_off * size, recv_counts[peer], code,
                                   peer, self._comm, stream)
                s_off += send_counts[peer]
                r_off += recv_counts[peer]
        finally:
            self._lib.call("ncclGroupEnd")

    def broadcast(self, buf: DevicePtr, count: int, dtype: DType, root: int,
                  stream: Stream) -> None:
        self._lib.call("ncclBroadcast", buf, buf, count, _dtype(dtype), root, self._comm,
                       stream)

    def barrier(self) -> None:
        self._star.exchange(b"", lambda parts: [b""] * len(parts))

    def close(self) -> None:
        if self._oneshot is not None:
            self._oneshot.close()
            self._oneshot = None
        if self._comm:
            self._lib.call("ncclCommDestroy", self._comm)
            self._comm = ctypes.c_void_p()
        self._star.close()


def _dtype(dtype: DType) -> int:
    try:
        return _NCCL_DTYPE[dtype]
    except KeyError:
        raise ValueError(f"NCCL does not move {dtype.label} buffers") from None
