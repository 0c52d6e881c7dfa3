"""Records (format, file names, which one stands for a gate), scoring, and planning a run."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import pytest

from atlas.core.target import KernelTarget
from atlas.gate import record as gate_record
from atlas.gate.bench_toml import BenchEntry, BenchTree
from atlas.gate.gates import gate_by_name
from atlas.gate.records import (Record, RecordError, StoredRecord, TargetStamp, Verdict,
                                checkpoint_slug, latest_record, record_filename)
from atlas.gate.store import read_records, write_record
from atlas.gate.target_stamps import (TargetsUnavailable, parse_targets,
                                      read_artifact_targets)
from atlas.gate.verdict import MissingMetric, judge

STAMP = TargetStamp(KernelTarget("hopper", "qwen3-8b", "bf16"), "sm_90a", "cuda-13.0",
                    ("-O3", "-std=c++17"), "ab" * 32)
NOW = datetime(2026, 11, 30, 9, 30, 5, tzinfo=timezone.utc)


def _entry(measured: bool = True, default: bool = True, gate: str = "decode-floor",
           checkpoint: str = "Qwen/Qwen3-8B", model: str = "qwen3-8b",
           metrics: dict[str, float] | None = None) -> BenchEntry:
    if metrics is None:
        metrics = {"output_tok_s": 100.0} if measured else {}
    return BenchEntry(f"kernels/hopper/{model}/BENCH.toml: benchmarks[0]", "hopper", model,
                      "bf16", gate, checkpoint, measured, default, metrics, {"max_tokens": 64})


def _record(**changes: object) -> Record:
    fields = dict(gate="decode-floor", suite="long-output", checkpoint="Qwen/Qwen3-8B",
                  is_default=True, model="qwen3-8b", url="http://127.0.0.1:8000",
                  targets=(STAMP,), params={"concurrency": 1}, metrics={"output_tok_s": 120.5},
                  thresholds={"output_tok_s": 100.0}, verdict=Verdict.PASS, failures=(),
                  date="2026-11-30", recorded_at="2026-11-30T09:30:05Z",
                  commit="0123456789abcdef0123456789abcdef01234567", atlas_version="0.1.0")
    fields.update(changes)
    return Record(**fields)  # type: ignore[arg-type]


# --- format --------------------------------------------------------------------------------

def test_record_round_trips_through_json() -> None:
    record = _record(dirty_paths=("kernels/hopper/common/rmsnorm.cu",))
    assert Record.from_json(json.loads(json.dumps(record.to_json())), "x.json") == record


def test_file_name_is_date_and_abbreviated_commit() -> None:
    assert _record().filename == "2026-11-30-0123456789.json"
    assert _record(is_default=False, checkpoint="Qwen/Qwen3-8B-FP8").filename == \
        "2026-11-30-0123456789-qwen-qwen3-8b-fp8.json"
    assert record_filename("2026-01-02", "abcdef1234567", None) == "2026-01-02-abcdef1234.json"
    assert checkpoint_slug("unsloth/Qwen3.8-27B-NVFP4") == "unsloth-qwen3.8-27b-nvfp4"
    with pytest.raises(ValueError):
        checkpoint_slug("///")


@pytest.mark.parametrize("edit,message", [
    ({"schema": 2}, "schema 2"),
    ({"targets": []}, "no targets"),
    ({"commit": "HEAD"}, "hex object id"),
    ({"date": "30.11.2026"}, "YYYY-MM-DD"),
    ({"recorded_at": "2026-11-30 09:30"}, "recorded_at"),
    ({"verdict": "great"}, "great"),
    ({"default": "yes"}, "'default'"),
    ({"metrics": {"output_tok_s": "fast"}}, "fast"),
])
def test_malformed_record_names_its_file(edit: dict, message: str) -> None:
    data = {**_record().to_json(), **edit}
    with pytest.raises(RecordError, match=message) as info:
        Record.from_json(data, ".benchmarks/decode-floor/x.json")
    assert ".benchmarks/decode-floor/x.json" in str(info.value)


def test_missing_field_is_named() -> None:
    data = _record().to_json()
    del data["verdict"]
    with pytest.raises(RecordError, match="missing field 'verdict'"):
        Record.from_json(data, "x.json")


def test_target_stamp_rejects_empty_hash_and_string_flags() -> None:
    good = STAMP.to_json()
    with pytest.raises(ValueError, match="empty closure hash"):
        TargetStamp.from_json({**good, "closure_hash": ""})
    with pytest.raises(ValueError, match="list of strings"):
        TargetStamp.from_json({**good, "flags": "-O3"})


# --- which record stands -------------------------------------------------------------------

def test_latest_default_record_stands_for_the_gate() -> None:
    old = StoredRecord("a.json", _record(recorded_at="2026-11-01T00:00:00Z"))
    new = StoredRecord("b.json", _record(recorded_at="2026-11-30T00:00:00Z"))
    newer_variant = StoredRecord("c.json", _record(recorded_at="2026-12-01T00:00:00Z",
                                                   is_default=False))
    assert latest_record([new, old, newer_variant]) == new
    assert latest_record([newer_variant]) is None
    assert latest_record([]) is None


def test_store_writes_and_reads_back(tmp_path: Path) -> None:
    record = _record()
    path = write_record(tmp_path, record)
    assert path == tmp_path / ".benchmarks" / "decode-floor" / "2026-11-30-0123456789.json"
    assert read_records(tmp_path, "decode-floor") == [
        StoredRecord(".benchmarks/decode-floor/2026-11-30-0123456789.json", record)]
    assert read_records(tmp_path, "ttft-cold") == []


def test_store_rejects_renamed_or_misfiled_records(tmp_path: Path) -> None:
    path = write_record(tmp_path, _record())
    path.rename(path.with_name("2026-12-24-0123456789.json"))
    with pytest.raises(RecordError, match="its content names it 2026-11-30-0123456789.json"):
        read_records(tmp_path, "decode-floor")
    misfiled = tmp_path / ".benchmarks" / "ttft-cold" / "2026-11-30-0123456789.json"
    misfiled.parent.mkdir(parents=True)
    misfiled.write_text(json.dumps(_record().to_json()))
    with pytest.raises(RecordError, match="sits under ttft-cold/"):
        read_records(tmp_path, "ttft-cold")
    broken = tmp_path / ".benchmarks" / "ttft-warm" / "broken.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{")
    with pytest.raises(RecordError, match="broken.json: cannot read"):
        read_records(tmp_path, "ttft-warm")


# --- scoring -------------------------------------------------------------------------------

def test_judge_pass_fail_and_unmeasured() -> None:
    gate = gate_by_name("decode-floor")
    assert judge(gate, _entry(), {"output_tok_s": 100.0, "extra": 1.0}).verdict is Verdict.PASS
    failed = judge(gate, _entry(), {"output_tok_s": 99.5})
    assert failed.verdict is Verdict.FAIL
    assert failed.failures == ("output_tok_s 99.5 (needs >= 100)",)
    unmeasured = judge(gate, _entry(measured=False), {"output_tok_s": 1.0})
    assert unmeasured.verdict is Verdict.UNMEASURED and unmeasured.scored == {"output_tok_s": 1.0}


def test_judge_latency_bound_and_nan() -> None:
    gate = gate_by_name("ttft-cold")
    entry = _entry(gate="ttft-cold", metrics={"ttft_cold_p50_ms": 50.0})
    assert judge(gate, entry, {"ttft_cold_p50_ms": 50.0}).verdict is Verdict.PASS
    assert judge(gate, entry, {"ttft_cold_p50_ms": 50.1}).verdict is Verdict.FAIL
    assert judge(gate, entry, {"ttft_cold_p50_ms": math.nan}).verdict is Verdict.FAIL
    assert judge(gate_by_name("decode-floor"), _entry(),
                 {"output_tok_s": math.nan}).verdict is Verdict.FAIL


def test_judge_missing_metric_is_a_broken_harness() -> None:
    with pytest.raises(MissingMetric, match="reported no output_tok_s"):
        judge(gate_by_name("decode-floor"), _entry(), {"tok_s": 1.0})


# --- planning and making a record ----------------------------------------------------------

def _tree(*entries: BenchEntry, errors: tuple[str, ...] = ()) -> BenchTree:
    return BenchTree(entries, errors)


def test_plan_picks_the_default_entry_and_merges_params() -> None:
    gate = gate_by_name("decode-floor")
    run = gate_record.plan(gate, [STAMP], _tree(_entry()), None, {"max_tokens": "32"})
    assert run.entry == _entry()
    assert run.params == {"max_tokens": "32"}  # the entry's 64, overridden


@pytest.mark.parametrize("stamps,tree,checkpoint,message", [
    ([STAMP], _tree(_entry(), errors=("bad file",)), None, "bad file"),
    ([TargetStamp(STAMP.target, "sm_90a", "skipped", (), "c" * 64)], _tree(_entry()), None,
     "skip build"),
    ([STAMP, TargetStamp(KernelTarget("gb10", "qwen3", "bf16"), "sm_121", "c", (), "d")],
     _tree(_entry()), None, "span hardware gb10, hopper"),
    ([STAMP], _tree(), None, "no BENCH.toml entry for gate decode-floor on hopper"),
    ([STAMP], _tree(_entry(default=False)), None, "no single default"),
    ([STAMP], _tree(_entry()), "Qwen/Other", "0 entries for checkpoint 'Qwen/Other'"),
    ([STAMP], _tree(_entry(model="qwen3-0.6b")), None, "is for hopper/qwen3-0.6b/bf16"),
])
def test_plan_refuses_runs_that_would_lie(stamps: list[TargetStamp], tree: BenchTree,
                                          checkpoint: str | None, message: str) -> None:
    with pytest.raises(gate_record.RecordRefused, match=message):
        gate_record.plan(gate_by_name("decode-floor"), stamps, tree, checkpoint, {})


def test_make_record_keeps_baked_stamps_and_dirty_perf_paths() -> None:
    run = gate_record.plan(gate_by_name("decode-floor"), [STAMP], _tree(_entry()), None, {})
    record = gate_record.make_record(
        run, {"output_tok_s": 120.0}, url="http://h:1", model="m", commit="f" * 40,
        uncommitted=["docs/a.md", "kernels/hopper/common/rmsnorm.cu",
                     "kernels/hopper/qwen3-8b/BENCH.toml"],
        now=NOW, atlas_version="0.1.0")
    assert record.targets == (STAMP,)
    assert record.verdict is Verdict.PASS and record.thresholds == {"output_tok_s": 100.0}
    assert record.dirty_paths == ("kernels/hopper/common/rmsnorm.cu",)
    assert (record.date, record.recorded_at) == ("2026-11-30", "2026-11-30T09:30:05Z")
    assert record.filename == "2026-11-30-ffffffffff.json"


def test_missing_harness_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_record, "HARNESS_MODULE", "atlas.no_such_bench_package")
    with pytest.raises(gate_record.HarnessMissing, match="benchmark harness is not installed"):
        gate_record.load_suite_runner()
    monkeypatch.setattr(gate_record, "HARNESS_MODULE", "atlas.core")  # exists, no factory
    with pytest.raises(gate_record.HarnessMissing, match="provides no suite_runner"):
        gate_record.load_suite_runner()


# --- where stamps come from ----------------------------------------------------------------

def test_parse_server_targets() -> None:
    assert parse_targets({"targets": [STAMP.to_json()]}, "srv") == (STAMP,)
    with pytest.raises(TargetsUnavailable, match="srv: expected"):
        parse_targets({"targets": []}, "srv")
    with pytest.raises(TargetsUnavailable, match="malformed"):
        parse_targets({"targets": [{"target": "hopper/x/bf16"}]}, "srv")


def test_read_artifact_targets(tmp_path: Path) -> None:
    (tmp_path / "hopper__qwen3-8b__bf16.ptxset.json").write_text(
        json.dumps({**STAMP.to_json(), "modules": {}}))
    assert read_artifact_targets(tmp_path) == (STAMP,)
    with pytest.raises(TargetsUnavailable, match="does not exist"):
        read_artifact_targets(tmp_path / "nothing-here")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TargetsUnavailable, match="no \\*.ptxset.json"):
        read_artifact_targets(tmp_path / "empty")
    (tmp_path / "bad.ptxset.json").write_text("{}")
    with pytest.raises(TargetsUnavailable, match="not a PTX-set artifact"):
        read_artifact_targets(tmp_path / "bad.ptxset.json")
