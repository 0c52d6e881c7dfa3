"""`atlas generate` / `atlas serve` with --tensor-parallel-size 2 on the host backend: real
worker processes over the host collectives, the same tokens as one process, answered
through the OpenAI SDK, and a killed worker takes the server down with a clear error."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from tests.server.fakes import build_tiny_model_dir
from tests.server.harness import free_port

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'py'}{os.pathsep}{REPO}"}
PROMPT = "hello there"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory) -> Path:
    """The tiny Qwen3 fixture's weights with the tiny BPE tokenizer (494 ids < 512)."""
    root = tmp_path_factory.mktemp("tp")
    tok = build_tiny_model_dir(root / "tok")
    model = root / "tiny-qwen3"
    shutil.copytree(REPO / "tests" / "fixtures" / "tiny-qwen3", model)
    for name in TOKENIZER_FILES:
        shutil.copy(tok / name, model / name)
    return model


def _atlas(*args: str) -> list[str]:
    return [sys.executable, "-m", "atlas_cli.main", *args]


def _generate(model: Path, tp: int) -> str:
    out = subprocess.run(
        _atlas("generate", "--model", str(model), "--prompt", PROMPT, "--raw", "--backend",
               "host", "--max-tokens", "8", "--temperature", "0", "--tensor-parallel-size", str(tp),
               "--master-port", str(free_port())),
        capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _start_server(model: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        _atlas("serve", "--model-from-path", str(model), "--backend", "host", "--port",
               str(port), "--tensor-parallel-size", "2", "--master-port", str(free_port()),
               "--max-seq-len", "128", "--max-batch-size", "2"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    line = proc.stdout.readline()
    assert line == f"Listening on 127.0.0.1:{port}\n", proc.stderr.read() if not line else line
    return proc


def _worker_pids(pid: int) -> list[int]:
    """The spawned rank processes (not multiprocessing's resource tracker)."""
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(k) for k in kids
            if "resource_tracker" not in Path(f"/proc/{k}/cmdline").read_text()]


@pytest.fixture(scope="module")
def tp1_text(tiny_qwen3: Path) -> str:
    text = _generate(tiny_qwen3, 1)
    assert text.strip()
    return text


def test_generate_tp2_matches_tp1(tiny_qwen3: Path, tp1_text: str) -> None:
    assert _generate(tiny_qwen3, 2) == tp1_text


def test_serve_tp2_answers_and_dies_with_its_worker(tiny_qwen3: Path, tp1_text: str) -> None:
    expected = tp1_text.rstrip("\n")
    port = free_port()
    proc = _start_server(tiny_qwen3, port)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x",
                               max_retries=0)
        done = client.completions.create(model="m", prompt=PROMPT, max_tokens=8,
                                         temperature=0)
        assert done.choices[0].text == expected
        workers = _worker_pids(proc.pid)
        assert len(workers) == 1
        os.kill(workers[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert "tensor-parallel worker rank 1" in err and "exited with code -9" in err, err


@pytest.mark.parametrize("extra, message", [
    (["--rank", "1"], "--rank and --world-size go together"),
    (["--rank", "2", "--world-size", "2"], "--rank 2 outside --world-size 2"),
    (["--tensor-parallel-size", "4", "--rank", "0", "--world-size", "2"], "disagree"),
])
def test_parallel_flags_are_checked_before_loading(tiny_qwen3: Path, extra: list[str],
                                                   message: str) -> None:
    from click.testing import CliRunner

    from atlas_cli.main import cli
    result = CliRunner().invoke(cli, ["serve", "--model-from-path", str(tiny_qwen3), *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_indivisible_split_is_a_clear_startup_error(tiny_qwen3: Path) -> None:
    out = subprocess.run(
        _atlas("generate", "--model", str(tiny_qwen3), "--prompt", PROMPT, "--raw",
               "--backend", "host", "--max-tokens", "2", "--tensor-parallel-size", "4",
               "--master-port", str(free_port())),
        capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
    assert out.returncode == 1
    assert "--tensor-parallel-size 4 does not divide num_key_value_heads=2" in out.stderr
    assert "Traceback" not in out.stderr  # refused before any worker was spawned
