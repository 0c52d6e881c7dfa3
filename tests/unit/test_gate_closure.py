"""The closure rung on a real (temporary) kernel tree, end to end through git and the CLI,
and the closure attestation: every baked hash recomputed from the tree by the gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from atlas.core.target import KernelTarget
from atlas.gate import record as gate_record
from atlas.gate.check import GateInput, evaluate
from atlas.gate.gates import gate_by_name
from atlas.gate.records import Record, StoredRecord, TargetStamp, Verdict
from atlas.gate.store import write_record
from atlas.gate.workspace import closure_from_tree
from atlas.kernels.ptxset import PTXSET_SUFFIX
from atlas.kernels.registry import KERNELS_DIR_ENV
from atlas.kernels.sources import closure_hash
from atlas.kernels.tree import list_targets, load_leaf
from atlas_cli.main import cli

REPO = Path(__file__).resolve().parents[2]
COMPILER = "cuda-13.0-test"
ALPHA = KernelTarget("hopper", "alpha", "bf16")  # compiles common/ as is
BETA = KernelTarget("hopper", "beta", "bf16")  # shadows rmsnorm.cu with a standalone file
GAMMA = KernelTarget("hopper", "gamma", "bf16")  # shadows rmsnorm.cu, #includes the common twin
#: which gate was measured on which target
MEASURED = {"decode-floor": ALPHA, "ttft-cold": BETA, "ttft-warm": GAMMA}

TREE = {
    "kernels/hopper/HARDWARE.toml": 'vendor = "nvidia"\narch = "sm_90a"\n'
                                    '[compiler]\nflags = ["-O3"]\n',
    "kernels/hopper/common/norm.cuh": "#pragma once\n__device__ float norm(float x);\n",
    "kernels/hopper/common/act.cuh": "#pragma once\n__device__ float act(float x);\n",
    "kernels/hopper/common/rmsnorm.cu": '#include "norm.cuh"\nextern "C" __global__ void k() {}\n',
    "kernels/hopper/common/silu.cu": '#include "act.cuh"\nextern "C" __global__ void s() {}\n',
    "kernels/hopper/beta/bf16/rmsnorm.cu": 'extern "C" __global__ void k() { /* own */ }\n',
    "kernels/hopper/gamma/bf16/rmsnorm.cu": '#include "../../common/rmsnorm.cu"\n',
    "README.md": "tmp tree\n",
}
for _i, _model in enumerate(("alpha", "beta", "gamma")):
    TREE[f"kernels/hopper/{_model}/MODEL.toml"] = (
        f'[[model_types]]\nmodel_type = "llama"\nhidden_size = {64 * (_i + 1)}\n')
    TREE[f"kernels/hopper/{_model}/bf16/KERNEL.toml"] = "[defines]\nATLAS_HIDDEN = 64\n"
    TREE[f"kernels/hopper/{_model}/BENCH.toml"] = ""


def _write_tree(root: Path) -> None:
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _stamp(root: Path, target: KernelTarget) -> TargetStamp:
    """What a build bakes: the hash at build time, with the leaf's arch and flags."""
    leaf = load_leaf(root, target)
    return TargetStamp(target, leaf.hardware.arch, COMPILER, tuple(leaf.flags),
                       closure_hash(root, target, leaf.hardware.arch, COMPILER, leaf.flags))


def _record(gate: str, stamp: TargetStamp, commit: str) -> Record:
    return Record(
        gate=gate, suite=gate_by_name(gate).suite, checkpoint="ckpt", is_default=True,
        model="m", url="http://127.0.0.1:1", targets=(stamp,), params={}, metrics={},
        thresholds={}, verdict=Verdict.UNMEASURED, failures=(), date="2026-11-30",
        recorded_at="2026-11-30T10:00:00Z", commit=commit, atlas_version="0.1.0")


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, dict[str, StoredRecord]]:
    _write_tree(tmp_path)
    stored = {gate: StoredRecord(f"{gate}.json", _record(gate, _stamp(tmp_path, t), "f" * 40))
              for gate, t in MEASURED.items()}
    return tmp_path, stored


