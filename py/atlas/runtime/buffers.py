"""BufferArena: every scratch buffer of a serve, allocated once, at addresses that never move.

Planning code reserves named buffers sized for the worst case the limits allow; `allocate`
then makes one device allocation and carves it into 256-byte-aligned slices. Because the
arena never reallocates, the addresses baked into captured CUDA graphs stay valid for the
life of the process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

from ..core.dtype import DType
from .gpu import DevicePtr, GpuBackend

#: slice alignment: enough for any vector load and for cp.async.bulk / TMA (128 B)
ARENA_ALIGNMENT = 256


@dataclass(frozen=True, slots=True)
class ArenaSlice:
    """One named buffer: its element type and shape, and its place in the arena."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    offset: int
    nbytes: int

    @property
    def count(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class BufferArena:
    """Named, graph-stable scratch buffers carved out of one device allocation."""

    def __init__(self, alignment: int = ARENA_ALIGNMENT) -> None:
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"alignment must be a power of two, got {alignment}")
        self.alignment = alignment
        self._slices: dict[str, ArenaSlice] = {}
        self._size = 0
        self._backend: GpuBackend | None = None
        self._base: DevicePtr | None = None
        self._released = False

    # ---- planning -----------------------------------------------------------------
    def reserve(self, name: str, dtype: DType, shape: int | Sequence[int]) -> ArenaSlice:
        """Reserve `name` as a dtype[shape] buffer; only before `allocate`."""
        if self._base is not None or self._released:
            raise RuntimeError(f"arena already allocated; cannot reserve {name!r} "
                               "(plan every buffer before allocate())")
        if name in self._slices:
            raise ValueError(f"arena buffer {name!r} reserved twice")
        dims = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
        if any(d < 0 for d in dims):
            raise ValueError(f"arena buffer {name!r}: negative dimension in {dims}")
        count = 1
        for d in dims:
            count *= d
        offset = -(-self._size // self.alignment) * self.alignment
        sl = ArenaSlice(name, dtype, dims, offset, dtype.nbytes(count))
        self._slices[name] = sl
        self._size = offset + sl.nbytes
        return sl

    @property
    def nbytes(self) -> int:
        """Bytes the arena needs (or holds, once allocated)."""
        return -(-self._size // self.alignment) * self.alignment

    # ---- allocation ---------------------------------------------------------------
    def allocate(self, backend: GpuBackend) -> DevicePtr:
        """Make the one device allocation backing every reserved buffer."""
        if self._base is not None or self._released:
            raise RuntimeError("arena already allocated")
        self._backend = backend
        self._base = backend.alloc(max(self.nbytes, self.alignment))
        if self._base % self.alignment:
            raise RuntimeError(f"device allocation {self._base:#x} is not "
                               f"{self.alignment}-byte aligned")
        return self._base

    def release(self) -> None:
        """Free the device allocation (at shutdown); the arena cannot be used afterwards."""
        if self._backend is not None and self._base is not None:
            self._backend.free(self._base)
        self._backend = None
        self._base = None
        self._released = True

    @property
    def is_allocated(self) -> bool:
        return self._base is not None

    # ---- lookup -------------------------------------------------------------------
    def slice(self, name: str) -> ArenaSlice:
        sl = self._slices.get(name)
        if sl is None:
            raise KeyError(f"no arena buffer {name!r}; reserved: {', '.join(self._slices)}")
        return sl

    def __getitem__(self, name: str) -> DevicePtr:
        """Device address of buffer `name` (after `allocate`)."""
        sl = self.slice(name)
        if self._base is None:
            state = "after release()" if self._released else "before allocate()"
            raise RuntimeError(f"arena buffer {name!r} has no address {state}")
        return self._base + sl.offset

    def __contains__(self, name: object) -> bool:
        return name in self._slices

    def __iter__(self) -> Iterator[ArenaSlice]:
        return iter(self._slices.values())

    def __len__(self) -> int:
        return len(self._slices)

    def describe(self) -> str:
        """One line per buffer (name, dtype, shape, MiB) for startup logs."""
        lines = [f"{sl.name:<16} {sl.dtype.label:<8} {str(sl.shape):<24} "
                 f"{sl.nbytes / 2**20:10.2f} MiB" for sl in self._slices.values()]
        lines.append(f"{'total':<16} {'':<8} {'':<24} {self.nbytes / 2**20:10.2f} MiB")
        return "\n".join(lines)
