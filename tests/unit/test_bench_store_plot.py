"""The run store (paths, ATLAS_HOME, newest-first history), level aggregates and the
throughput score computed by hand, the SVG chart (parsed as XML), progress output and
provenance outside a checkout."""

from __future__ import annotations

import io
import math
import xml.etree.ElementTree as ET

import pytest

from atlas.bench.client import RequestResult
from atlas.bench.errors import BenchError
from atlas.bench.plot import nice_ceiling, sweep_svg
from atlas.bench.progress import ProgressBar
from atlas.bench.provenance import commit_label, git_state
from atlas.bench.results import LevelStats, request_metrics
from atlas.bench.store import RunStore, atlas_home
from atlas.bench.workload_throughput import weighted_score

SVG = "{http://www.w3.org/2000/svg}"


def test_atlas_home():
    assert str(atlas_home({"ATLAS_HOME": "/x/y"})) == "/x/y"
    assert atlas_home({}).name == ".atlas"


def test_store_round_trip_and_history_order(tmp_path):
    store = RunStore(tmp_path / "runs")
    assert store.history() == []
    runs = [{"run_id": f"run-{n}", "suite": suite, "metrics": {"x": float(n)}}
            for n, suite in ((5, "short"), (100, "throughput"), (20, "short"))]
    for run in runs:
        path = store.save(run)
        assert path == tmp_path / "runs" / run["suite"] / f"{run['run_id']}.json"
    assert not list((tmp_path / "runs").rglob("*.partial"))
    # numeric order of the nanosecond ids, not string order ("run-100" < "run-20")
    assert [r["run_id"] for r in store.history()] == ["run-100", "run-20", "run-5"]
    assert [r["run_id"] for r in store.history("short", limit=1)] == ["run-20"]
    assert store.load("run-5") == runs[0]
    with pytest.raises(BenchError, match="no stored run 'run-6'"):
        store.load("run-6")


def test_nan_metrics_are_stored_as_null(tmp_path):
    store = RunStore(tmp_path)
    store.save({"run_id": "run-1", "suite": "s", "metrics": {"x": math.nan}})
    assert store.load("run-1")["metrics"] == {"x": None}


def result(sent, latency, prompt, completion, ttft):
    return RequestResult(sent_s=sent, latency_s=latency, ttft_s=ttft, finish_s=latency,
                         prompt_tokens=prompt, completion_tokens=completion)


def test_level_aggregates_by_hand():
    rs = [result(10.0, 2.0, 100, 50, 0.5), result(10.5, 3.5, 100, 30, 0.7)]
    lv = LevelStats.of("c2", 2, 100, rs)
    assert lv.wall_s == pytest.approx(4.0)  # 10.0 .. 14.0
    assert lv.aggregate_output_tok_s == pytest.approx(80 / 4.0)
    assert lv.aggregate_total_tok_s == pytest.approx(280 / 4.0)
    m = lv.metrics()
    assert m["c2.ttft_p50_ms"] == pytest.approx(600.0)
    assert m["c2.aggregate_output_tok_s"] == pytest.approx(20.0)
    # decode rate per stream: (50 - 1) tokens in 1.5 s and (30 - 1) in 2.8 s
    assert m["c2.decode_mean_tok_s"] == pytest.approx((49 / 1.5 + 29 / 2.8) / 2)


def test_request_metrics_aggregate_over_the_wall_time():
    rs = [result(0.0, 1.0, 10, 20, 0.1), result(1.0, 3.0, 10, 40, 0.3)]
    m = request_metrics(rs)
    assert m["aggregate_output_tok_s"] == pytest.approx(60 / 4.0)
    assert m["aggregate_total_tok_s"] == pytest.approx(80 / 4.0)
    assert m["completion_tokens_mean"] == 30 and m["requests"] == 2
    assert m["ttft_p50_ms"] == pytest.approx(200.0)
    # time per output token: 0.9 s / 19 and 2.7 s / 39
    assert m["tpot_mean_ms"] == pytest.approx(1e3 * (0.9 / 19 + 2.7 / 39) / 2)


def test_weighted_score():
    assert weighted_score([100.0, 200.0, 400.0], [1, 1, 2]) == pytest.approx(1100 / 4)


def _level(conc, isl, out, total, p50, p99):
    return {"label": f"c{conc}", "concurrency": conc, "input_tokens": isl,
            "aggregate_output_tok_s": out, "aggregate_total_tok_s": total,
            "ttft_ms": {"p50": p50, "p99": p99}}


def test_sweep_svg_is_valid_with_one_line_per_series():
    run = {"run_id": "run-1", "suite": "concurrency-sweep", "created_at": "t",
           "target": {"model": "m<&>"},
           "levels": [_level(c, 128, 10.0 * c, 30.0 * c, 5.0 + c, 9.0 + c)
                      for c in (1, 2, 4, 8)]}
    root = ET.fromstring(sweep_svg(run))
    assert root.tag == f"{SVG}svg"
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 4  # output and total tok/s, TTFT p50 and p99
    assert all(len(pl.get("points").split()) == 4 for pl in lines)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert any("m<&>" in (t or "") for t in texts)  # escaped in the file, intact when parsed
    assert {"1", "2", "4", "8", "concurrency"} <= set(texts)


def test_missing_values_break_lines_and_single_level_plots():
    levels = [_level(1, 8, 1.0, 2.0, 1.0, 2.0), _level(2, 8, None, 3.0, 1.0, 2.0),
              _level(4, 8, 3.0, 4.0, 1.0, 2.0)]
    root = ET.fromstring(sweep_svg({"run_id": "r", "levels": levels}))
    points = [len(pl.get("points").split()) for pl in root.findall(f"{SVG}polyline")]
    assert points == [1, 1, 3, 3, 3]  # the output line has a gap at concurrency 2
    ET.fromstring(sweep_svg({"run_id": "r", "levels": levels[:1]}))
    with pytest.raises(BenchError, match="no concurrency levels"):
        sweep_svg({"run_id": "r", "suite": "short", "levels": []})


def test_nice_ceiling():
    assert [nice_ceiling(v) for v in (0.0, 0.7, 1.0, 1.2, 3.0, 7.0, 420.0)] == \
        [1.0, 1.0, 1.0, 2.0, 5.0, 10.0, 500.0]


def test_progress_bar_into_a_file_writes_tenths():
    out = io.StringIO()
    bar = ProgressBar(out)
    bar.begin("c4", 20)
    for _ in range(20):
        bar.advance()
    bar.end()
    lines = out.getvalue().splitlines()
    assert lines[0] == "c4 [" + "-" * 30 + "] 0/20"
    assert lines[-1] == "c4 [" + "#" * 30 + "] 20/20"
    assert len(lines) == 11  # 0/10 .. 10/10 of the way, no line per request


def test_provenance_outside_a_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("ATLAS_COMMIT", raising=False)
    assert git_state(tmp_path) == (None, None)
    assert commit_label(tmp_path) == "unknown"


def test_atlas_commit_names_the_tree_when_set(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_COMMIT", "0123456789abcdef0123")
    assert git_state(tmp_path) == ("0123456789abcdef0123", None)
    assert commit_label(tmp_path) == "0123456789ab"


def test_store_refuses_ids_that_are_not_one_path_component(tmp_path):
    store = RunStore(tmp_path / "runs")
    for bad in ("../x", "*", "a/b", ""):
        with pytest.raises(BenchError):
            store.load(bad)
    with pytest.raises(BenchError):
        store.save({"run_id": "run-1", "suite": "../escape"})
    with pytest.raises(BenchError):
        store.history("../..")
