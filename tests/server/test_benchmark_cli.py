"""`atlas benchmark` against the real aiohttp server (scripted fake executor): every suite
runs with small parameters, each exit code (0 ok, 1 broken, 2 verdict failed) happens for
the reason it documents, runs are stored and listed, and a sweep plots as valid SVG. The
gate's interface (`atlas.bench.suite_runner()`) reports the metric names the gates score.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import orjson
import pytest
import structlog
from click.testing import CliRunner

import atlas
from atlas.gate.gates import GATES
from atlas.gate.record import load_suite_runner
from atlas.server.app_assets import load_assets
from atlas.server.app_serve import EngineLimits
from atlas_cli.main import cli
from tests.server.conftest import make_executor
from tests.server.harness import ServerThread, free_port

REPO = Path(__file__).resolve().parents[2]
ANSWER = "The capital of France is Paris."
TOOL_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'

# Small enough for the tiny model's 512-token context and a fast run.
SMALL = {
    "short": ["max_tokens=6", "requests=2"],
    "long-output": ["max_tokens=12", "requests=2", "warmup_requests=0"],
    "concurrency-sweep": ["concurrencies=1,2,4", "isls=16,32", "osl=6", "rounds=2"],
    "prefix-warmup": ["system_prompt_words=40", "rounds=2", "warm_requests=2",
                      "max_tokens=4"],
    "tool-call": ["requests=2"],
    "throughput": ["input_tokens=24", "max_tokens=6", "requests_per_level=4",
                   "concurrencies=1,2,4", "weights=1,2,4", "warmup_requests=2"],
}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module", autouse=True)
def server_logs_discarded():
    """The server shares this process, and its log lines would land in the CLI's captured
    stdout; with a real server they are another process's output."""
    saved = structlog.get_config()
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    yield
    structlog.configure(**saved)


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    return load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer


