"""SBIO for the server package: outside the aiohttp/file modules (app*.py) nothing imports
the GPU driver, ctypes or sockets, or opens files; and one log line per request."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import openai
from structlog.testing import capture_logs

import atlas.server

FORBIDDEN = {"cuda", "ctypes", "socket", "aiohttp"}
SERVER_DIR = Path(atlas.server.__file__).parent


def _pure_modules() -> list[Path]:
    return [p for p in sorted(SERVER_DIR.rglob("*.py")) if not p.name.startswith("app")]


def test_pure_server_modules_do_no_io():
    assert len(_pure_modules()) > 10
    for path in _pure_modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = {(node.module or "").split(".")[0]}
            else:
                roots = set()
            assert not roots & FORBIDDEN, f"{path.name} imports {roots & FORBIDDEN}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id != "open", f"{path.name} opens a file"


def test_one_log_line_per_finished_request(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    with capture_logs() as logs:
        chunks = list(client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Tell me a story."}],
            max_tokens=20, stream=True))
        deadline = time.monotonic() + 5
        while not logs and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
    assert len(chunks) > 10
    (line,) = [e for e in logs if e["event"] == "request finished"]
    assert line["generated_tokens"] == 20 and line["finish"] == "length"
    assert line["prompt_tokens"] > 0 and line["ttft_ms"] is not None and line["tools"] == []
    assert len(logs) == 1
