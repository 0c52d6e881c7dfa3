"""The deterministic plane: boundary files first, component-wise matching, exclusions that
must state a reason and point at real boundary paths, and monotonicity (union only)."""

from __future__ import annotations

import ast
import functools
import random
from pathlib import Path

import pytest

from atlas.gate import coverage
from atlas.gate.coverage import (BOUNDARY_FILES, EXCLUSIONS, PERF_PATHS, Exclusion,
                                 invalidated_by, invalidates, invalidating_paths, is_under)
from atlas.gate.gates import GATE_NAMES, GATES, Bound, Gate

REPO = Path(__file__).resolve().parents[2]
ALL = set(GATE_NAMES)


def _exclude_everything() -> dict[str, tuple[Exclusion, ...]]:
    """The attack: every gate excludes every top-level path and every boundary file."""
    blanket = tuple(Exclusion(p, "exclude everything") for p in
                    (*PERF_PATHS, "py", "py/atlas", "py/atlas/gate", *BOUNDARY_FILES))
    return {gate: blanket for gate in GATE_NAMES}


# --- the decision order --------------------------------------------------------------------

@pytest.mark.parametrize("path", BOUNDARY_FILES)
def test_boundary_file_reopens_every_gate(path: str) -> None:
    assert invalidated_by([path]) == ALL


@pytest.mark.parametrize("path", BOUNDARY_FILES)
def test_blanket_exclusion_cannot_exempt_the_boundary_files(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coverage, "EXCLUSIONS", _exclude_everything())
    assert invalidated_by(["kernels/hopper/common/rmsnorm.cu", "py/atlas/model/x.py"]) == set()
    assert invalidated_by([path]) == ALL


