"""The verdict: each gate VALID or OPEN with the book's reasons, the closure rung only
narrowing for kernel paths, the advisory plane unreachable from it, and the real CLI."""

from __future__ import annotations

import ast
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from atlas.core.target import KernelTarget
from atlas.gate.check import (ClosureUnavailable, GateInput, any_blocking, evaluate,
                              evaluate_all)
from atlas.gate.gates import GATE_NAMES, GATES, gate_by_name
from atlas.gate.records import Record, StoredRecord, TargetStamp, Verdict
from atlas_cli.main import cli

REPO = Path(__file__).resolve().parents[2]
T8B = TargetStamp(KernelTarget("hopper", "qwen3-8b", "bf16"), "sm_90a", "cuda-13.0",
                  ("-O3",), "a" * 64)
T06B = TargetStamp(KernelTarget("hopper", "qwen3-0.6b", "bf16"), "sm_90a", "cuda-13.0",
                   ("-O3",), "b" * 64)
PATH = ".benchmarks/decode-floor/2026-12-01-1a2b3c4d5e.json"
HEAD = "latest record is for 1a2b3c4d5e (2026-12-01-1a2b3c4d5e.json)"


def _stored(verdict: Verdict = Verdict.PASS, targets: tuple[TargetStamp, ...] = (T8B,),
            dirty: tuple[str, ...] = (), failures: tuple[str, ...] = ()) -> StoredRecord:
    record = Record(
        gate="decode-floor", suite="long-output", checkpoint="Qwen/Qwen3-8B", is_default=True,
        model="m", url="u", targets=targets, params={}, metrics={"output_tok_s": 1.0},
        thresholds={}, verdict=verdict, failures=failures, date="2026-12-01",
        recorded_at="2026-12-01T00:00:00Z", commit="1a2b3c4d5e" + "0" * 30,
        atlas_version="0.1.0", dirty_paths=dirty)
    return StoredRecord(PATH, record)


def _unchanged(stamp: TargetStamp) -> str:
    return stamp.closure_hash


def _must_not_be_called(stamp: TargetStamp) -> str:
    raise AssertionError("the closure rung ran for a change it does not apply to")


def _status(changed: list[str] | None, stored: StoredRecord | None = None,
            closure_now=_must_not_be_called, gate: str = "decode-floor"):
    return evaluate(GateInput(gate_by_name(gate), stored or _stored(),
                              None if changed is None else tuple(changed),
                              "commit 1a2b3c4d5e is not in this clone"), closure_now)


def test_no_record_yet() -> None:
    status = evaluate(GateInput(gate_by_name("decode-floor"), None, ()), _must_not_be_called)
    assert status.is_open and status.blocks
    assert status.line() == "OPEN  decode-floor — no record yet"


def test_failed_record_is_open_and_names_the_failures() -> None:
    status = _status([], _stored(Verdict.FAIL, failures=("output_tok_s 80 (needs >= 95)",)))
    assert status.is_open
    assert status.reason == f"{HEAD} — it failed: output_tok_s 80 (needs >= 95)"


def test_unknown_changes_are_open() -> None:
    status = _status(None)
    assert status.is_open and "cannot list changes since: commit 1a2b3c4d5e" in status.reason


def test_nothing_relevant_changed_is_valid() -> None:
    status = _status(["docs/a.md", "kernels/hopper/qwen3-8b/BENCH.toml"])
    assert not status.is_open
    assert status.line() == f"VALID decode-floor — {HEAD} — none of the 2 changed paths " \
                            "re-opens it"


def test_unmeasured_record_says_so_when_valid() -> None:
    status = _status([], _stored(Verdict.UNMEASURED))
    assert not status.is_open and "verdict UNMEASURED" in status.reason


