"""`atlas serve` as a process: option validation, the readiness line, the LAN warning,
/health, and a clean exit on SIGTERM. The model runner is replaced by the fake executor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner

from atlas_cli.main import cli
from tests.server.harness import free_port
from tests.server.http import request

REPO = Path(__file__).resolve().parents[2]

LAUNCH = textwrap.dedent("""
    import sys
    import atlas.model.load as runner
    from atlas.server.app_assets import load_assets
    from tests.server.conftest import make_executor

    def load_runner(model_dir, **kw):
        return make_executor(load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer)

    runner.load_runner = load_runner
    from atlas_cli.main import cli
    cli(sys.argv[1:], prog_name="atlas")
""")


def test_serve_prints_readiness_line_and_stops_cleanly(model_dir):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'py'}{os.pathsep}{REPO}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, "serve", "--model-from-path", str(model_dir),
         "--bind", "0.0.0.0", "--port", str(port), "--backend", "host"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        line = proc.stdout.readline()
        assert line == f"Listening on 0.0.0.0:{port}\n"
        assert request(f"http://127.0.0.1:{port}/health") == (200, {"status": "ok"})
        status, body = request(f"http://127.0.0.1:{port}/v1/completions",
                               {"model": "x", "prompt": "Hello", "max_tokens": 3},
                               {"X-Request-Id": "trace-7f3a"})
        assert status == 200 and body["usage"]["completion_tokens"] == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "exposes the server" in err
    # the request's log line carries the id the caller gave
    assert any("request finished" in line and "request_id=trace-7f3a" in line
               for line in err.splitlines()), err


def test_invalid_option_combinations_are_refused(model_dir, tmp_path):
    costs, bad = tmp_path / "spec.json", tmp_path / "bad.json"
    costs.write_text(json.dumps({"step_cost": {"1": {"plain_ms": 4.8, "k1_ratio": 1.05}}}))
    bad.write_text(json.dumps({"step_cost": {"1": {"plain_ms": 4.8}}}))
    runner = CliRunner()
    base = ["serve", "--model-from-path", str(model_dir)]
    cases = [
        (["--frobnicate"], "No such option"),
        (["--max-num-seqs", "64", "--max-batch-size", "8"], "--max-num-seqs"),
        (["--max-mixed-step-tokens", "4096"], "--max-mixed-step-tokens"),
        (["--tbt-deadline-ms", "50"], "slai"),
        (["--num-draft-tokens", "4"], "--speculative"),
        (["--speculative", "medusa"], "medusa"),
        (["--speculative", "ngram", "--num-draft-tokens", "0"], "num-draft-tokens"),
        (["--spec-step-costs", str(costs)], "--speculative"),
        (["--speculative", "ngram", "--spec-step-costs", str(bad)], "step_cost table"),
        (["--require-auth"], "--auth-token"),
        (["--auth-token", "abc"], "--require-auth"),
        (["--scheduling-policy", "lottery"], "lottery"),
        (["--tool-call-parser", "xml"], "xml"),
        (["--gpu-memory-utilization", "1.5"], "gpu-memory-utilization"),
        (["--disable-thinking", "--max-thinking-budget", "10"], "--max-thinking-budget"),
        (["other-model"], "not both"),
    ]
    for extra, message in cases:
        result = runner.invoke(cli, base + extra)
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.output, (extra, result.output)


def test_serve_synthetic_moe_weights(tmp_path):
    """`--synthetic-weights SEED`: a directory with config.json and tokenizer files only
    serves a mixture-of-experts model (real runner, CPU backend) with device-made weights."""
    from tests.server.fakes import build_tiny_model_dir

    model = build_tiny_model_dir(tmp_path / "synthetic-moe")
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    moe = json.loads((REPO / "tests/fixtures/tiny-qwen3-moe/config.json").read_text())
    (model / "config.json").write_text(json.dumps({**moe, "vocab_size": vocab}))
    assert not list(model.glob("*.safetensors"))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'py'}{os.pathsep}{REPO}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "atlas_cli.main", "serve", "--model-from-path", str(model),
         "--port", str(port), "--backend", "host", "--max-seq-len", "64",
         "--max-batch-size", "2", "--max-prefill-tokens", "32", "--synthetic-weights", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        assert proc.stdout.readline() == f"Listening on 127.0.0.1:{port}\n"
        status, body = request(f"http://127.0.0.1:{port}/v1/completions",
                               {"model": "x", "prompt": "Hello", "max_tokens": 3})
        assert status == 200, body
        assert 1 <= body["usage"]["completion_tokens"] <= 3  # random weights may stop early
        assert body["choices"][0]["finish_reason"] in ("length", "stop")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
