"""`atlas generate` / `atlas serve` with --tensor-parallel-size 2 (dense) and
--expert-parallel-size 2 (mixture of experts) on the host backend: real worker processes
over the host collectives, the same tokens as one process, answered through the OpenAI SDK,
and a killed worker takes the server down with a clear error (an in-flight request ends
with an error, the server exits 1 naming the dead rank, nothing hangs)."""

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
#: (fixture, the flag that splits it, how the worker-death log line names the group)
SPLITS = {"tp": ("tiny-qwen3", "--tensor-parallel-size", "tensor-parallel"),
          "ep": ("tiny-qwen2-moe", "--expert-parallel-size", "expert-parallel")}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """The tiny dense and MoE fixtures' weights with the tiny BPE tokenizer (494 ids < 512)."""
    root = tmp_path_factory.mktemp("parallel")
    tok = build_tiny_model_dir(root / "tok")
    out = {}
    for split, (fixture, _, _) in SPLITS.items():
        model = root / fixture
        shutil.copytree(REPO / "tests" / "fixtures" / fixture, model)
        for name in TOKENIZER_FILES:
            shutil.copy(tok / name, model / name)
        out[split] = model
    return out


def _atlas(*args: str) -> list[str]:
    return [sys.executable, "-m", "atlas_cli.main", *args]


def _generate(model: Path, flag: str, size: int) -> str:
    out = subprocess.run(
        _atlas("generate", "--model", str(model), "--prompt", PROMPT, "--raw", "--backend",
               "host", "--max-tokens", "8", "--temperature", "0", flag, str(size),
               "--master-port", str(free_port())),
        capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _start_server(model: Path, flag: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        _atlas("serve", "--model-from-path", str(model), "--backend", "host", "--port",
               str(port), flag, "2", "--master-port", str(free_port()),
               "--max-seq-len", "256", "--max-batch-size", "2"),
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
def one_process_text(models: dict[str, Path]) -> dict[str, str]:
    texts = {split: _generate(models[split], flag, 1)
             for split, (_, flag, _) in SPLITS.items()}
    assert all(t.strip() for t in texts.values())
    return texts


@pytest.mark.parametrize("split", SPLITS)
def test_generate_two_ranks_matches_one(models: dict[str, Path],
                                        one_process_text: dict[str, str], split: str) -> None:
    assert _generate(models[split], SPLITS[split][1], 2) == one_process_text[split]


@pytest.mark.parametrize("split", SPLITS)
def test_serve_two_ranks_answers_and_dies_with_its_worker(
        models: dict[str, Path], one_process_text: dict[str, str], split: str) -> None:
    _, flag, label = SPLITS[split]
    port = free_port()
    proc = _start_server(models[split], flag, port)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x",
                               max_retries=0, timeout=60)
        done = client.completions.create(model="m", prompt=PROMPT, max_tokens=8,
                                         temperature=0)
        assert done.choices[0].text == one_process_text[split].rstrip("\n")
        workers = _worker_pids(proc.pid)
        assert len(workers) == 1
        stream = client.completions.create(model="m", prompt=PROMPT, max_tokens=200,
                                           temperature=0, stream=True)
        first = next(iter(stream))  # the request is in flight: its first tokens arrived
        assert first.choices[0].text
        os.kill(workers[0], signal.SIGKILL)
        with pytest.raises((openai.APIError, openai.APIConnectionError)):
            for _ in stream:
                pass
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    last = err.strip().splitlines()[-1]  # the exit message names the dead rank
    assert last.startswith(f"Error: {label} worker rank 1 (pid {workers[0]})"), err
    assert "exited with code -9" in last, err


@pytest.mark.parametrize("extra, message", [
    (["--rank", "1"], "--rank and --world-size go together"),
    (["--rank", "2", "--world-size", "2"], "--rank 2 outside --world-size 2"),
    (["--tensor-parallel-size", "4", "--rank", "0", "--world-size", "2"], "disagree"),
    (["--expert-parallel-size", "4", "--rank", "0", "--world-size", "2"], "disagree"),
    (["--tensor-parallel-size", "2", "--expert-parallel-size", "4"], "give them the same size"),
])
def test_parallel_flags_are_checked_before_loading(models: dict[str, Path], extra: list[str],
                                                   message: str) -> None:
    from click.testing import CliRunner

    from atlas_cli.main import cli
    result = CliRunner().invoke(cli, ["serve", "--model-from-path", str(models["tp"]), *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.parametrize("split, size, message", [
    ("tp", 4, "--tensor-parallel-size 4 does not divide num_key_value_heads=2"),
    ("ep", 4, "--expert-parallel-size 4 does not divide num_experts=6"),
    ("ep", 2, "split its experts with --expert-parallel-size 2"),
])
def test_unsplittable_model_is_a_clear_startup_error(models: dict[str, Path], split: str,
                                                     size: int, message: str) -> None:
    flag = SPLITS[split][1] if message.startswith("--") else "--tensor-parallel-size"
    out = subprocess.run(
        _atlas("generate", "--model", str(models[split]), "--prompt", PROMPT, "--raw",
               "--backend", "host", "--max-tokens", "2", flag, str(size),
               "--master-port", str(free_port())),
        capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
    assert out.returncode == 1
    assert message in out.stderr
    assert "Traceback" not in out.stderr  # refused before any worker was spawned


@pytest.mark.parametrize("tp, ep, split, label", [
    (2, 1, (False, True), "tensor-parallel"),
    (1, 2, (True, False), "expert-parallel"),
    (2, 2, (True, True), "tensor+expert-parallel"),  # attention split, experts sharded
])
def test_split_flags_choose_what_every_rank_loads(tp: int, ep: int, split: tuple[bool, bool],
                                                  label: str) -> None:
    from atlas_cli.tp_launch import ParallelOptions
    opts = ParallelOptions.from_cli({"tensor_parallel_size": tp, "expert_parallel_size": ep,
                                     "rank": None, "world_size": None,
                                     "master_addr": "127.0.0.1", "master_port": 1})
    assert opts.world().world_size == 2 and opts.local_workers == [1]
    assert opts.load_kwargs() == {"expert_parallel": split[0], "tensor_parallel": split[1]}
    assert opts.label == label