def test_open_message_names_paths_then_counts_the_rest() -> None:
    changed = ["kernels/hopper/common/rmsnorm.cu", "py/atlas/model/engine.py", "docs/x.md"]
    changed += [f"py/atlas/server/m{i:02}.py" for i in range(17)]
    status = _status(changed)
    assert status.line() == (
        f"OPEN  decode-floor — {HEAD} — invalidated by kernels/hopper/common/rmsnorm.cu, "
        "py/atlas/model/engine.py, py/atlas/server/m00.py, … and 16 more")


def test_dirty_paths_at_record_time_count_as_changed() -> None:
    status = _status([], _stored(dirty=("py/atlas/model/engine.py",)))
    assert status.is_open and "invalidated by py/atlas/model/engine.py" in status.reason


def test_rung_keeps_a_gate_valid_when_closure_hashes_match() -> None:
    status = _status(["kernels/gb10/common/x.cu", "docs/a.md"], closure_now=_unchanged)
    assert not status.is_open
    assert "leave the closure hash of every measured target unchanged (hopper/qwen3-8b/bf16)" \
        in status.reason


def test_rung_opens_a_gate_and_names_the_drifted_targets() -> None:
    def drift_8b(stamp: TargetStamp) -> str:
        return "0" * 64 if stamp is T8B else stamp.closure_hash

    status = _status(["kernels/hopper/common/rmsnorm.cu"], _stored(targets=(T06B, T8B)),
                     closure_now=drift_8b)
    assert status.is_open
    assert status.reason == (f"{HEAD} — closure hash changed for hopper/qwen3-8b/bf16 "
                             "(kernel edits: kernels/hopper/common/rmsnorm.cu)")


def test_rung_treats_an_unresolvable_target_as_changed() -> None:
    def gone(stamp: TargetStamp) -> str:
        raise ClosureUnavailable("no leaf kernels/hopper/qwen3-8b/bf16")

    status = _status(["kernels/hopper/qwen3-8b/bf16/KERNEL.toml"], closure_now=gone)
    assert status.is_open and "hopper/qwen3-8b/bf16 (no leaf kernels/hopper/qwen3-8b/bf16)" \
        in status.reason


@pytest.mark.parametrize("changed", [
    ["kernels/hopper/common/rmsnorm.cu", "py/atlas/model/engine.py"],
    ["kernels/hopper/common/rmsnorm.cu", "py/atlas/gate/coverage.py"],
    ["kernels2/x.cu", "pyproject.toml"],
])
def test_rung_does_not_apply_when_a_reopening_path_lies_outside_kernels(
        changed: list[str]) -> None:
    status = _status(changed)  # _must_not_be_called guards the rung
    assert status.is_open and "invalidated by" in status.reason


def test_rung_ignores_paths_that_reopen_nothing() -> None:
    status = _status(["kernels/hopper/common/rmsnorm.cu", "docs/a.md", "tests/unit/x.py"],
                     closure_now=_unchanged)
    assert not status.is_open


def test_adding_a_changed_path_never_closes_an_open_gate() -> None:
    """The rung narrows only by hash equality, which no path list can fake: so the whole
    check, not just the floor, is monotone in the changed paths."""
    pool = ["kernels/hopper/common/rmsnorm.cu", "kernels/hopper/common/a.cuh",
            "kernels/hopper/q/BENCH.toml", "kernels2/x", "docs/a.md", "py/atlas/model/e.py",
            "py/atlas/gate/coverage.py", "py/atlas/runtime/reference/r.py", "tests/t.py"]
    rng = random.Random(5)
    for _ in range(400):
        drifted = {s for s in (T8B, T06B) if rng.random() < 0.3}

        def closure_now(stamp: TargetStamp) -> str:
            return "0" * 64 if stamp in drifted else stamp.closure_hash

        stored = _stored(targets=(T8B, T06B), verdict=rng.choice(list(Verdict)))
        gate = rng.choice(GATES)
        paths = rng.sample(pool, rng.randint(0, 4))
        before = evaluate(GateInput(gate, stored, tuple(paths)), closure_now)
        after = evaluate(GateInput(gate, stored, (*paths, rng.choice(pool))), closure_now)
        assert after.is_open or not before.is_open, (gate.name, paths, before, after)


