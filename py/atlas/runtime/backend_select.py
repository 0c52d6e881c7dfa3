"""Choosing a GpuBackend model at startup: the real GPU when there is one, else the CPU.

The CLI and the server call `make_backend` once; nothing below it knows which model it got.
"""

from __future__ import annotations

import os
from typing import Literal, Mapping

from ..kernels.registry import DEFAULT_HOST_HARDWARE, hardware_for_capability
from .gpu import GpuBackend

BackendKind = Literal["auto", "cuda", "host", "mock"]
BACKEND_KINDS: tuple[str, ...] = ("auto", "cuda", "host", "mock")


def cuda_available() -> bool:
    """True when the CUDA driver loads and reports at least one device. Never raises."""
    from .cuda import device_count

    return device_count() > 0


def resolve_kind(kind: str) -> str:
    """The concrete model `kind` stands for ("auto" -> "cuda" or "host")."""
    if kind not in BACKEND_KINDS:
        raise ValueError(f"unknown backend {kind!r}; choose one of {', '.join(BACKEND_KINDS)}")
    if kind == "auto":
        return "cuda" if cuda_available() else "host"
    return kind


def kernel_hardware(kind: str, backend: GpuBackend | None,
                    archs: Mapping[str, str]) -> str:
    """The kernel-tree hardware whose PTX sets (and MODEL.toml behavior) a backend of the
    concrete `kind` uses: on CUDA the one compiled for the device's compute capability (read
    from `backend`, or from device 0 when none is built yet); on the host and mock backends
    DEFAULT_HOST_HARDWARE, the shipped one. `archs` maps hardware -> arch of the built sets."""
    if kind != "cuda":
        return DEFAULT_HOST_HARDWARE
    if backend is not None:
        capability = backend.device_facts().compute_capability
    else:
        from .cuda import device_capability

        found = device_capability()
        if found is None:
            raise ValueError("the CUDA backend was requested but no CUDA device answers")
        capability = found
    return hardware_for_capability(archs, capability)


def pdl_enabled() -> bool:
    """Programmatic dependent launch is on unless ATLAS_PDL=0 (kept for A/B benchmarks and
    as an escape hatch should a driver mishandle it)."""
    return os.environ.get("ATLAS_PDL", "1").strip() not in ("0", "false", "off", "no")


#: the host backend's emulated device memory unless ATLAS_HOST_MEMORY_GIB says otherwise
HOST_MEMORY_GIB = 8


def host_memory_bytes() -> int:
    """The host backend's memory: 8 GiB keeps the tests' models honest about sizing; a
    layer-reduced full-size config (tens of GB) on the host needs ATLAS_HOST_MEMORY_GIB."""
    raw = os.environ.get("ATLAS_HOST_MEMORY_GIB", "").strip()
    try:
        gib = float(raw) if raw else HOST_MEMORY_GIB
    except ValueError:
        raise ValueError(f"ATLAS_HOST_MEMORY_GIB={raw!r} is not a number of GiB") from None
    if gib <= 0:
        raise ValueError(f"ATLAS_HOST_MEMORY_GIB={raw!r} must be positive")
    return int(gib * (1 << 30))


def make_backend(kind: BackendKind | str = "auto",
                 ptx_modules: Mapping[str, bytes] | None = None,
                 ordinal: int = 0) -> GpuBackend:
    """Build the backend `kind` names. `ptx_modules` (module name -> PTX) is loaded by the
    CUDA model; the host and mock models ignore it (their kernels are the references)."""
    concrete = resolve_kind(kind)
    if concrete == "cuda":
        from .cuda import CudaBackend

        return CudaBackend(ordinal=ordinal, modules=ptx_modules or {}, pdl=pdl_enabled())
    if concrete == "host":
        from .host import HostBackend

        return HostBackend(total_memory=host_memory_bytes())
    from .mock import MockGpuBackend

    return MockGpuBackend()
