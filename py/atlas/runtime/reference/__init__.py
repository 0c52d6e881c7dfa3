"""Numpy reference kernels: the specification of every CUDA kernel.

Each reference is registered under the same (module, function) as its CUDA entry point and
is called by HostBackend with the kernel's launch geometry and its packed argument values.
Device pointers are resolved through a `HostMemory` into writable numpy views. bf16 is
stored as uint16 bit patterns and converted with `atlas.core.numerics`.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

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