def test_excused_gate_never_blocks() -> None:
    table = gate_by_name("kernel-table")
    status = evaluate(GateInput(table, None, ()), _must_not_be_called)
    assert status.is_open and not status.blocks
    assert status.line() == "OPEN  kernel-table [not required] — no record yet"
    statuses = evaluate_all([GateInput(g, None, ()) for g in GATES if not g.required],
                            _must_not_be_called)
    assert not any_blocking(statuses)


def test_check_does_not_import_the_advisory_plane() -> None:
    """Nothing the advisory plane computes may reach the verdict: the check, the modules it
    runs on and the CLI's check wiring never import `explain`."""
    deciding = ["check.py", "coverage.py", "gates.py", "records.py", "workspace.py",
                "store.py", "git.py"]
    for name in deciding:
        tree = ast.parse((REPO / "py/atlas/gate" / name).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    for a in n.names} | {n.module or "" for n in ast.walk(tree)
                                         if isinstance(n, ast.ImportFrom)}
        assert not any("explain" in i for i in imported), name
    cli_tree = ast.parse((REPO / "py/atlas_cli/cmd_gate.py").read_text())
    check_fn = next(n for n in ast.walk(cli_tree)
                    if isinstance(n, ast.FunctionDef) and n.name == "check_cmd")
    module_level = [n for n in cli_tree.body if isinstance(n, ast.ImportFrom)]
    for node in [*module_level, *ast.walk(check_fn)]:
        if isinstance(node, ast.ImportFrom):
            assert "explain" not in (node.module or "")
            assert all("explain" not in a.name for a in node.names)


def test_running_the_check_loads_no_advisory_module() -> None:
    code = ("import sys, atlas.gate.check, atlas.gate.workspace, atlas_cli.cmd_gate; "
            "print(sorted(m for m in sys.modules if 'explain' in m))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "py")}, check=True)
    assert result.stdout.strip() == "[]"


def test_gate_check_on_this_repository_prints_every_gate() -> None:
    result = CliRunner().invoke(cli, ["gate", "--root", str(REPO), "check"])
    lines = result.output.splitlines()
    for name in GATE_NAMES:
        assert any(line.split()[:2] in (["OPEN", name], ["VALID", name]) for line in lines), \
            result.output
    blocking = [line for line in lines if line.startswith("OPEN") and "[not required]" not in line]
    assert result.exit_code == (1 if blocking else 0), result.output


def test_gate_check_advisory_always_exits_zero() -> None:
    result = CliRunner().invoke(cli, ["gate", "--root", str(REPO), "check", "--advisory"])
    assert result.exit_code == 0, result.output
    assert "(advisory: exit status 0 whatever the verdict)" in result.output


def test_gate_record_without_the_harness_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    from atlas.gate import record
    monkeypatch.setattr(record, "HARNESS_MODULE", "atlas.no_such_bench_package")
    result = CliRunner().invoke(cli, ["gate", "--root", str(REPO), "record", "decode-floor",
                                      "--url", "http://127.0.0.1:9", "--model", "m"])
    assert result.exit_code == 1
    assert "benchmark harness is not installed" in result.output


def test_gate_record_rejects_unknown_gate_and_missing_url() -> None:
    unknown = CliRunner().invoke(cli, ["gate", "--root", str(REPO), "record", "nope",
                                       "--url", "u", "--model", "m"])
    assert unknown.exit_code == 1 and "unknown gate 'nope'; gates: decode-floor" in unknown.output
    no_url = CliRunner().invoke(cli, ["gate", "--root", str(REPO), "record", "decode-floor"])
    assert no_url.exit_code == 2 and "give --url and --model" in no_url.output