def _open_after_edit(root: Path, stored: dict[str, StoredRecord], edited: str) -> set[str]:
    (root / edited).write_text((root / edited).read_text() + "// edited\n")
    closure_now = closure_from_tree(root)
    statuses = [evaluate(GateInput(gate_by_name(g), r, (edited,)), closure_now)
                for g, r in stored.items()]
    return {s.gate.name for s in statuses if s.is_open}


def test_untouched_tree_keeps_every_record(tree) -> None:
    root, stored = tree
    closure_now = closure_from_tree(root)
    for gate, record in stored.items():
        status = evaluate(GateInput(gate_by_name(gate), record,
                                    ("kernels/hopper/common/rmsnorm.cu",)), closure_now)
        assert not status.is_open, status.line()


def test_editing_a_common_header_reopens_exactly_the_gates_whose_targets_include_it(
        tree) -> None:
    root, stored = tree
    # norm.cuh reaches alpha (via common/rmsnorm.cu) and gamma (its shadow includes the
    # common twin), not beta (its standalone shadow replaces the file that includes it)
    assert _open_after_edit(root, stored, "kernels/hopper/common/norm.cuh") == \
        {"decode-floor", "ttft-warm"}


def test_editing_a_header_every_target_compiles_reopens_all_measured_gates(tree) -> None:
    root, stored = tree
    assert _open_after_edit(root, stored, "kernels/hopper/common/act.cuh") == set(MEASURED)


def test_shadow_that_includes_its_common_twin_is_still_covered(tree) -> None:
    root, stored = tree
    opened = _open_after_edit(root, stored, "kernels/hopper/common/rmsnorm.cu")
    assert "ttft-warm" in opened  # gamma: shadowed by stem, yet the edited bytes compile in
    assert "ttft-cold" not in opened  # beta: shadowed and not included
    assert opened == {"decode-floor", "ttft-warm"}


def test_a_leaf_toml_edit_reopens_only_that_target(tree) -> None:
    root, stored = tree
    assert _open_after_edit(root, stored, "kernels/hopper/beta/bf16/KERNEL.toml") == \
        {"ttft-cold"}


def test_bench_toml_edit_reopens_nothing(tree) -> None:
    root, stored = tree
    assert _open_after_edit(root, stored, "kernels/hopper/alpha/BENCH.toml") == set()


def test_recompute_uses_the_records_own_compiler_and_flags(tree) -> None:
    """Substituting the checker's environment would let whichever machine runs CI void
    every record; using the record's values, only a source change moves the hash."""
    root, stored = tree
    stamp = stored["decode-floor"].record.targets[0]
    closure_now = closure_from_tree(root)
    assert closure_now(stamp) == stamp.closure_hash
    other = TargetStamp(stamp.target, stamp.arch, "cuda-12.0", stamp.flags, stamp.closure_hash)
    assert closure_now(other) != stamp.closure_hash


def test_removed_leaf_reopens_its_gate(tree) -> None:
    root, stored = tree
    (root / "kernels/hopper/beta/bf16/KERNEL.toml").unlink()
    status = evaluate(GateInput(gate_by_name("ttft-cold"), stored["ttft-cold"],
                                ("kernels/hopper/beta/bf16/KERNEL.toml",)),
                      closure_from_tree(root))
    assert status.is_open and "hopper/beta/bf16 (" in status.reason


# --- end to end: git, records on disk, the CLI ---------------------------------------------

def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "commit.gpgsign=false", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()


def _check(root: Path, *args: str):
    return CliRunner().invoke(cli, ["gate", "--root", str(root), "check", *args])


