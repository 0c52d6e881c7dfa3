"""A GGUF (v2/v3) reader: metadata, tensor directory, and dequantization to float32.

GGUF is llama.cpp's single-file format: a header, typed key/value metadata, a tensor
directory, then tensor data aligned to `general.alignment` (32 by default). Dimensions are
stored fastest-first (ne0 = row length), so numpy's row-major shape is the reverse.

Only the formats Atlas imports are decoded (F32, F16, BF16, Q8_0, Q4_1); anything else is
a clear error naming the tensor and its type, never silently wrong numbers. Every count and
offset read from the file is checked against the file size before it is trusted.
"""

from __future__ import annotations

import enum
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
QK = 32  # elements per block of the 8- and 4-bit block formats


class GGUFError(ValueError):
    """The file is not a GGUF file Atlas can read; the message names the file."""


class ValueType(enum.IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


_SCALAR_FORMATS = {ValueType.UINT8: "<B", ValueType.INT8: "<b", ValueType.UINT16: "<H",
                   ValueType.INT16: "<h", ValueType.UINT32: "<I", ValueType.INT32: "<i",
                   ValueType.FLOAT32: "<f", ValueType.BOOL: "<?", ValueType.UINT64: "<Q",
                   ValueType.INT64: "<q", ValueType.FLOAT64: "<d"}
_NUMPY_SCALARS = {ValueType.UINT8: "<u1", ValueType.INT8: "<i1", ValueType.UINT16: "<u2",
                  ValueType.INT16: "<i2", ValueType.UINT32: "<u4", ValueType.INT32: "<i4",
                  ValueType.FLOAT32: "<f4", ValueType.BOOL: "<u1", ValueType.UINT64: "<u8",
                  ValueType.INT64: "<i8", ValueType.FLOAT64: "<f8"}


class TensorType(enum.IntEnum):
    """ggml tensor types; the block formats pack QK elements with per-block scales."""

    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    BF16 = 30


#: (elements per block, bytes per block) of the types this reader decodes
_LAYOUT = {TensorType.F32: (1, 4), TensorType.F16: (1, 2), TensorType.BF16: (1, 2),
           TensorType.Q8_0: (QK, 2 + QK), TensorType.Q4_1: (QK, 4 + QK // 2)}


@dataclass(frozen=True, slots=True)
class GGUFTensor:
    """One tensor's directory entry: numpy-order shape and absolute byte offset."""

    name: str
    type_id: int
    shape: tuple[int, ...]
    offset: int
    nbytes: int

    @property
    def type_name(self) -> str:
        try:
            return TensorType(self.type_id).name
        except ValueError:
            return f"type {self.type_id}"

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


class _Cursor:
    """Bounds-checked little-endian reads from the mapped file."""

    def __init__(self, buf: mmap.mmap, path: Path) -> None:
        self.buf = buf
        self.pos = 0
        self.path = path

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError(f"{self.path}: truncated (wanted {n} bytes at offset {self.pos})")
        view = memoryview(self.buf)[self.pos:self.pos + n]
        self.pos += n
        return view

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.scalar("<Q")
        try:
            return bytes(self.take(n)).decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFError(f"{self.path}: invalid UTF-8 string at offset {self.pos}") from None

    def value(self, vtype: int) -> Any:
        try:
            vt = ValueType(vtype)
        except ValueError:
            raise GGUFError(f"{self.path}: unknown metadata value type {vtype} at offset "
                            f"{self.pos}") from None
        if vt is ValueType.STRING:
            return self.string()
        if vt is ValueType.ARRAY:
            return self.array()
        return self.scalar(_SCALAR_FORMATS[vt])

    def array(self) -> list[Any]:
        etype, count = self.scalar("<I"), self.scalar("<Q")
        if count > len(self.buf) - self.pos:  # every element takes at least one byte
            raise GGUFError(f"{self.path}: array of {count} elements exceeds the file")
        if etype in _NUMPY_SCALARS:
            dtype = np.dtype(_NUMPY_SCALARS[ValueType(etype)])
            out = np.frombuffer(self.take(count * dtype.itemsize), dtype=dtype)
            return (out.astype(bool) if etype == ValueType.BOOL else out).tolist()
        return [self.value(etype) for _ in range(count)]


class GGUFFile:
    """An open GGUF file: `metadata` (key -> value), `tensors` (name -> GGUFTensor)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            if self.path.stat().st_size < 24:
                raise GGUFError(f"{self.path}: too short to be a GGUF file")
            self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._parse()
        except BaseException:
            self._mm.close()
            raise

    def _parse(self) -> None:
        cur = _Cursor(self._mm, self.path)
        if bytes(cur.take(4)) != GGUF_MAGIC:
            raise GGUFError(f"{self.path}: not a GGUF file (bad magic)")
        self.version = cur.scalar("<I")
        if self.version not in (2, 3):
            raise GGUFError(f"{self.path}: GGUF version {self.version} is not supported "
                            f"(supported: 2, 3)")
        n_tensors, n_kv = cur.scalar("<Q"), cur.scalar("<Q")
        self.metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = cur.string()
            self.metadata[key] = cur.value(cur.scalar("<I"))
        entries = []
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.scalar("<I")
            if n_dims > 8:
                raise GGUFError(f"{self.path}: tensor {name!r} has {n_dims} dimensions")
            dims = [cur.scalar("<Q") for _ in range(n_dims)]
            entries.append((name, tuple(reversed(dims)), cur.scalar("<I"), cur.scalar("<Q")))
        self.alignment = self.metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if (not isinstance(self.alignment, int) or self.alignment <= 0
                or self.alignment & (self.alignment - 1)):
            raise GGUFError(f"{self.path}: general.alignment={self.alignment} is not a power "
                            f"of two")
        self.data_offset = -(-cur.pos // self.alignment) * self.alignment
        self.tensors: dict[str, GGUFTensor] = {}
        for name, shape, type_id, rel in entries:
            t = GGUFTensor(name, type_id, shape, self.data_offset + rel,
                           _nbytes(name, type_id, shape))
            if t.nbytes >= 0 and t.offset + t.nbytes > len(self._mm):
                raise GGUFError(f"{self.path}: tensor {name!r} data runs past the end of "
                                f"the file")
            self.tensors[name] = t

    def close(self) -> None:
        self._mm.close()

    def __enter__(self) -> "GGUFFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def require(self, key: str) -> Any:
        """A metadata value that must exist; the error names the key and the file."""
        if key not in self.metadata:
            raise GGUFError(f"{self.path}: metadata key {key!r} is missing")
        return self.metadata[key]

    def raw(self, name: str) -> np.ndarray:
        """The tensor's stored bytes (a copy, so the file can be closed afterwards)."""
        t = self._tensor(name)
        _check_supported(self.path, t)
        return np.frombuffer(self._mm, dtype=np.uint8, count=t.nbytes, offset=t.offset).copy()

    def dequantize(self, name: str) -> np.ndarray:
        """The tensor as float32 in numpy order (shape = reversed GGUF dims)."""
        t = self._tensor(name)
        _check_supported(self.path, t)
        data = np.frombuffer(self._mm, dtype=np.uint8, count=t.nbytes, offset=t.offset)
        return dequantize(TensorType(t.type_id), data, t.count).reshape(t.shape)

    def _tensor(self, name: str) -> GGUFTensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise GGUFError(f"{self.path}: no tensor {name!r}") from None


def _nbytes(name: str, type_id: int, shape: tuple[int, ...]) -> int:
    """Stored size of a tensor, or -1 when its type is one this reader does not decode."""
    try:
        block, size = _LAYOUT[TensorType(type_id)]
    except (ValueError, KeyError):
        return -1
    count = int(np.prod(shape, dtype=np.int64))
    if shape and shape[-1] % block:
        raise GGUFError(f"tensor {name!r}: row length {shape[-1]} is not a multiple of the "
                        f"{TensorType(type_id).name} block size {block}")
    return count // block * size


def _check_supported(path: Path, t: GGUFTensor) -> None:
    if t.nbytes < 0:
        supported = ", ".join(tt.name for tt in _LAYOUT)
        raise GGUFError(f"{path}: tensor {t.name!r} has type {t.type_name}, which Atlas "
                        f"cannot dequantize (supported: {supported})")


def dequantize(ttype: TensorType, data: np.ndarray, count: int) -> np.ndarray:
    """Decode `count` elements of `ttype` from raw bytes to a flat float32 array."""
    if ttype is TensorType.F32:
        return data.view("<f4")[:count].astype(np.float32)
    if ttype is TensorType.F16:
        return data.view("<f2")[:count].astype(np.float32)
    if ttype is TensorType.BF16:
        return (data.view("<u2")[:count].astype(np.uint32) << 16).view(np.float32)
    blocks = data.reshape(count // QK, _LAYOUT[ttype][1])
    if ttype is TensorType.Q8_0:
        # block: f16 scale d, 32 x int8 q; x = d * q
        d = blocks[:, :2].copy().view("<f2").astype(np.float32)
        q = blocks[:, 2:].view(np.int8).astype(np.float32)
        return (d * q).reshape(-1)
    if ttype is TensorType.Q4_1:
        # block: f16 scale d, f16 min m, 16 bytes of nibbles; element j < 16 is the low
        # nibble of byte j, element j + 16 its high nibble; x = d * q + m
        d = blocks[:, 0:2].copy().view("<f2").astype(np.float32)
        m = blocks[:, 2:4].copy().view("<f2").astype(np.float32)
        qs = blocks[:, 4:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)
        return (d * q + m).reshape(-1)
    raise GGUFError(f"cannot dequantize {ttype.name}")
