"""WeightStore: the one place where checkpoint bytes are read from disk.

Model code asks the store for tensors by name; it never opens a file (SBIO). The store
parses safetensors headers itself (8-byte little-endian length + JSON), so it controls its
own I/O: `validate` checks names, dtypes and shapes against what the model expects before
a single byte moves to the GPU, and `upload` streams tensors to device memory through a
pipelined reader:

* a reader thread reads the next span of the file with O_DIRECT (no page cache: on GB10
  the page cache shares physical memory with the GPU) into page-aligned pinned buffers,
  while the calling thread copies the previous span to the device;
* shards with very many tiny tensors are read buffered instead (kernel readahead beats
  one O_DIRECT syscall per tensor there);
* where the filesystem rejects O_DIRECT (tmpfs, overlayfs: EINVAL on open or on the first
  aligned read) the file falls back to mmap; `fast=False` forces mmap everywhere.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import queue
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..core.dtype import DType
from .gpu import DevicePtr, GpuBackend

ALIGN = 4096
#: above this many tensors in one shard, buffered reads beat O_DIRECT (per-syscall cost)
BUFFERED_TENSOR_THRESHOLD = 5000
#: largest single read; the two staging buffers are sized to the largest planned read
DEFAULT_CHUNK_BYTES = 64 << 20
#: a gap up to this size between two wanted tensors is read through rather than skipped
MAX_GAP_BYTES = 1 << 20
#: a safetensors header larger than this is treated as corrupt
MAX_HEADER_BYTES = 256 << 20

#: safetensors dtype name -> (bytes per element, numpy dtype used by `read`)
ST_DTYPES: dict[str, tuple[int, np.dtype]] = {
    "BOOL": (1, np.dtype(np.bool_)), "U8": (1, np.dtype(np.uint8)),
    "I8": (1, np.dtype(np.int8)), "F8_E4M3": (1, np.dtype(np.uint8)),
    "F8_E5M2": (1, np.dtype(np.uint8)), "U16": (2, np.dtype("<u2")),
    "I16": (2, np.dtype("<i2")), "F16": (2, np.dtype("<f2")), "BF16": (2, np.dtype("<u2")),
    "U32": (4, np.dtype("<u4")), "I32": (4, np.dtype("<i4")), "F32": (4, np.dtype("<f4")),
    "U64": (8, np.dtype("<u8")), "I64": (8, np.dtype("<i8")), "F64": (8, np.dtype("<f8")),
}

_DTYPE_TO_ST = {DType.BF16: "BF16", DType.FP16: "F16", DType.FP32: "F32", DType.I32: "I32",
                DType.U8: "U8", DType.FP8E4M3: "F8_E4M3", DType.FP8E5M2: "F8_E5M2"}

ProgressFn = Callable[[int, int, int, int, float], None]
"""(tensors done, tensors total, bytes done, bytes total, seconds elapsed)"""


class WeightError(ValueError):
    """A checkpoint file is malformed or does not match what the model expects."""


#: problems a checkpoint mismatch names before it counts the rest (a wrong layer count
#: would otherwise print a line per tensor of every missing layer)
SHOWN_PROBLEMS = 3


def mismatch_message(model_dir: Path, problems: Sequence[str]) -> str:
    """The first few problems and how many there are, with the usual cause."""
    head = (f"{model_dir}: {len(problems)} tensor(s) do not match config.json (is it the "
            "config of this checkpoint? compare num_hidden_layers, hidden_size, vocab_size):")
    shown = [f"  {p}" for p in problems[:SHOWN_PROBLEMS]]
    if len(problems) > SHOWN_PROBLEMS:
        shown.append(f"  ... and {len(problems) - SHOWN_PROBLEMS} more")
    return "\n".join([head, *shown])


def st_dtype_name(dtype: DType | str) -> str:
    """The safetensors spelling of a dtype given as DType, "bf16", "BF16" or "bfloat16"."""
    if isinstance(dtype, str) and dtype.upper() in ST_DTYPES:
        return dtype.upper()
    member = dtype if isinstance(dtype, DType) else DType.parse(dtype)
    if member not in _DTYPE_TO_ST:
        raise WeightError(f"{member.label} has no safetensors dtype (packed formats are "
                          f"stored as U8)")
    return _DTYPE_TO_ST[member]


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """Where one tensor's bytes live: absolute byte range [start, end) of `file`."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: Path
    start: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What `upload` did: device pointers by tensor, the read mode used per file, totals."""

    ptrs: dict[str, DevicePtr]
    modes: dict[str, str]
    nbytes: int
    seconds: float

    @property
    def gb_per_s(self) -> float:
        return self.nbytes / 1e9 / self.seconds if self.seconds > 0 else 0.0


def parse_safetensors_header(path: Path) -> list[TensorInfo]:
    """List a safetensors file's tensors, checking every offset against the file size.

    A malicious or truncated file fails here with its name, before any byte is trusted.
    """
    size = path.stat().st_size
    with open(path, "rb") as fh:
        prefix = fh.read(8)
        if len(prefix) != 8:
            raise WeightError(f"{path}: too short to be a safetensors file ({size} bytes)")
        (hlen,) = struct.unpack("<Q", prefix)
        if hlen > min(size - 8, MAX_HEADER_BYTES):
            raise WeightError(f"{path}: header length {hlen} exceeds the file ({size} bytes)")
        raw = fh.read(hlen)
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise WeightError(f"{path}: header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise WeightError(f"{path}: header must be a JSON object")
    base, data_len = 8 + hlen, size - 8 - hlen
    infos = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        infos.append(_tensor_info(path, name, entry, base, data_len))
    infos.sort(key=lambda t: t.start)
    for prev, cur in zip(infos, infos[1:]):
        if cur.start < prev.end:
            raise WeightError(f"{path}: tensors {prev.name!r} and {cur.name!r} overlap")
    return infos


def _tensor_info(path: Path, name: str, entry: object, base: int, data_len: int) -> TensorInfo:
    if not isinstance(entry, dict):
        raise WeightError(f"{path}: entry for {name!r} must be an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in ST_DTYPES:
        raise WeightError(f"{path}: tensor {name!r} has unknown dtype {dtype!r}")
    if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool)
                                            and d >= 0 for d in shape)):
        raise WeightError(f"{path}: tensor {name!r} has a bad shape {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
        raise WeightError(f"{path}: tensor {name!r} has bad data_offsets {offsets!r}")
    begin, end = offsets
    if not 0 <= begin <= end <= data_len:
        raise WeightError(f"{path}: tensor {name!r} range [{begin}, {end}) is outside the "
                          f"data section ({data_len} bytes)")
    want = int(np.prod(shape, dtype=np.int64)) * ST_DTYPES[dtype][0]
    if end - begin != want:
        raise WeightError(f"{path}: tensor {name!r} holds {end - begin} bytes but "
                          f"{dtype}{shape} needs {want}")
    return TensorInfo(name, dtype, tuple(shape), path, base + begin, base + end)


def write_safetensors(path: Path, layout: Sequence[tuple[str, str, tuple[int, ...]]],
                      arrays: Iterable[np.ndarray],
                      metadata: Mapping[str, str] | None = None) -> None:
    """Write tensors described by `layout` (name, safetensors dtype, shape), in order.

    `arrays` yields each tensor's data in layout order (bf16 as uint16 bit patterns); it
    may be a generator, so a converter holds one tensor in memory at a time.
    """
    header: dict[str, object] = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    for name, dtype, shape in layout:
        nbytes = int(np.prod(shape, dtype=np.int64)) * ST_DTYPES[dtype][0]
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data section starts 8-byte aligned
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for (name, dtype, shape), arr in zip(layout, arrays, strict=True):
            want = ST_DTYPES[dtype][1]
            if tuple(arr.shape) != tuple(shape) or arr.dtype.itemsize != want.itemsize:
                raise WeightError(f"{path}: tensor {name!r} is {arr.dtype}{list(arr.shape)}, "
                                  f"layout says {dtype}{list(shape)}")
            fh.write(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes())


class WeightStore:
    """The tensors of one model directory, from `model.safetensors` or an indexed shard set."""

    def __init__(self, model_dir: str | Path) -> None:
        self.model_dir = Path(model_dir)
        self.tensors: dict[str, TensorInfo] = {}
        for file in self._shard_files():
            for info in parse_safetensors_header(file):
                if info.name in self.tensors:
                    raise WeightError(f"tensor {info.name!r} appears in both "
                                      f"{self.tensors[info.name].file.name} and {file.name}")
                self.tensors[info.name] = info
        self._check_index()

    # ---- discovery ---------------------------------------------------------------
    def _index(self) -> dict[str, str] | None:
        index = self.model_dir / "model.safetensors.index.json"
        if not index.is_file():
            return None
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise WeightError(f"{index}: not a safetensors index ({exc})") from None
        if not isinstance(weight_map, dict):
            raise WeightError(f"{index}: weight_map must be an object")
        for name, file in weight_map.items():
            if not isinstance(file, str) or Path(file).name != file or file.startswith("."):
                raise WeightError(f"{index}: tensor {name!r} maps to a bad file name {file!r}")
        return weight_map

    def _shard_files(self) -> list[Path]:
        if not self.model_dir.is_dir():
            raise WeightError(f"{self.model_dir}: not a directory")
        weight_map = self._index()
        if weight_map is not None:
            files = [self.model_dir / f for f in sorted(set(weight_map.values()))]
            missing = [f.name for f in files if not f.is_file()]
            if missing:
                raise WeightError(f"{self.model_dir}: index names missing shard(s) "
                                  f"{', '.join(missing)}")
            return files
        single = self.model_dir / "model.safetensors"
        if single.is_file():
            return [single]
        files = sorted(self.model_dir.glob("*.safetensors"))
        if not files:
            raise WeightError(f"{self.model_dir}: no model.safetensors, no "
                              f"model.safetensors.index.json and no *.safetensors file")
        return files

    def _check_index(self) -> None:
        weight_map = self._index()
        if weight_map is None:
            return
        for name, file in weight_map.items():
            info = self.tensors.get(name)
            if info is None or info.file.name != file:
                raise WeightError(f"{self.model_dir}: index puts {name!r} in {file}, but "
                                  f"that shard has no such tensor")

    # ---- queries -----------------------------------------------------------------
    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def __len__(self) -> int:
        return len(self.tensors)

    def info(self, name: str) -> TensorInfo:
        try:
            return self.tensors[name]
        except KeyError:
            raise WeightError(f"{self.model_dir}: no tensor {name!r}") from None

    def validate(self, expected: Mapping[str, tuple[DType | str, Sequence[int]]]) -> list[str]:
        """Check that every expected tensor exists with its dtype and shape.

        Raises one WeightError listing every problem (each naming its tensor); returns the
        names present in the checkpoint but not expected (reported, not fatal).
        """
        problems = []
        for name, (dtype, shape) in expected.items():
            info = self.tensors.get(name)
            if info is None:
                problems.append(f"missing tensor {name!r}")
                continue
            want_dtype = st_dtype_name(dtype)
            if info.dtype != want_dtype:
                problems.append(f"tensor {name!r}: dtype {info.dtype}, want {want_dtype}")
            if info.shape != tuple(shape):
                problems.append(f"tensor {name!r}: shape {list(info.shape)}, want "
                                f"{list(shape)}")
        if problems:
            raise WeightError(mismatch_message(self.model_dir, problems))
        return sorted(set(self.tensors) - set(expected))

    def read(self, name: str) -> np.ndarray:
        """A host copy of one tensor (bf16 as uint16 bit patterns, fp8 as uint8)."""
        info = self.info(name)
        out = np.empty(info.shape, dtype=ST_DTYPES[info.dtype][1])
        fd = os.open(info.file, os.O_RDONLY)
        try:
            _read_exact(fd, out, info.start, name, info.file)
        finally:
            os.close(fd)
        return out

    def read_slice(self, name: str, rows: slice, cols: slice | None = None) -> np.ndarray:
        """A host copy of `tensor[rows, cols]` reading only those bytes from the file.

        Tensor-parallel ranks load their shard this way: a row range of a row-major tensor
        is one contiguous read, a column range one read per row (never the whole tensor).
        """
        info = self.info(name)
        storage = ST_DTYPES[info.dtype][1]
        n_rows = info.shape[0]
        width = int(np.prod(info.shape[1:], dtype=np.int64)) if len(info.shape) > 1 else 1
        r0, r1, rstep = rows.indices(n_rows)
        c0, c1, cstep = (cols or slice(None)).indices(width)
        if rstep != 1 or cstep != 1 or r1 <= r0 or c1 <= c0:
            raise WeightError(f"{name}: slice [{r0}:{r1}, {c0}:{c1}] of shape {info.shape} "
                              "is empty or strided")
        itemsize = np.dtype(storage).itemsize
        out = np.empty((r1 - r0, c1 - c0), dtype=storage)
        fd = os.open(info.file, os.O_RDONLY)
        try:
            if c0 == 0 and c1 == width:  # whole rows: one contiguous range
                _read_exact(fd, out, info.start + r0 * width * itemsize, name, info.file)
            else:
                for i, row in enumerate(range(r0, r1)):
                    _read_exact(fd, out[i], info.start + (row * width + c0) * itemsize, name,
                                info.file)
        finally:
            os.close(fd)
        return out if len(info.shape) > 1 else out.reshape(-1)

    # ---- upload ------------------------------------------------------------------
    def upload(self, backend: GpuBackend, names: Iterable[str] | None = None,
               dst: Mapping[str, DevicePtr] | Callable[[TensorInfo], DevicePtr] | None = None,
               progress: ProgressFn | None = None, fast: bool = True,
               chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> LoadReport:
        """Copy tensors to device memory; return where each landed.

        `dst` gives each tensor's device address (a mapping, or a function of its
        TensorInfo); None allocates one buffer per tensor with `backend.alloc`.
        """
        wanted = [self.info(n) for n in (self.tensors if names is None else names)]
        ptrs: dict[str, DevicePtr] = {}
        for info in wanted:
            if dst is None:
                ptrs[info.name] = backend.alloc(max(info.nbytes, 1))
            elif callable(dst):
                ptrs[info.name] = dst(info)
            else:
                if info.name not in dst:
                    raise WeightError(f"upload: no destination for tensor {info.name!r}")
                ptrs[info.name] = dst[info.name]
        chunk = max(ALIGN, chunk_bytes // ALIGN * ALIGN)
        by_file: dict[Path, list[TensorInfo]] = {}
        for info in wanted:
            by_file.setdefault(info.file, []).append(info)
        plans = {file: _plan_spans(sorted(infos, key=lambda t: t.start), chunk)
                 for file, infos in by_file.items()}
        largest = max((_span_bytes(sp) for spans in plans.values() for sp in spans), default=0)
        loader = _Loader(backend, ptrs, wanted, progress, largest)
        modes = {}
        for file, spans in plans.items():
            mode = "mmap"
            if fast:
                mode = "buffered" if self._count_in(file) > BUFFERED_TENSOR_THRESHOLD \
                    else "direct"
            modes[file.name] = loader.load_file(file, spans, mode)
        backend.synchronize()
        return LoadReport(ptrs, modes, loader.bytes_done, time.perf_counter() - loader.t0)

    def _count_in(self, file: Path) -> int:
        return sum(1 for t in self.tensors.values() if t.file == file)


# ---- the pipelined reader ---------------------------------------------------------

def _read_exact(fd: int, out: np.ndarray, offset: int, name: str, file: Path) -> None:
    """Fill the contiguous array `out` from `offset`, or raise naming the tensor."""
    view = memoryview(out.reshape(-1).view(np.uint8))
    got = os.preadv(fd, [view], offset)
    if got != out.nbytes:
        raise WeightError(f"{file}: short read of {name!r} ({got} of {out.nbytes} bytes)")


@dataclass(frozen=True, slots=True)
class _Piece:
    """Bytes [start, end) of the file that belong to `tensor` at byte `offset` within it."""

    tensor: TensorInfo
    offset: int
    start: int
    end: int


def _plan_spans(infos: Sequence[TensorInfo], chunk: int) -> list[list[_Piece]]:
    """Group tensors (sorted by offset) into reads of at most `chunk` bytes each.

    Large tensors are split into chunk-sized pieces; neighbouring small ones share a read
    so a shard of many small tensors costs few syscalls.
    """
    spans: list[list[_Piece]] = []
    for t in infos:
        for off in range(0, max(t.nbytes, 1), chunk):
            piece = _Piece(t, off, t.start + off, min(t.end, t.start + off + chunk))
            if spans:
                head, tail = spans[-1][0], spans[-1][-1]
                aligned_start = head.start // ALIGN * ALIGN
                if (0 <= piece.start - tail.end <= MAX_GAP_BYTES
                        and _round_up(piece.end) - aligned_start <= chunk + ALIGN):
                    spans[-1].append(piece)
                    continue
            spans.append([piece])
    return spans


def _span_bytes(span: list[_Piece]) -> int:
    """Bytes of the page-aligned read that covers a span."""
    return _round_up(span[-1].end) - span[0].start // ALIGN * ALIGN


def _round_up(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _open_direct(path: Path) -> int:
    """Open for O_DIRECT reads; OSError(EINVAL) where the filesystem refuses."""
    flag = getattr(os, "O_DIRECT", None)
    if flag is None:
        raise OSError(errno.EINVAL, "O_DIRECT is not available on this platform")
    return os.open(path, os.O_RDONLY | flag)


def _pread_into(fd: int, buf: np.ndarray, offset: int) -> int:
    """One positioned read into `buf`; returns the bytes read (0 at end of file)."""
    return os.preadv(fd, [memoryview(buf)], offset)


def _read_fully(fd: int, buf: np.ndarray, offset: int, need: int) -> int:
    """Read until `need` bytes are in `buf` or the file ends (an O_DIRECT read that ends
    off a page boundary has hit end of file)."""
    got = 0
    while got < need:
        n = _pread_into(fd, buf[got:], offset + got)
        got += n
        if n == 0 or got % ALIGN:
            break
    return got


def _aligned(buf: np.ndarray) -> np.ndarray:
    addr = buf.__array_interface__["data"][0]
    return buf[(-addr) % ALIGN:]


class _DirectUnsupported(Exception):
    """The filesystem refused an O_DIRECT read; the file continues through mmap."""


class _Loader:
    """Streams spans of files into device memory, reading ahead on a worker thread.

    A staging buffer goes back to the reader as soon as `copy_h2d` (no stream) returns,
    which relies on the synchronous-copy contract of `copy_h2d(..., stream=None)`.
    """

    def __init__(self, backend: GpuBackend, ptrs: Mapping[str, DevicePtr],
                 wanted: Sequence[TensorInfo], progress: ProgressFn | None,
                 staging_bytes: int) -> None:
        self.backend = backend
        self.ptrs = ptrs
        self.progress = progress
        self.staging_bytes = staging_bytes
        self.total_tensors = len(wanted)
        self.total_bytes = sum(t.nbytes for t in wanted)
        self.remaining = {t.name: t.nbytes for t in wanted}
        self.tensors_done = 0
        self.bytes_done = 0
        self.t0 = time.perf_counter()
        self._buffers: list[np.ndarray] | None = None

    def load_file(self, file: Path, spans: list[list[_Piece]], mode: str) -> str:
        """Load the planned spans of `file`; returns the mode that was actually used."""
        if mode != "mmap":
            try:
                fd = _open_direct(file) if mode == "direct" else os.open(file, os.O_RDONLY)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                mode = "mmap"
            else:
                try:
                    spans = self._pipelined(fd, file, spans)
                finally:
                    os.close(fd)
                if spans:
                    mode = "mmap"
        if mode == "mmap":
            self._mmapped(file, spans)
        return mode

    def _staging(self) -> list[np.ndarray]:
        if self._buffers is None:  # sized to the largest read, so small models pin little
            size = max(self.staging_bytes, ALIGN)
            self._buffers = [_aligned(self.backend.alloc_host_pinned(size + ALIGN))[:size]
                             for _ in range(2)]
        return self._buffers

    def _pipelined(self, fd: int, file: Path, spans: list[list[_Piece]]) -> list[list[_Piece]]:
        """Read spans on a worker thread into two staging buffers; copy them here.

        Returns the spans not yet copied (non-empty only when O_DIRECT was refused, which
        can only happen on the first read: they then continue through mmap).
        """
        free: queue.Queue[np.ndarray] = queue.Queue()
        for buf in self._staging():
            free.put(buf)
        filled: queue.Queue[tuple[int, np.ndarray, int] | BaseException | None] = queue.Queue()
        stop = threading.Event()

        def reader() -> None:
            try:
                for i, span in enumerate(spans):
                    buf = free.get()
                    if stop.is_set():
                        return
                    base = span[0].start // ALIGN * ALIGN
                    try:
                        got = _read_fully(fd, buf[:_span_bytes(span)], base,
                                          span[-1].end - base)
                    except OSError as exc:
                        if exc.errno == errno.EINVAL and i == 0:
                            filled.put(_DirectUnsupported())
                            return
                        raise
                    if got < span[-1].end - base:
                        raise WeightError(f"{file}: short read at byte {base} "
                                          f"({got} of {span[-1].end - base})")
                    filled.put((i, buf, base))
                filled.put(None)
            except BaseException as exc:  # handed to the main thread, which re-raises
                filled.put(exc)

        worker = threading.Thread(target=reader, name="atlas-weight-reader", daemon=True)
        worker.start()
        try:
            while True:
                item = filled.get()
                if item is None:
                    return []
                if isinstance(item, _DirectUnsupported):
                    return spans
                if isinstance(item, BaseException):
                    raise item
                i, buf, base = item
                self._copy_span(spans[i], buf, base)
                free.put(buf)
        finally:
            stop.set()
            free.put(self._staging()[0])  # unblock a reader waiting for a buffer
            worker.join()

    def _mmapped(self, file: Path, spans: list[list[_Piece]]) -> None:
        if not spans:
            return
        with open(file, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            view = np.frombuffer(mm, dtype=np.uint8)
            try:
                for span in spans:
                    self._copy_span(span, view, 0)
            finally:
                del view

    def _copy_span(self, span: list[_Piece], data: np.ndarray, base: int) -> None:
        """Copy each piece of a span (whose bytes start at file offset `base` in `data`)."""
        for p in span:
            if p.end > p.start:
                self.backend.copy_h2d(self.ptrs[p.tensor.name] + p.offset,
                                      data[p.start - base:p.end - base])
            self.bytes_done += p.end - p.start
            self.remaining[p.tensor.name] -= p.end - p.start
            if self.remaining[p.tensor.name] == 0:
                self.tensors_done += 1
        if self.progress is not None:
            self.progress(self.tensors_done, self.total_tensors, self.bytes_done,
                          self.total_bytes, time.perf_counter() - self.t0)