def test_bench_exemption_is_checked_after_the_boundary_files(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rules_in_a_bench_file = "kernels/hopper/qwen3-8b/BENCH.toml"
    assert invalidated_by([rules_in_a_bench_file]) == set()
    monkeypatch.setattr(coverage, "BOUNDARY_FILES", (*BOUNDARY_FILES, rules_in_a_bench_file))
    assert invalidated_by([rules_in_a_bench_file]) == ALL


@pytest.mark.parametrize("path", [
    "kernels/hopper/qwen3-8b/BENCH.toml",
    "kernels/gb10/qwen3/BENCH.toml",
    "kernels/BENCH.toml",  # misplaced, but still nothing compiles it
])
def test_bench_toml_under_kernels_is_exempt(path: str) -> None:
    assert invalidated_by([path]) == set()


@pytest.mark.parametrize("path", [
    "kernels/hopper/qwen3-8b/BENCH.toml.orig",
    "kernels/hopper/qwen3-8b/BENCH.tomlx",
    "kernels/hopper/qwen3-8b/XBENCH.toml",
    "kernels/hopper/qwen3-8b/bench.toml",
    "kernels/hopper/qwen3-8b/BENCH.toml/evil.cu",
])
def test_bench_exemption_is_by_exact_filename(path: str) -> None:
    assert invalidated_by([path]) == ALL


@pytest.mark.parametrize("path", [
    "README.md", "docs/gate.md", "tests/unit/test_x.py", "ci/lint.sh", ".ci/run",
    ".benchmarks/decode-floor/2026-11-30-0123456789.json", "py/atlas/gate/explain.py",
    "BENCH.toml", "docs/kernels/x.cu",
])
def test_off_the_boundary_reopens_nothing(path: str) -> None:
    assert invalidated_by([path]) == set()


@pytest.mark.parametrize("path", [
    "kernels/hopper/common/rmsnorm.cu", "kernels/hopper/common/atlas_common.cuh",
    "kernels/hopper/HARDWARE.toml", "py/atlas/server/x.py",
    "py/atlas/runtime/gpu.py", "py/atlas/core/target.py", "pyproject.toml",
    "tools/kernels.bzl", "py/atlas_cli/main.py", "py/atlas/bench/client.py",
])
def test_unexcluded_boundary_path_reopens_every_gate(path: str) -> None:
    assert invalidated_by([path]) == ALL


def test_exclusion_keeps_only_its_own_gate_valid() -> None:
    assert invalidated_by(["py/atlas/model/engine.py"]) == ALL - {"kernel-table"}
    assert invalidated_by(["py/atlas/runtime/reference/rmsnorm.py"]) == set()
    assert invalidated_by(["py/atlas/runtime/gpu.py"]) == ALL


# --- component-wise matching ---------------------------------------------------------------

@pytest.mark.parametrize("path,entry,under", [
    ("kernels", "kernels", True),
    ("kernels/hopper/x.cu", "kernels", True),
    ("kernels2/x", "kernels", False),
    ("kernels.bak/x.cu", "kernels", False),
    ("pyproject.toml.orig", "pyproject.toml", False),
    ("pyproject.toml", "pyproject.toml", True),
    ("py/atlas/modelx/a.py", "py/atlas/model", False),
    ("py/atlas/model/a.py", "py/atlas/model", True),
    ("xkernels/a", "kernels", False),
    ("py/atlas/gate/coverage.py.orig", "py/atlas/gate/coverage.py", False),
])
def test_is_under_is_component_wise(path: str, entry: str, under: bool) -> None:
    assert is_under(path, entry) is under


@pytest.mark.parametrize("path", [
    "kernels2/x", "kernels2/hopper/common/rmsnorm.cu", "py/atlas/gate/coverage.py.orig",
    "py/atlas/gate/coverage.pyc", "py/atlas/gate/coverage_test.py", "pyproject.toml.orig",
    "py/atlas/modelx/engine.py", "py/atlas_cli2/main.py", "toolsx/a", "benchmarks/x",
    "py/atlas/kernels2/x.py", "WORKSPACE.bazel.bak", "third_party_extra/x",
])
def test_lookalikes_reopen_nothing(path: str) -> None:
    assert invalidated_by([path]) == set()


@pytest.mark.parametrize("path", [
    "py/atlas_cli/cmd_gate.py.orig", "py/atlas_cli/cmd_gatex.py",
    "py/atlas/runtime/referencex/a.py", "py/atlas/runtime/kernel_check.py.bak",
])
def test_exclusion_lookalikes_are_not_excluded(path: str) -> None:
    assert invalidated_by([path]) == ALL


# --- the lattice ---------------------------------------------------------------------------

_POOL = [
    *BOUNDARY_FILES, *PERF_PATHS, "kernels/hopper/common/rmsnorm.cu",
    "kernels/hopper/qwen3-8b/BENCH.toml", "kernels/hopper/qwen3-8b/BENCH.toml.orig",
    "py/atlas/model/engine.py", "py/atlas/runtime/reference/a.py", "py/atlas_cli/cmd_gate.py",
    "py/atlas/runtime/kernel_check.py", "docs/a.md", "tests/unit/test_a.py", "kernels2/x",
    "py/atlas/gate/coverage.py.orig", "README.md", "py/atlas/gate/explain.py", "",
    "../kernels/x", "/kernels/x", "kernels//x", "./kernels/x", "py/atlas/runtime/cases/a.py",
]


def _random_path(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return rng.choice(_POOL)
    base = rng.choice(_POOL)
    return base + rng.choice(["/x.cu", ".orig", "2/a", "/BENCH.toml", "/sub/dir.cuh", "x"])


def test_adding_a_path_never_removes_a_gate() -> None:
    rng = random.Random(20261130)
    for _ in range(2000):
        paths = [_random_path(rng) for _ in range(rng.randint(0, 8))]
        before = invalidated_by(paths)
        after = invalidated_by([*paths, _random_path(rng)])
        assert before <= after, (paths, before, after)


def test_monotone_under_random_exclusion_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property is structural, not a property of today's table."""
    rng = random.Random(7)
    for _ in range(300):
        table = {gate: tuple(Exclusion(rng.choice(_POOL).strip("/") or "x", "random claim")
                             for _ in range(rng.randint(0, 4)))
                 for gate in GATE_NAMES}
        monkeypatch.setattr(coverage, "EXCLUSIONS", table)
        paths = [_random_path(rng) for _ in range(rng.randint(0, 6))]
        extra = [_random_path(rng) for _ in range(rng.randint(1, 3))]
        assert invalidated_by(paths) <= invalidated_by(paths + extra)
        assert ALL <= invalidated_by(paths + [rng.choice(BOUNDARY_FILES)])


def test_invalidated_by_is_the_union_of_single_paths() -> None:
    rng = random.Random(11)
    for _ in range(500):
        paths = [_random_path(rng) for _ in range(rng.randint(0, 6))]
        union: set[str] = set()
        for p in paths:
            union |= invalidated_by([p])
        assert invalidated_by(paths) == union


def test_invalidating_paths_names_exactly_the_reopening_ones() -> None:
    changed = ["docs/a.md", "py/atlas/model/engine.py", "kernels/hopper/common/rmsnorm.cu",
               "kernels/hopper/x/BENCH.toml"]
    assert invalidating_paths("decode-floor", changed) == [
        "kernels/hopper/common/rmsnorm.cu", "py/atlas/model/engine.py"]
    assert invalidating_paths("kernel-table", changed) == ["kernels/hopper/common/rmsnorm.cu"]


# --- auditing the rules --------------------------------------------------------------------

def test_exclusion_needs_a_rationale() -> None:
    with pytest.raises(ValueError, match="rationale"):
        Exclusion("py/atlas/model", "")
    with pytest.raises(ValueError, match="rationale"):
        Exclusion("py/atlas/model", "   ")
    with pytest.raises(ValueError, match="relative path"):
        Exclusion("/py/atlas/model", "absolute")
    with pytest.raises(ValueError, match="relative path"):
        Exclusion("", "empty prefix covers nothing and everything")


def test_exclusions_are_keyed_by_known_gates() -> None:
    assert set(EXCLUSIONS) <= ALL


@pytest.mark.parametrize("gate,exclusion",
                         [(g, e) for g, es in EXCLUSIONS.items() for e in es],
                         ids=lambda v: getattr(v, "prefix", v))
def test_every_exclusion_names_an_existing_path_on_the_boundary(
        gate: str, exclusion: Exclusion) -> None:
    assert (REPO / exclusion.prefix).exists(), f"{gate}: {exclusion.prefix} does not exist"
    assert any(is_under(exclusion.prefix, entry) for entry in PERF_PATHS), \
        f"{gate}: {exclusion.prefix} is off the boundary, so excluding it has no effect"
    assert not any(is_under(b, exclusion.prefix) for b in BOUNDARY_FILES), \
        f"{gate}: {exclusion.prefix} claims to exclude a boundary file"
    assert invalidates(gate, exclusion.prefix) is False


def test_every_gate_is_required_or_excused() -> None:
    for gate in GATES:
        assert gate.required or gate.excuse.strip(), gate.name
    with pytest.raises(ValueError, match="must say why"):
        Gate("g", "s", "d", {"m": Bound.AT_LEAST}, required=False)
    with pytest.raises(ValueError, match="excuse would be ignored"):
        Gate("g", "s", "d", {"m": Bound.AT_LEAST}, excuse="why")


def test_boundary_and_perf_entries_are_clean_relative_paths() -> None:
    for entry in (*BOUNDARY_FILES, *PERF_PATHS):
        assert entry and entry == entry.strip("/") and "//" not in entry and ".." not in entry


def _module_file(module: str) -> Path:
    path = REPO / "py" / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _imports(path: Path, package: str) -> set[str]:
    """Absolute names of the modules `path` imports (relative imports resolved)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names.add(prefix)
            names |= {f"{prefix}.{a.name}" for a in node.names}
    return names


def _gate_modules_reached(module: str) -> set[str]:
    seen: set[str] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        if name in seen or not _module_file(name).is_file():
            continue
        seen.add(name)
        package = name.rsplit(".", 1)[0]
        pending += [n for n in _imports(_module_file(name), package)
                    if n.startswith("atlas.gate.")]
    return seen


def test_everything_the_verdict_runs_on_is_a_boundary_file() -> None:
    """Every gate module that `check`, its wiring, the CLI or the recorder loads can change a
    verdict or the evidence behind one, so editing it must re-open every gate."""
    reached: set[str] = set()
    for entry in ("atlas.gate.check", "atlas.gate.workspace", "atlas.gate.record",
                  "atlas.gate.target_stamps", "atlas_cli.cmd_gate"):
        reached |= {_module_file(m).relative_to(REPO).as_posix()
                    for m in _gate_modules_reached(entry)}
    reached.add("py/atlas/gate/__init__.py")  # runs before any module of the package
    reached.discard("py/atlas/gate/explain.py")  # imported lazily by `gate explain` alone
    assert reached <= set(BOUNDARY_FILES)


def test_only_the_advisory_plane_is_left_off_the_boundary() -> None:
    """A new module in the gate package must be classified: it lands on the boundary unless
    it is the advisory plane."""
    package = {p.relative_to(REPO).as_posix() for p in (REPO / "py/atlas/gate").glob("*.py")}
    assert package - set(BOUNDARY_FILES) == {"py/atlas/gate/explain.py"}
    assert invalidated_by(["py/atlas/gate/explain.py"]) == set()


@functools.cache
def _import_index() -> dict[str, frozenset[str]]:
    """Repo-relative path of every module under py/ -> the modules it imports."""
    index = {}
    for path in (REPO / "py").rglob("*.py"):
        rel = path.relative_to(REPO / "py").with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        index[path.relative_to(REPO).as_posix()] = frozenset(_imports(path, package))
    return index


def _importers_of(target: str) -> set[str]:
    return {path for path, names in _import_index().items()
            if any(n == target or n.startswith(target + ".") for n in names)}


def test_kernel_check_harness_stays_off_the_serving_path() -> None:
    """The precondition of the kernel_check / cases exclusions."""
    for target in ("atlas.runtime.kernel_check", "atlas.runtime.cases"):
        importers = _importers_of(target)
        assert all(is_under(p, "py/atlas/runtime/cases") or
                   p == "py/atlas/runtime/kernel_check.py" for p in importers), \
            f"{target} is imported by {sorted(importers)}: revisit its exclusion"


def test_reference_kernels_are_reached_only_through_the_host_backend() -> None:
    """The precondition of the reference-kernel exclusion: the CUDA backend never runs one."""
    allowed = ("py/atlas/runtime/host.py", "py/atlas/runtime/reference",
               "py/atlas/runtime/cases", "py/atlas/runtime/kernel_check.py")
    importers = _importers_of("atlas.runtime.reference")
    assert all(any(is_under(p, a) for a in allowed) for p in importers), \
        f"atlas.runtime.reference is imported by {sorted(importers)}: revisit its exclusion"
