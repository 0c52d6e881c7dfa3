"""Numpy reference kernels: the specification of every CUDA kernel.

Each reference is registered under the same (module, function) as its CUDA entry point and
is called by HostBackend with the kernel's launch geometry and its packed argument values.
Device pointers are resolved through a `HostMemory` into writable numpy views. bf16 is
stored as uint16 bit patterns and converted with `atlas.core.numerics`.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol

import numpy as np

from ..gpu import Dim3, KernelSig


class HostMemory(Protocol):
    def view(self, ptr: int, dtype: Any, count: int) -> np.ndarray:
        """A writable 1-D view of `count` elements of `dtype` starting at device address ptr."""


def widened_f64(mem: HostMemory, ptr: int, count: int) -> np.ndarray:
    """bf16 elements at ptr as float64, cached by backends that keep derived forms of
    constant memory (HostBackend.derived); converted afresh otherwise."""
    from ...core.numerics import bf16_bits_to_f32

    def make(view: np.ndarray) -> np.ndarray:
        return bf16_bits_to_f32(view).astype(np.float64)

    derived = getattr(mem, "derived", None)
    if derived is None:
        return make(mem.view(ptr, np.uint16, count))
    return derived(ptr, count, np.uint16, "bf16->f64", make)


def pitched_rows(mem: HostMemory, ptr: int, rows: int, pitch: int, width: int,
                 dtype: Any = np.uint16) -> np.ndarray:
    """The first `width` elements of `rows` rows that start `pitch` elements apart (a
    column range of a wider buffer, e.g. one part of a fused projection), as a copy."""
    flat = mem.view(ptr, dtype, (rows - 1) * pitch + width) if rows else np.empty(0, dtype)
    return flat[np.arange(rows)[:, None] * pitch + np.arange(width)[None, :]]


class StepSequence(NamedTuple):
    """One sequence of a step with recurrent state: its token rows lo..hi-1, the absolute
    position of its first token, and its state slot."""

    lo: int
    hi: int
    start: int
    slot: int

    @property
    def fresh(self) -> bool:
        """The chunk starts at position 0: the slot holds nothing of this sequence."""
        return self.start == 0


def step_sequences(mem: HostMemory, cu_q: int, kv_lens: int, state_slots: int,
                   num_seqs: int) -> list[StepSequence]:
    """The sequences of a step with recurrent state; sequences without tokens are left out."""
    cu = mem.view(cu_q, np.int32, num_seqs + 1).astype(np.int64)
    lens = mem.view(kv_lens, np.int32, num_seqs).astype(np.int64)
    slots = mem.view(state_slots, np.int32, num_seqs).astype(np.int64)
    return [StepSequence(int(cu[b]), int(cu[b + 1]), int(lens[b] - (cu[b + 1] - cu[b])),
                         int(slots[b]))
            for b in range(num_seqs) if cu[b + 1] > cu[b]]


class WithScratch:
    """The caller's memory plus one private buffer at address 0 (null: never a device
    allocation), so reference kernels can be chained through an intermediate that the
    fused CUDA kernel keeps in registers. Other addresses, and `derived`, pass through."""

    ADDRESS = 0

    def __init__(self, mem: HostMemory, nbytes: int) -> None:
        self._mem = mem
        self._scratch = np.zeros(nbytes, dtype=np.uint8)

    def view(self, ptr: int, dtype: Any, count: int) -> np.ndarray:
        if ptr != self.ADDRESS:
            return self._mem.view(ptr, dtype, count)
        return self._scratch.view(dtype)[:count]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mem, name)


ReferenceFn = Callable[..., None]  # fn(mem, grid, block, *values)

REFERENCES: dict[tuple[str, str], ReferenceFn] = {}


def reference(sig: KernelSig) -> Callable[[ReferenceFn], ReferenceFn]:
    """Register `fn(mem, grid, block, *values)` as the reference for `sig`."""

    def register(fn: ReferenceFn) -> ReferenceFn:
        key = (sig.module, sig.func)
        if key in REFERENCES:
            raise ValueError(f"duplicate reference kernel for {key}")
        REFERENCES[key] = fn
        return fn

    return register


def load_all() -> dict[tuple[str, str], ReferenceFn]:
    """Import every reference module so that its kernels are registered."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return REFERENCES
