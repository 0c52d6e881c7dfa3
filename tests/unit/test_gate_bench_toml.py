"""BENCH.toml schema: each way a threshold file can lie is caught, naming file and entry."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from atlas.gate.bench_toml import BenchFile, validate
from atlas.gate.store import read_bench_files

HOPPER_8B = "kernels/hopper/qwen3-8b/BENCH.toml"
HOPPER_06B = "kernels/hopper/qwen3-0.6b/BENCH.toml"

MEASURED_DECODE = """
[[benchmarks]]
gate = "decode-floor"
quant = "bf16"
checkpoint = "Qwen/Qwen3-8B"
status = "measured"
default = true
[benchmarks.metrics]
output_tok_s = 140.0
"""


def _files(*pairs: tuple[str, str], quants: tuple[str, ...] = ("bf16", "fp8")) -> list[BenchFile]:
    return [BenchFile(path, textwrap.dedent(text), quants) for path, text in pairs]


def _errors(*pairs: tuple[str, str]) -> tuple[str, ...]:
    return validate(_files(*pairs)).errors


def test_valid_file_parses_every_field() -> None:
    text = MEASURED_DECODE + """
[[benchmarks]]
gate = "decode-floor"
quant = "fp8"
checkpoint = "Qwen/Qwen3-8B-FP8"
status = "unmeasured"
params = { max_tokens = 64 }
"""
    tree = validate(_files((HOPPER_8B, text)))
    assert tree.errors == ()
    first, second = tree.entries
    assert (first.hw, first.model, first.quant, first.gate) == \
        ("hopper", "qwen3-8b", "bf16", "decode-floor")
    assert first.measured and first.default and first.metrics == {"output_tok_s": 140.0}
    assert not second.measured and not second.default and second.metrics == {}
    assert second.params == {"max_tokens": 64}
    assert tree.default_entry("decode-floor", "hopper") == first
    assert tree.default_entry("decode-floor", "gb10") is None


def test_unmeasured_entry_with_metrics_is_an_error() -> None:
    (error,) = _errors((HOPPER_8B, MEASURED_DECODE.replace('"measured"', '"unmeasured"')))
    assert HOPPER_8B in error and "benchmarks[0]" in error
    assert "unmeasured entry carries no metrics" in error


def test_unmeasured_entry_with_an_empty_metrics_table_is_an_error() -> None:
    text = MEASURED_DECODE.replace('"measured"', '"unmeasured"').replace(
        "output_tok_s = 140.0", "")
    (error,) = _errors((HOPPER_8B, text))
    assert "carries no metrics" in error


def test_measured_entry_without_metrics_is_an_error() -> None:
    text = MEASURED_DECODE.replace("[benchmarks.metrics]\noutput_tok_s = 140.0", "")
    (error,) = _errors((HOPPER_8B, text))
    assert "benchmarks[0] (decode-floor, bf16, Qwen/Qwen3-8B)" in error
    assert "must carry a metrics table" in error


def test_measured_entry_missing_one_scored_metric_is_an_error() -> None:
    text = """
    [[benchmarks]]
    gate = "concurrency-sweep"
    quant = "bf16"
    checkpoint = "Qwen/Qwen3-8B"
    status = "measured"
    default = true
    [benchmarks.metrics]
    aggregate_output_tok_s = 900.0
    """
    (error,) = _errors((HOPPER_8B, text))
    assert "no threshold for ttft_p99_ms" in error


@pytest.mark.parametrize("value", ["'fast'", "true", "nan", "inf"])
def test_metric_must_be_a_finite_number(value: str) -> None:
    (error,) = _errors((HOPPER_8B, MEASURED_DECODE.replace("140.0", value)))
    assert "must be a finite number" in error


def test_metric_the_gate_does_not_score_is_an_error() -> None:
    (error,) = _errors((HOPPER_8B, MEASURED_DECODE + "ttft_ms = 3.0\n"))
    assert "does not score ttft_ms" in error


def test_two_defaults_for_one_gate_on_one_hardware_is_an_error() -> None:
    other = MEASURED_DECODE.replace("Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B")
    (error,) = _errors((HOPPER_8B, MEASURED_DECODE), (HOPPER_06B, other))
    assert "gate decode-floor on hopper: 2 entries set default = true" in error
    assert HOPPER_8B in error and HOPPER_06B in error


def test_no_default_for_a_gate_on_a_hardware_is_an_error() -> None:
    (error,) = _errors((HOPPER_8B, MEASURED_DECODE.replace("default = true", "")))
    assert "gate decode-floor on hopper: no entry sets default = true" in error


def test_defaults_are_counted_per_hardware() -> None:
    gb10 = "kernels/gb10/qwen3-8b/BENCH.toml"
    assert _errors((HOPPER_8B, MEASURED_DECODE), (gb10, MEASURED_DECODE)) == ()


@pytest.mark.parametrize("edit,message", [
    (('gate = "decode-floor"', 'gate = "decode-flor"'), "unknown gate 'decode-flor'"),
    (('quant = "bf16"', 'quant = "nvfp4"'), "no quant leaf kernels/hopper/qwen3-8b/nvfp4/"),
    (('status = "measured"', 'status = "guessed"'), "status must be"),
    (("default = true", 'default = "yes"'), "'default' must be true or false"),
    (("default = true", "default = true\nthreshold = 3"), "unknown key(s) threshold"),
    (('checkpoint = "Qwen/Qwen3-8B"', ""), "'checkpoint' must be a non-empty string"),
    (("[benchmarks.metrics]", "params = 3\n[benchmarks.metrics]"), "'params' must be a table"),
])
def test_malformed_entries_are_each_caught(edit: tuple[str, str], message: str) -> None:
    errors = _errors((HOPPER_8B, MEASURED_DECODE.replace(*edit)))
    assert any(message in e and HOPPER_8B in e for e in errors), errors


def test_duplicate_entry_is_an_error() -> None:
    text = MEASURED_DECODE + MEASURED_DECODE.replace("default = true", "")
    (error,) = _errors((HOPPER_8B, text))
    assert "benchmarks[1]" in error and "duplicates" in error and "benchmarks[0]" in error


def test_file_level_problems_are_caught() -> None:
    assert "not valid TOML" in _errors((HOPPER_8B, "[[benchmarks]\n"))[0]
    assert "unknown top-level key(s) thresholds" in _errors((HOPPER_8B, "thresholds = 1\n"))[0]
    misplaced = "kernels/hopper/qwen3-8b/bf16/BENCH.toml"
    assert "lives at kernels/<hw>/<model>/BENCH.toml" in _errors((misplaced, MEASURED_DECODE))[0]


def test_every_violation_is_reported_not_only_the_first() -> None:
    text = MEASURED_DECODE.replace('"decode-floor"', '"nope"').replace('"bf16"', '"int3"')
    errors = _errors((HOPPER_8B, text))
    assert any("unknown gate" in e for e in errors)
    assert any("no quant leaf" in e for e in errors)


def test_store_reads_every_bench_file_with_its_quant_leaves(tmp_path: Path) -> None:
    model = tmp_path / "kernels" / "hopper" / "qwen3-8b"
    (model / "bf16").mkdir(parents=True)
    (model / "bf16" / "KERNEL.toml").write_text("")
    (model / "notaleaf").mkdir()
    (model / "BENCH.toml").write_text(MEASURED_DECODE)
    (model / "bf16" / "BENCH.toml").write_text("")  # misplaced: must be read, then rejected
    files = read_bench_files(tmp_path)
    assert [(f.path, list(f.quants)) for f in files] == [
        ("kernels/hopper/qwen3-8b/BENCH.toml", ["bf16"]),
        ("kernels/hopper/qwen3-8b/bf16/BENCH.toml", [])]
    tree = validate(files)
    assert len(tree.entries) == 1
    assert len(tree.errors) == 1 and "bf16/BENCH.toml" in tree.errors[0]


def test_a_model_without_its_own_leaf_is_measured_on_the_baseline_leaf(tmp_path: Path) -> None:
    hw = tmp_path / "kernels" / "hopper"
    (hw / "common" / "bf16").mkdir(parents=True)
    (hw / "common" / "bf16" / "KERNEL.toml").write_text("")
    (hw / "qwen3-8b").mkdir()
    (hw / "qwen3-8b" / "BENCH.toml").write_text(MEASURED_DECODE)
    (files,) = read_bench_files(tmp_path)
    assert list(files.quants) == ["bf16"]
    (entry,) = validate([files]).entries
    assert entry.leaf == "hopper/common/bf16" and entry.model == "qwen3-8b"


def test_the_shipped_bench_files_validate_and_name_the_leaf_they_measure() -> None:
    tree = validate(read_bench_files(Path(__file__).absolute().parents[2]))
    assert tree.errors == ()
    default = tree.default_entry("decode-floor", "hopper")
    assert default is not None and default.checkpoint == "Qwen/Qwen3-8B"
    assert default.leaf == "hopper/common/bf16"
