"""Kernel cases: random inputs, a float64 oracle, and a runner for any GpuBackend.

A case is written once per kernel and used twice: the CPU tests run it on HostBackend
(reference kernel vs oracle) and the GPU check script runs it on CudaBackend (CUDA kernel vs
the same oracle and vs the reference kernel's exact output). Outputs are poisoned before
each run (0xFF bytes: NaN in bf16/f32), so an element the kernel never wrote fails.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from ..core.dtype import DType
from ..core.numerics import bf16_bits_to_f32
from .gpu import DevicePtr, GpuBackend, Stream

RunFn = Callable[[GpuBackend, Stream, dict[str, DevicePtr]], None]
OracleFn = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]

#: default (atol, rtol) by output dtype, against a float64 oracle
DEFAULT_TOL: dict[DType, tuple[float, float]] = {
    DType.BF16: (2e-2, 2e-2),
    DType.FP32: (1e-4, 1e-4),
    DType.I32: (0.0, 0.0),
    DType.U8: (0.0, 0.0),
}


@dataclass
class OutputSpec:
    dtype: DType
    shape: tuple[int, ...]
    tol: tuple[float, float] | None = None  # (atol, rtol); None uses DEFAULT_TOL
    #: f32 storage holding bf16-rounded values (logits): compared at bf16 precision
    bf16_valued: bool = False

    @property
    def precision(self) -> DType:
        """The precision the values carry (what tolerances are chosen by)."""
        return DType.BF16 if self.bf16_valued else self.dtype


@dataclass
class KernelCase:
    """One launch to check. `inputs` hold host arrays (bf16 as uint16 bits); buffers named
    in both `inputs` and `outputs` are in/out and are uploaded, not poisoned."""

    name: str
    module: str
    inputs: dict[str, np.ndarray]
    outputs: dict[str, OutputSpec]
    run: RunFn
    oracle: OracleFn
    compare_mask: dict[str, np.ndarray] = field(default_factory=dict)  # True = compared
    #: absolute distance from the host reference every element may have on top of the
    #: per-element bf16-ulp bound: tensor-core accumulation over a long K differs from the
    #: exactly rounded f32 sum by more than an ulp of a small output (see cases/gemv.py)
    reference_abs_tol: float = 0.0
    #: per-element distance from the host reference allowed on top of that (arrays of the
    #: outputs' shapes): where an output is a steep function of an intermediate rounded to
    #: bf16, that rounding can land on the other side of a tie (cases/gemv.py glu_flip_slack)
    reference_slack: dict[str, np.ndarray] = field(default_factory=dict)
    #: also captured into the device check's CUDA graph (tools/gpu/check_kernels.py), for
    #: kernels whose launches must replay: state they leave (counters) or buffers they swap
    graph: bool = False
    #: False where run() synchronizes or captures a graph itself (launches that must see an
    #: earlier launch finished, graph-replay cases): the device check's graph capture then
    #: never picks the case, which would invalidate the capture
    capturable: bool = True
    #: pairs of outputs (same dtype and shape) that must hold the same bits on every
    #: backend: two launch paths specified to compute identical values (a row of a
    #: many-row launch and the one-row launch of that row, a fused kernel and its parts)
    same_bits: tuple[tuple[str, str], ...] = ()


@dataclass
class CaseResult:
    name: str
    module: str
    passed: bool
    max_abs_err: dict[str, float]
    detail: str
    outputs: dict[str, np.ndarray]


CaseFactory = Callable[[np.random.Generator], list[KernelCase]]
CASE_FACTORIES: dict[str, CaseFactory] = {}


def kernel_cases(module: str) -> Callable[[CaseFactory], CaseFactory]:
    """Register a factory producing the check cases of one kernel module."""

    def register(fn: CaseFactory) -> CaseFactory:
        CASE_FACTORIES[f"{module}:{fn.__name__}"] = fn
        return fn

    return register


def host_dtype(dt: DType) -> type:
    """The numpy type a host array of `dt` holds (bf16 as uint16 bit patterns)."""
    return {DType.BF16: np.uint16, DType.FP32: np.float32, DType.I32: np.int32,
            DType.U8: np.uint8, DType.FP16: np.float16}[dt]


def as_float(arr: np.ndarray, dt: DType) -> np.ndarray:
    """Host output -> float64 for comparison (bf16 bits are widened)."""
    if dt is DType.BF16:
        return bf16_bits_to_f32(arr).astype(np.float64)
    return arr.astype(np.float64)


def bf16_ulp(magnitude: np.ndarray | float) -> np.ndarray:
    """The spacing of bf16 values at each magnitude (8 significant bits; the check script's
    reference tolerance counts in these), for tolerances derived from a case's own values."""
    m = np.maximum(np.abs(np.asarray(magnitude, dtype=np.float64)), 2.0 ** -126)
    return np.exp2(np.floor(np.log2(m)) - 7)