def test_cli_check_in_a_git_repository(tmp_path: Path) -> None:
    _write_tree(tmp_path)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "tree")
    commit = _git(tmp_path, "rev-parse", "HEAD")
    for gate, target in MEASURED.items():
        write_record(tmp_path, _record(gate, _stamp(tmp_path, target), commit))
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "records")

    result = _check(tmp_path)
    assert result.exit_code == 1  # concurrency-sweep has no record
    lines = {line.split()[1]: line for line in result.output.splitlines()
             if line.startswith(("OPEN", "VALID"))}
    assert lines["concurrency-sweep"] == "OPEN  concurrency-sweep — no record yet"
    for gate in MEASURED:
        assert lines[gate].startswith(f"VALID {gate} — latest record is for {commit[:10]} "
                                      f"(2026-11-30-{commit[:10]}.json)")

    (tmp_path / "kernels/hopper/common/norm.cuh").write_text("// edited, uncommitted\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/new.md").write_text("untracked\n")
    lines = {line.split()[1]: line for line in _check(tmp_path).output.splitlines()
             if line.startswith(("OPEN", "VALID"))}
    assert lines["decode-floor"].startswith("OPEN  decode-floor")
    assert "closure hash changed for hopper/alpha/bf16" in lines["decode-floor"]
    assert lines["ttft-warm"].startswith("OPEN  ttft-warm")
    assert lines["ttft-cold"].startswith("VALID ttft-cold")

    (tmp_path / "py/atlas/model").mkdir(parents=True)
    (tmp_path / "py/atlas/model/engine.py").write_text("# host code\n")
    lines = {line.split()[1]: line for line in _check(tmp_path).output.splitlines()
             if line.startswith(("OPEN", "VALID"))}
    assert lines["ttft-cold"] == (
        f"OPEN  ttft-cold — latest record is for {commit[:10]} (2026-11-30-{commit[:10]}.json)"
        " — invalidated by kernels/hopper/common/norm.cuh, py/atlas/model/engine.py")

    advisory = _check(tmp_path, "--advisory")
    assert advisory.exit_code == 0 and "OPEN  ttft-cold" in advisory.output


def test_cli_check_with_base_judges_only_the_branch(tmp_path: Path) -> None:
    _write_tree(tmp_path)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "tree")
    base = _git(tmp_path, "rev-parse", "HEAD")
    write_record(tmp_path, _record("decode-floor", _stamp(tmp_path, ALPHA), base))
    (tmp_path / "README.md").write_text("docs only\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "record + docs")
    result = _check(tmp_path, "--base", base)
    line = next(x for x in result.output.splitlines() if " decode-floor " in x)
    assert line.startswith("VALID decode-floor") and "none of the 2 changed paths" in line
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    line = next(x for x in _check(tmp_path, "--base", base).output.splitlines()
                if " decode-floor " in x)
    assert line.endswith("invalidated by pyproject.toml")
    bad = _check(tmp_path, "--base", "no-such-rev")
    assert bad.exit_code == 1 and "no-such-rev" in bad.output


def test_record_of_a_commit_missing_from_the_clone_is_open(tmp_path: Path) -> None:
    _write_tree(tmp_path)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "tree")
    write_record(tmp_path, _record("decode-floor", _stamp(tmp_path, ALPHA), "e" * 40))
    line = next(x for x in _check(tmp_path).output.splitlines() if " decode-floor " in x)
    assert line.startswith("OPEN  decode-floor") and "is not in this clone" in line


# --- closure attestation -------------------------------------------------------------------

def _attest(artifacts: list[Path]) -> int:
    closure_now = closure_from_tree(REPO)
    for path in artifacts:
        stamp = TargetStamp.from_json(json.loads(path.read_bytes()))
        assert closure_now(stamp) == stamp.closure_hash, \
            f"{path.name}: the gate's recomputed closure hash differs from the baked one"
    return len(artifacts)