@pytest.fixture(scope="module")
def bench_server(model_dir, tokenizer):
    """Calls get_weather whenever the prompt mentions weather (the tool's schema does) and
    answers the capital question."""
    executor = make_executor(tokenizer, scripts=[
        (tokenizer.encode(" weather"), tokenizer.encode(TOOL_CALL)),
        (tokenizer.encode(" capital"), tokenizer.encode(ANSWER))])
    srv = ServerThread(model_dir, executor).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def toolless_server(model_dir, tokenizer):
    """A model that never calls a tool: the tool-call suite's threshold must fail."""
    srv = ServerThread(model_dir, make_executor(tokenizer)).start()
    yield srv
    srv.stop()


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh run store; the CLI runs from the repository (its commit is recorded)."""
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path / "atlas-home"))
    monkeypatch.chdir(REPO)
    return tmp_path / "atlas-home"


def bench(*args: str):
    return CliRunner().invoke(cli, ["benchmark", *args])


def run_json(url: str, suite: str, *extra: str):
    params = [a for p in SMALL[suite] for a in ("--param", p)]
    result = bench("run", suite, "--url", url, "--model", "tiny", "--format", "json",
                   *params, *extra)
    return result, (orjson.loads(result.stdout) if result.exit_code in (0, 2) else None)


@pytest.mark.parametrize("suite", sorted(SMALL))
def test_every_suite_runs_and_is_stored(bench_server, home, suite):
    result, run = run_json(bench_server.url, suite)
    assert result.exit_code == 0, result.output
    assert run["suite"] == suite and run["target"] == {"url": bench_server.url,
                                                       "model": "tiny"}
    stored = orjson.loads((home / "runs" / suite / f"{run['run_id']}.json").read_bytes())
    assert stored["params"] == run["params"]
    assert run["atlas_version"] == atlas.__version__
    assert git("cat-file", "-t", run["git_commit"]) == "commit"
    requests = run["requests"]
    assert requests and all(r["error"] is None for r in requests)
    # token counts are the server's usage, and every request produced output
    assert all(r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 for r in requests)
    assert all(0 < r["ttft_s"] <= r["latency_s"] for r in requests)
    assert "[" in result.stderr and "]" in result.stderr  # the progress bar went to stderr


def test_run_records_every_parameter_not_only_overrides(bench_server, home):
    result, run = run_json(bench_server.url, "short")
    assert result.exit_code == 0, result.output
    assert run["params"] == {"prompt": "What is the capital of France?", "max_tokens": 6,
                             "temperature": 0.0, "requests": 2, "warmup_requests": 1}
    assert len(run["requests"]) == 2  # the warm-up request is not measured
    preview = run["requests"][0]["text_preview"]  # 6 tokens of the scripted answer
    assert preview and ANSWER.startswith(preview)
    assert run["verdict"]["status"] == "none"


def test_sweep_levels_and_aggregates(bench_server, home):
    result, run = run_json(bench_server.url, "concurrency-sweep")
    assert result.exit_code == 0, result.output
    levels = {lv["label"]: lv for lv in run["levels"]}
    assert sorted(levels) == sorted(f"c{c}.isl{i}" for c in (1, 2, 4) for i in (16, 32))
    assert run["info"]["prompt_mode"] == "tokens"
    for label, lv in levels.items():
        assert lv["requests"] == 2 * lv["concurrency"]  # rounds=2 per stream
        # token-id prompts have exactly the asked length (the server's usage says so)
        assert lv["prompt_tokens"] == lv["input_tokens"] * lv["requests"]
        assert lv["aggregate_output_tok_s"] == pytest.approx(
            lv["completion_tokens"] / lv["wall_s"])
    top = [lv for lv in run["levels"] if lv["concurrency"] == 4]
    assert run["metrics"]["aggregate_output_tok_s"] == pytest.approx(
        sum(lv["completion_tokens"] for lv in top) / sum(lv["wall_s"] for lv in top))
    # requests are stored level by level, in the order of the levels
    top_ttfts, start = [], 0
    for lv in run["levels"]:
        if lv["concurrency"] == 4:
            top_ttfts += [r["ttft_s"] * 1e3 for r in run["requests"][start:start + lv["requests"]]]
        start += lv["requests"]
    assert len(top_ttfts) == 16
    assert run["metrics"]["ttft_p99_ms"] == pytest.approx(np.percentile(top_ttfts, 99))


def test_throughput_score_is_the_weighted_mean_of_levels(bench_server, home):
    result, run = run_json(bench_server.url, "throughput")
    assert result.exit_code == 0, result.output
    levels = run["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2, 4]
    assert all(lv["requests"] == 4 for lv in levels)  # warm-up requests are not measured
    totals = [(lv["prompt_tokens"] + lv["completion_tokens"]) / lv["wall_s"] for lv in levels]
    assert run["metrics"]["weighted_total_tok_s"] == pytest.approx(
        (1 * totals[0] + 2 * totals[1] + 4 * totals[2]) / 7)
    assert all(r["prompt_tokens"] == 24 for r in run["requests"])


def test_tool_call_suite_checks_the_call(bench_server, home):
    result, run = run_json(bench_server.url, "tool-call")
    assert result.exit_code == 0, result.output
    assert run["verdict"]["status"] == "pass"
    assert run["metrics"]["tool_call_success_rate"] == 1.0
    call = run["requests"][0]["tool_calls"]
    assert call == [{"name": "get_weather", "arguments": '{"location": "Paris"}'}]
    assert run["metrics"]["tool_call_p50_ms"] >= run["metrics"]["tool_call_start_p50_ms"]


def test_failed_threshold_exits_2_unless_told_not_to(toolless_server, home):
    result, run = run_json(toolless_server.url, "tool-call")
    assert result.exit_code == 2, result.output
    assert run["verdict"]["status"] == "fail"
    assert "tool_call_success_rate 0 < min 1" in run["verdict"]["failures"][0]
    result, run = run_json(toolless_server.url, "tool-call", "--no-fail-on-verdict")
    assert result.exit_code == 0 and run["verdict"]["status"] == "fail"
    assert len(list((home / "runs" / "tool-call").glob("run-*.json"))) == 2


def test_no_server_is_exit_1_and_says_so(home):
    result = bench("run", "short", "--url", f"http://127.0.0.1:{free_port()}", "--model", "m")
    assert result.exit_code == 1
    assert "no server answers" in result.stderr and result.stdout == ""
    assert not (home / "runs").exists()


def test_unknown_param_is_exit_1_listing_valid_keys(bench_server, home):
    result = bench("run", "short", "--url", bench_server.url, "--model", "m",
                   "--param", "max_tokenz=3")
    assert result.exit_code == 1
    assert "'max_tokenz'" in result.stderr
    assert "valid keys: max_tokens, prompt, requests, temperature, warmup_requests" \
        in result.stderr


def test_bad_param_value_and_usage_errors_are_exit_1(bench_server, home):
    result = bench("run", "short", "--url", bench_server.url, "--model", "m",
                   "--param", "max_tokens=lots")
    assert result.exit_code == 1 and "max_tokens must be an integer" in result.stderr
    assert bench("run", "short", "--url", bench_server.url).exit_code == 1  # no --model
    assert bench("run", "no-such-suite", "--model", "m").exit_code == 1


def test_history_lists_runs_and_run_returns_full_parameters(bench_server, home):
    _, first = run_json(bench_server.url, "short")
    _, second = run_json(bench_server.url, "concurrency-sweep")
    listed = orjson.loads(bench("history", "--format", "json").stdout)
    assert [r["run_id"] for r in listed] == [second["run_id"], first["run_id"]]
    only = orjson.loads(bench("history", "--id", "short", "--format", "json").stdout)
    assert [r["run_id"] for r in only] == [first["run_id"]]
    assert len(orjson.loads(bench("history", "--limit", "1", "--format", "json").stdout)) == 1
    table = bench("history").stdout
    assert first["run_id"] in table and second["run_id"] in table
    full = orjson.loads(bench("history", "--run", second["run_id"], "--format", "json").stdout)
    assert full["params"] == {"concurrencies": [1, 2, 4], "isls": [16, 32], "osl": 6,
                              "rounds": 2, "temperature": 0.0, "prompt_mode": "auto",
                              "seed": 0}
    assert bench("history", "--run", "run-1").exit_code == 1


def test_plot_writes_valid_svg_of_a_sweep(bench_server, home, tmp_path, monkeypatch):
    _, run = run_json(bench_server.url, "concurrency-sweep")
    monkeypatch.chdir(tmp_path)
    result = bench("plot", run["run_id"])
    assert result.exit_code == 0, result.output
    out = tmp_path / f"{run['run_id']}.svg"
    assert result.stdout.strip() == out.name
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    # two input lengths x (output, total) tok/s + two x (p50, p99) TTFT lines
    assert len(root.findall("{http://www.w3.org/2000/svg}polyline")) == 8
    _, short = run_json(bench_server.url, "short")
    result = bench("plot", short["run_id"])
    assert result.exit_code == 1 and "no concurrency levels" in result.stderr


def test_list_shows_suites_and_one_suites_schema():
    listing = bench("list").stdout
    for suite in SMALL:
        assert suite in listing
    detail = bench("list", "throughput").stdout
    assert "1,2,4,8,16,32,64" in detail and "1,1,2,2,4,4,8" in detail
    assert bench("list", "nope").exit_code == 1


def test_gate_interface_reports_the_metrics_the_gates_score(bench_server, home):
    runner = load_suite_runner()
    small = {suite: dict(p.split("=", 1) for p in params) for suite, params in SMALL.items()}
    for gate in GATES:
        if gate.suite not in small:
            continue  # kernel-table: not an HTTP suite
        metrics = runner.run(gate.suite, bench_server.url, "tiny", small[gate.suite])
        assert set(gate.metrics) <= set(metrics), gate.name
        assert all(metrics[name] > 0 for name in gate.metrics), gate.name
    stored = orjson.loads(bench("history", "--format", "json").stdout)
    assert stored and all(r["source"] == "gate" for r in stored)


@pytest.mark.slow
def test_short_suite_against_the_real_default_model(home):
    """The real SmolLM2 on HostBackend: the harness's numbers come from a real model's
    streams (two tokens, one request: the CPU forward pass is slow)."""
    from atlas.runtime import model_paths
    try:
        model_dir = model_paths.ensure_default_model()
        from atlas.model.load import load_runner
    except Exception as exc:  # no default model on this machine, or no runner yet
        pytest.skip(f"default model unavailable: {exc}")
    runner = load_runner(model_dir, backend="host", max_seq_len=256, max_batch_size=1,
                         max_prefill_tokens=128, use_graphs=False)
    srv = ServerThread(model_dir, runner, limits=EngineLimits(
        max_num_seqs=1, max_seq_len=256, max_prefill_tokens=128)).start()
    try:
        result = bench("run", "short", "--url", srv.url, "--model", "smollm2", "--format",
                       "json", "--param", "max_tokens=2", "--param", "requests=1",
                       "--param", "warmup_requests=0")
    finally:
        srv.stop()
    assert result.exit_code == 0, result.output
    run = orjson.loads(result.stdout)
    (req,) = run["requests"]
    assert req["completion_tokens"] == 2 and req["prompt_tokens"] > 5
    assert run["metrics"]["output_tok_s"] == pytest.approx(1 / req["tpot_s"])


def test_shapes_beyond_the_servers_context_are_refused_before_sending(bench_server, home):
    steps = len(bench_server.executor.steps)
    result = bench("run", "throughput", "--url", bench_server.url, "--model", "tiny",
                   "--param", "input_tokens=500", "--param", "max_tokens=100")
    assert result.exit_code == 1
    assert "500 prompt + 100 output tokens exceed the server's context of 512" in result.stderr
    assert len(bench_server.executor.steps) == steps  # no request reached the model


def test_word_prompts_when_asked(bench_server, home):
    result, run = run_json(bench_server.url, "concurrency-sweep", "--param", "prompt_mode=words")
    assert result.exit_code == 0, result.output
    assert run["info"]["prompt_mode"] == "words"
    assert all(r["prompt_tokens"] >= 16 for r in run["requests"])  # >= 1 token per word


def test_a_failed_request_breaks_the_run_with_the_servers_message(model_dir, tokenizer,
                                                                   home):
    srv = ServerThread(model_dir, make_executor(tokenizer), auth_tokens=["sesame"]).start()
    try:
        refused = bench("run", "short", "--url", srv.url, "--model", "tiny",
                        "--param", "requests=1")
        allowed = bench("run", "short", "--url", srv.url, "--model", "tiny",
                        "--param", "requests=1", "--api-key", "sesame")
    finally:
        srv.stop()
    assert refused.exit_code == 1 and "HTTP 401" in refused.stderr
    assert "request 1 of 1 failed" in refused.stderr
    assert allowed.exit_code == 0, allowed.output
    assert len(list((home / "runs").rglob("run-*.json"))) == 1  # broken runs are not stored


def test_one_weight_per_throughput_level(bench_server, home):
    result = bench("run", "throughput", "--url", bench_server.url, "--model", "tiny",
                   "--param", "concurrencies=1,2", "--param", "weights=1,2,4")
    assert result.exit_code == 1 and "3 weights for 2 concurrency levels" in result.stderr