def execute(backend: GpuBackend, case: KernelCase) -> dict[str, np.ndarray]:
    """Upload inputs, poison outputs, launch, synchronize and read every output back."""
    ptrs: dict[str, DevicePtr] = {}
    try:
        for name, arr in case.inputs.items():
            ptrs[name] = backend.upload(arr)
        for name, spec in case.outputs.items():
            if name in ptrs:
                continue
            nbytes = max(spec.dtype.nbytes(int(np.prod(spec.shape))), 1)
            ptrs[name] = backend.alloc(nbytes)
            backend.memset(ptrs[name], 0xFF, nbytes)
        stream = backend.default_stream()
        case.run(backend, stream, ptrs)
        backend.synchronize(stream)
        return {name: backend.download(ptrs[name], host_dtype(spec.dtype), spec.shape)
                for name, spec in case.outputs.items()}
    finally:
        for ptr in ptrs.values():
            backend.free(ptr)


def compare(case: KernelCase, got: dict[str, np.ndarray],
            expected: dict[str, np.ndarray]) -> CaseResult:
    """Compare outputs with expected float arrays; NaN anywhere compared never passes."""
    errs: dict[str, float] = {}
    problems: list[str] = []
    for name, spec in case.outputs.items():
        g = as_float(got[name], spec.dtype)
        e = np.asarray(expected[name], dtype=np.float64).reshape(spec.shape)
        mask = case.compare_mask.get(name)
        if mask is not None:
            g, e = g[mask], e[mask]
        atol, rtol = spec.tol or DEFAULT_TOL[spec.precision]
        if np.isnan(g).any():
            problems.append(f"{name}: {int(np.isnan(g).sum())} NaN (unwritten or invalid)")
            errs[name] = float("nan")
            continue
        with np.errstate(invalid="ignore"):  # equal infinities (e.g. m = -inf) match
            diff = np.where(g == e, 0.0, np.abs(g - e))
        errs[name] = float(diff.max()) if diff.size else 0.0
        bad = diff > atol + rtol * np.abs(e)
        if bad.any():
            idx = np.argwhere(bad)[0]
            problems.append(f"{name}: {int(bad.sum())}/{bad.size} outside tol "
                            f"(first at {tuple(int(i) for i in idx)}: got {g[tuple(idx)]}, "
                            f"want {e[tuple(idx)]})")
    for a, b in case.same_bits:
        differ = got[a].view(np.uint8) != got[b].view(np.uint8)
        if differ.any():
            problems.append(f"{a} vs {b}: {int(differ.sum())} bytes differ (must be bit for "
                            "bit equal)")
    return CaseResult(case.name, case.module, not problems, errs, "; ".join(problems), got)


def check(backend: GpuBackend, case: KernelCase) -> CaseResult:
    """Run a case on `backend` and compare it with its float64 oracle."""
    got = execute(backend, case)
    return compare(case, got, case.oracle(case.inputs))


def factory_rng(seed: int, key: str) -> np.random.Generator:
    """The generator the factory registered as `key` draws from: seeded with `seed` and the
    key's CRC-32, so a module's inputs depend on the seed and that factory alone, never on
    which other modules were selected or on factories registered later (a case that fails
    under one selection then fails under every selection, and reproduces with one -m)."""
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def module_cases(modules: Iterable[str] | None, seed: int,
                 keep: Callable[[KernelCase], bool] | None = None) -> list[KernelCase]:
    """The registered cases of `modules` (every module when None; their case modules imported
    by the caller), each factory drawing from its own generator (`factory_rng`); `keep` drops
    cases after their factory has built them (a factory's later cases draw the same inputs
    whatever it drops). Only the named modules' factories run: the whole registry's inputs
    take minutes and gigabytes to build."""
    wanted = None if modules is None else set(modules)
    return [case for key, factory in sorted(CASE_FACTORIES.items())
            if wanted is None or key.split(":")[0] in wanted
            for case in factory(factory_rng(seed, key))
            if keep is None or keep(case)]


def all_cases(seed: int = 0, modules: Iterable[str] | None = None) -> list[KernelCase]:
    """The registered cases (imports the case modules first) of `modules`, or of every
    module, with fresh random inputs."""
    from . import cases  # noqa: F401  (registers factories)

    return module_cases(modules, seed)
