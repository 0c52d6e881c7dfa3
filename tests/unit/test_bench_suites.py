"""Suite files, parameters and verdicts: the shipped suites load and agree with their
workloads, overrides are typed and checked, broken suite files are refused by path, and
thresholds judge runs (NaN never passes)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from atlas.bench.errors import BenchError
from atlas.bench.params import ParamSpec, parse_assignments, resolve_params
from atlas.bench.suites import load_suites, parse_suite, suites_dir
from atlas.bench.verdict import FAIL, NO_VERDICT, PASS, Threshold, judge
from atlas.bench.workloads import WORKLOADS

SHIPPED = {"short", "long-output", "concurrency-sweep", "prefix-warmup", "tool-call",
           "throughput"}


def test_shipped_suites_load_with_the_issue_defaults():
    suites = load_suites()
    assert set(suites) == SHIPPED
    defaults = {sid: {p.name: p.default for p in s.params} for sid, s in suites.items()}
    assert defaults["short"]["prompt"] == "What is the capital of France?"
    assert defaults["short"]["max_tokens"] == 30
    assert defaults["long-output"]["max_tokens"] == 200
    assert defaults["throughput"] == {
        "input_tokens": 1024, "max_tokens": 1024, "requests_per_level": 64,
        "concurrencies": (1, 2, 4, 8, 16, 32, 64), "weights": (1, 1, 2, 2, 4, 4, 8),
        "warmup_requests": 2, "temperature": 0.0, "prompt_mode": "auto", "seed": 0}
    assert [t.metric for t in suites["tool-call"].thresholds] == ["tool_call_success_rate"]
    for suite in suites.values():
        assert all(p.description for p in suite.params)


def test_suites_dir_follows_the_environment(tmp_path):
    assert suites_dir({"ATLAS_BENCH_SUITES": str(tmp_path)}) == tmp_path
    assert suites_dir({}).parts[-2:] == ("bench", "suites")
    with pytest.raises(BenchError, match="no suite files"):
        load_suites(tmp_path)


def _raw(**changes):
    params = {name: {"type": "int", "default": 1, "description": "d"}
              for name in WORKLOADS["tool-call"].params}
    params["prompt"] = {"type": "str", "default": "hi", "description": "d"}
    params["temperature"] = {"type": "float", "default": 0.0, "description": "d"}
    raw = {"description": "x", "workload": "tool-call", "params": params}
    raw.update(changes)
    return raw


def test_a_valid_suite_parses():
    suite = parse_suite("mine", _raw(verdict={"requests": {"min": 1, "max": 3}}), Path("m"))
    assert suite.thresholds == (Threshold("requests", 1, 3),)


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.update(workload="nope"), "workload 'nope'"),
    (lambda r: r.update(colour="red"), "unknown keys colour"),
    (lambda r: r.pop("description"), "needs a description"),
    (lambda r: r["params"].pop("requests"), "missing requests"),
    (lambda r: r["params"].update(extra={"type": "int", "default": 1, "description": "d"}),
     "not read: extra"),
    (lambda r: r["params"]["requests"].update(default="many"), "requests must be an integer"),
    (lambda r: r["params"]["requests"].update(type="complex"), "type 'complex'"),
    (lambda r: r["params"]["requests"].pop("description"), "missing description"),
    (lambda r: r.update(verdict={"requests": {"above": 1}}), "min = x"),
    (lambda r: r.update(verdict={"requests": {"min": "1"}}), "bounds must be numbers"),
])
def test_broken_suite_files_are_refused_by_path(mutate, message):
    raw = _raw()
    mutate(raw)
    with pytest.raises(BenchError, match=message) as info:
        parse_suite("mine", raw, Path("/suites/mine.toml"))
    assert "/suites/mine.toml" in str(info.value)


SCHEMA = (ParamSpec("n", "int", 4, "d", minimum=1), ParamSpec("rate", "float", 0.5, "d"),
          ParamSpec("name", "str", "x", "d"), ParamSpec("flag", "bool", False, "d"),
          ParamSpec("levels", "int_list", [1, 2], "d", minimum=1))


def test_overrides_from_strings_and_typed_values():
    got = resolve_params("s", SCHEMA, {"n": "8", "rate": "1e-1", "name": "a=b",
                                       "flag": "yes", "levels": "1, 4,16"})
    assert got == {"n": 8, "rate": 0.1, "name": "a=b", "flag": True, "levels": (1, 4, 16)}
    typed = resolve_params("s", SCHEMA, {"n": 8, "rate": 2, "levels": [3], "flag": False})
    assert typed["rate"] == 2.0 and typed["levels"] == (3,) and typed["name"] == "x"


@pytest.mark.parametrize("overrides, message", [
    ({"size": "1"}, "no parameter 'size'; valid keys: flag, levels, n, name, rate"),
    ({"n": "2.5"}, "n must be an integer"),
    ({"n": True}, "n must be an integer"),
    ({"n": "0"}, "n must be >= 1"),
    ({"rate": "nan"}, "rate must be a number"),
    ({"flag": "maybe"}, "flag must be true or false"),
    ({"levels": "1,,2"}, "comma-separated integers"),
    ({"levels": "2,0"}, "levels must be >= 1, got 0"),
])
def test_bad_overrides_are_refused(overrides, message):
    with pytest.raises(BenchError, match=message):
        resolve_params("s", SCHEMA, overrides)


def test_parse_assignments():
    assert parse_assignments(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(BenchError, match="KEY=VALUE"):
        parse_assignments(["novalue"])


def test_render_round_trips_through_coerce():
    for spec in SCHEMA:
        assert spec.coerce(spec.render(spec.default)) == spec.default


def test_verdicts():
    thresholds = (Threshold("tok_s", minimum=100.0), Threshold("ttft_ms", maximum=50.0))
    assert judge((), {"x": 1.0}).status == NO_VERDICT
    assert judge(thresholds, {"tok_s": 100.0, "ttft_ms": 50.0}).status == PASS
    verdict = judge(thresholds, {"tok_s": 99.0, "ttft_ms": 51.0})
    assert verdict.status == FAIL
    assert verdict.failures == ("tok_s 99 < min 100", "ttft_ms 51 > max 50")
    nan = judge(thresholds, {"tok_s": math.nan, "ttft_ms": 1.0})
    assert nan.status == FAIL and "NaN" in nan.failures[0]
    with pytest.raises(BenchError, match="did not report"):
        judge(thresholds, {"tok_s": 1.0})
