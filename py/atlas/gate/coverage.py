"""The deterministic plane: which gates a set of changed paths re-opens.

Polarity is "exclude, do not claim": every path on the boundary (PERF_PATHS) re-opens every
gate unless an Exclusion written for that gate, with its reason, matches it. Forgetting to
classify a new subsystem therefore costs a re-run, never a missed regression.

The decision for one path and one gate, in order:

1. a BOUNDARY_FILE (the gate machinery)       -> re-opens the gate, before anything else
2. a file named exactly BENCH.toml in kernels/ -> re-opens nothing (thresholds compile to
                                                  nothing; raising a bar must not void the
                                                  run that proved it reachable)
3. not on the boundary                         -> re-opens nothing
4. an Exclusion for this gate matches          -> the gate stays valid
5. otherwise                                   -> re-opens the gate (the default)

Paths are repository-relative with "/" separators. Matching is component-wise: an entry
covers itself and what lies below it, never a lookalike (`kernels` does not cover
`kernels2/x`, `pyproject.toml` does not cover `pyproject.toml.orig`).

The result of `invalidated_by` is built by union alone, so adding a changed path can never
remove a gate from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from .gates import GATE_NAMES

#: The gate machinery itself: every module that decides `atlas gate check`'s verdict or
#: writes the evidence it rests on (records, thresholds, measured targets), plus the package
#: init that runs before any of them. Editing one re-opens every gate, so no edit to the
#: machinery can excuse itself. Only the advisory plane (`explain.py`) is left off: it
#: decides nothing, and a test holds that `check` never imports it.
BOUNDARY_FILES: tuple[str, ...] = (
    "py/atlas/gate/__init__.py",
    "py/atlas/gate/bench_toml.py",
    "py/atlas/gate/check.py",
    "py/atlas/gate/coverage.py",
    "py/atlas/gate/gates.py",
    "py/atlas/gate/git.py",
    "py/atlas/gate/record.py",
    "py/atlas/gate/records.py",
    "py/atlas/gate/store.py",
    "py/atlas/gate/target_stamps.py",
    "py/atlas/gate/verdict.py",
    "py/atlas/gate/workspace.py",
    "py/atlas_cli/cmd_gate.py",
)

#: What can move a benchmark number: kernels and their build, every host package on the
#: serving path, the benchmark harness and its suite definitions, and the dependency pins.
PERF_PATHS: tuple[str, ...] = (
    "kernels",
    "tools",
    "third_party",
    "WORKSPACE.bazel",
    "BUILD.bazel",
    ".bazelrc",
    "flake.nix",
    "pyproject.toml",
    "py/atlas/__init__.py",
    "py/atlas/core",
    "py/atlas/kernels",
    "py/atlas/runtime",
    "py/atlas/comm",
    "py/atlas/model",
    "py/atlas/engine",
    "py/atlas/server",
    "py/atlas/bench",
    "py/atlas_cli",
    "bench",
)

KERNELS_DIR = "kernels"
BENCH_FILENAME = "BENCH.toml"


@dataclass(frozen=True)
class Exclusion:
    """A claim that changes under `prefix` cannot move one gate's numbers. The rationale is
    what a reviewer checks when the claim is made and what refutes it when it turns out to be
    wrong, so an Exclusion without one cannot be constructed."""

    prefix: str
    rationale: str

    def __post_init__(self) -> None:
        if not self.prefix or self.prefix != self.prefix.strip("/"):
            raise ValueError(f"exclusion prefix must be a relative path, got {self.prefix!r}")
        if not self.rationale.strip():
            raise ValueError(f"exclusion of {self.prefix!r} has no rationale")


_KERNEL_CHECK = Exclusion(
    "py/atlas/runtime/kernel_check.py",
    "the kernel correctness harness (poisoned outputs vs a float64 oracle); only tests and the "
    "GPU check script import it, never the engine or the benchmark harness")
_KERNEL_CASES = Exclusion(
    "py/atlas/runtime/cases",
    "kernel check cases: inputs and oracles for the correctness harness, imported only "
    "through kernel_check")
_REFERENCE_KERNELS = Exclusion(
    "py/atlas/runtime/reference",
    "numpy reference kernels execute only on HostBackend; every gate is measured on the CUDA "
    "backend, which launches PTX and never calls a reference")
_MODEL_LAYERS = Exclusion(
    "py/atlas/model",
    "the kernel table launches each kernel directly through the runtime on fixed shapes; "
    "model layers, loader and engine loop are not on its path")

_ENGINE_CORE = Exclusion(
    "py/atlas/engine",
    "the kernel table launches each kernel directly through the runtime on fixed shapes; "
    "the scheduler and the engine loop are not on its path")

_RESULTS = Exclusion(
    "bench/results",
    "recorded outputs of past benchmark runs (JSON/Markdown); no code reads them while a "
    "benchmark runs, so adding a result cannot change the next one")

_NOT_MEASURED_ANYWHERE = (_KERNEL_CHECK, _KERNEL_CASES, _REFERENCE_KERNELS, _RESULTS)

#: Per gate, the boundary paths that cannot move its numbers, each with the reason.
EXCLUSIONS: Mapping[str, tuple[Exclusion, ...]] = MappingProxyType({
    "decode-floor": _NOT_MEASURED_ANYWHERE,
    "concurrency-sweep": _NOT_MEASURED_ANYWHERE,
    "ttft-cold": _NOT_MEASURED_ANYWHERE,
    "ttft-warm": _NOT_MEASURED_ANYWHERE,
    "kernel-table": (*_NOT_MEASURED_ANYWHERE, _MODEL_LAYERS, _ENGINE_CORE),
})


def is_under(path: str, entry: str) -> bool:
    """Component-wise containment: `path` is `entry` or lies inside the directory `entry`."""
    return path == entry or path.startswith(entry + "/")


def is_boundary_file(path: str) -> bool:
    return path in BOUNDARY_FILES


def is_bench_thresholds(path: str) -> bool:
    """A threshold file: exactly `BENCH.toml`, somewhere under kernels/."""
    return is_under(path, KERNELS_DIR) and path.rsplit("/", 1)[-1] == BENCH_FILENAME


def on_boundary(path: str) -> bool:
    return any(is_under(path, entry) for entry in PERF_PATHS)


def excluded(gate: str, path: str) -> bool:
    return any(is_under(path, e.prefix) for e in EXCLUSIONS.get(gate, ()))


def invalidates(gate: str, path: str) -> bool:
    """Does a change to `path` re-open `gate`? The decision order is the module docstring's."""
    if is_boundary_file(path):
        return True
    if is_bench_thresholds(path):
        return False
    if not on_boundary(path):
        return False
    return not excluded(gate, path)


def invalidated_by(changed_paths: Iterable[str]) -> set[str]:
    """Every gate some changed path re-opens. Built by union only (monotone in its input)."""
    reopened: set[str] = set()
    for path in changed_paths:
        reopened |= {gate for gate in GATE_NAMES if invalidates(gate, path)}
    return reopened


def invalidating_paths(gate: str, changed_paths: Iterable[str]) -> list[str]:
    """The changed paths that re-open `gate`, sorted, so a message can name them."""
    return sorted({p for p in changed_paths if invalidates(gate, p)})