def test_closure_attestation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build bakes a closure hash into each PTX set; the gate recomputes it from the tree.
    If the two ever disagree, every record looks invalidated, exactly like a kernel change.
    Builds every leaf with `atlas kernels build` (ATLAS_SKIP_BUILD=1) into tmp, plus a real
    build when ATLAS_KERNELS_DIR names one, and recomputes every baked hash."""
    monkeypatch.chdir(REPO)
    env = {"ATLAS_SKIP_BUILD": "1", "ATLAS_TARGET_HW": "", "ATLAS_TARGET_MODEL": "",
           "ATLAS_TARGET_QUANT": ""}
    result = CliRunner(env=env).invoke(cli, ["kernels", "build", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    built = sorted(tmp_path.glob(f"*{PTXSET_SUFFIX}"))
    assert len(built) == len(list_targets(REPO)) > 0
    checked = _attest(built)
    real_build = os.environ.get(KERNELS_DIR_ENV)
    if real_build:
        checked += _attest(sorted(Path(real_build).glob(f"*{PTXSET_SUFFIX}")))
    print(f"closure attestation: recomputed {checked} baked closure hashes from the tree "
          f"({len(built)} leaves)")
    assert checked >= len(built)


# --- recording, end to end with a scripted harness ---------------------------------------

class _ScriptedRunner:
    """Stands in for the benchmark harness: returns fixed metrics and remembers the call."""

    def __init__(self, output_tok_s: float) -> None:
        self.output_tok_s = output_tok_s
        self.calls: list[tuple] = []

    def run(self, suite_id, url, model, params):
        self.calls.append((suite_id, url, model, dict(params)))
        return {"output_tok_s": self.output_tok_s, "ttft_ms": 12.0}


def test_cli_record_then_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, artifacts = tmp_path / "repo", tmp_path / "build"
    repo.mkdir()
    artifacts.mkdir()
    _write_tree(repo)
    (repo / "kernels/hopper/alpha/BENCH.toml").write_text(
        '[[benchmarks]]\ngate = "decode-floor"\nquant = "bf16"\ncheckpoint = "org/alpha"\n'
        'status = "measured"\ndefault = true\nparams = { max_tokens = 64 }\n'
        '[benchmarks.metrics]\noutput_tok_s = 100.0\n')
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "tree")
    commit = _git(repo, "rev-parse", "HEAD")
    stamp = _stamp(repo, ALPHA)
    (artifacts / "hopper__alpha__bf16.ptxset.json").write_text(
        json.dumps({**stamp.to_json(), "modules": {}}))

    runner = _ScriptedRunner(120.0)
    harness = types.ModuleType("scripted_bench")
    harness.suite_runner = lambda: runner  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "scripted_bench", harness)
    monkeypatch.setattr(gate_record, "HARNESS_MODULE", "scripted_bench")

    def record(*extra: str):
        return CliRunner().invoke(cli, [
            "gate", "--root", str(repo), "record", "decode-floor", "--url", "http://srv:1",
            "--model", "alpha", "--targets-from", str(artifacts), *extra])

    result = record("--param", "seed=3")
    assert result.exit_code == 0, result.output
    assert runner.calls == [("long-output", "http://srv:1", "alpha",
                             {"max_tokens": 64, "seed": "3"})]
    (written,) = (repo / ".benchmarks/decode-floor").glob("*.json")
    assert written.name.endswith(f"-{commit[:10]}.json")
    data = json.loads(written.read_text())
    assert data["verdict"] == "pass" and data["metrics"] == {"output_tok_s": 120.0}
    assert data["targets"] == [stamp.to_json()] and data["commit"] == commit
    line = next(x for x in _check(repo).output.splitlines() if " decode-floor " in x)
    assert line.startswith("VALID decode-floor")

    runner.output_tok_s = 80.0
    failed = record()
    assert failed.exit_code == 2, failed.output
    assert "output_tok_s 80 (needs >= 100)" in failed.output
    line = next(x for x in _check(repo).output.splitlines() if " decode-floor " in x)
    assert line.startswith("OPEN  decode-floor") and "it failed: output_tok_s 80" in line
