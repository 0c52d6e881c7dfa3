"""The `atlas` command as a user meets it: help that imports nothing heavy, and expected
failures (missing model, invalid or unreadable config, a checkpoint that does not match its
config, a port in use) as at most five lines naming the file or tensor, exit code 1, no
traceback unless `--debug`."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from atlas_cli.main import COMMANDS

REPO = Path(__file__).resolve().parents[2]
TINY_LLAMA = REPO / "tests" / "fixtures" / "tiny-llama"
ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'py'}{os.pathsep}{REPO}", "ATLAS_DEBUG": ""}
HEAVY = ("numpy", "aiohttp", "structlog", "tokenizers", "jinja2", "orjson", "atlas.model",
         "atlas.runtime", "atlas.bench", "atlas.server.app")


def atlas(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "atlas_cli.main", *args], cwd=REPO, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def assert_short_failure(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr, done.stderr
    # the failure is the `Error:` line and what follows it (progress and log lines may precede)
    err = done.stderr[done.stderr.index("Error: "):].splitlines()
    lines = [line for line in err if not line.startswith("(run `atlas")]
    assert 1 <= len(lines) <= 5, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


# --- lazy help ------------------------------------------------------------------------------

LOADED = """
import sys
from atlas_cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("MODULES", *sorted(sys.modules))
"""


@pytest.mark.parametrize("args", [["--help"], *[[name, "--help"] for name in sorted(COMMANDS)]])
def test_help_imports_no_engine_server_or_numpy(args):
    done = subprocess.run([sys.executable, "-c", LOADED, *args], cwd=REPO, env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert "Usage:" in done.stdout, done
    modules = done.stdout.split("MODULES")[-1].split()
    assert not [m for m in modules if m.startswith(HEAVY)]


def test_command_table_matches_the_modules():
    for name, (module, summary) in COMMANDS.items():
        command = importlib.import_module(module).command
        assert command.name == name and summary.endswith(".")
    from atlas.bench import API_KEY_ENV
    from atlas_cli.cmd_benchmark import API_KEY_ENV as cli_env
    assert cli_env == API_KEY_ENV


# --- expected failures ------------------------------------------------------------------------

def test_missing_model():
    for args in (["generate", "--model", "/nonexistent/model", "--prompt", "hi"],
                 ["serve", "/nonexistent/model"]):
        assert_short_failure(atlas(*args), "/nonexistent/model", "atlas models list")


@pytest.fixture
def broken_config(model_dir, tmp_path):
    d = tmp_path / "broken"
    shutil.copytree(model_dir, d)
    (d / "config.json").write_text('{"model_type": "llama", "hidden_si')
    return d


def test_truncated_config_names_the_file(broken_config):
    for command in ("generate", "serve"):
        args = (["generate", "--model", str(broken_config), "--prompt", "hi"]
                if command == "generate" else ["serve", str(broken_config)])
        assert_short_failure(atlas(*args), f"{broken_config / 'config.json'}", "not valid JSON")


def test_unreadable_config_names_the_file(model_dir, tmp_path):
    d = tmp_path / "unreadable"
    shutil.copytree(model_dir, d)
    (d / "config.json").unlink()
    (d / "config.json").mkdir()    # unreadable as a file, even for root
    assert_short_failure(atlas("serve", str(d)), f"cannot read {d / 'config.json'}")


def test_debug_shows_the_traceback(broken_config):
    done = atlas("--debug", "serve", str(broken_config))
    assert done.returncode == 1 and "Traceback" in done.stderr


def test_layer_count_mismatch_lists_a_few_tensors_and_the_count(model_dir, tmp_path):
    d = tmp_path / "mismatch"
    shutil.copytree(TINY_LLAMA, d)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(model_dir / name, d / name)
    config = json.loads((d / "config.json").read_text())
    config["num_hidden_layers"] += 3
    (d / "config.json").write_text(json.dumps(config))
    done = atlas("generate", "--model", str(d), "--prompt", "hi", "--backend", "host")
    assert_short_failure(done, "do not match config.json", "num_hidden_layers",
                         "missing tensor 'model.layers.", "more")


def test_port_in_use_is_reported_before_loading(model_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = atlas("serve", "--model-from-path", str(model_dir), "--port", str(port))
    assert_short_failure(done, f"port {port}", "already in use", "--port")
    assert "loading" not in done.stderr
