"""Run the real server (aiohttp on a free port, engine thread, scheduler) in a background
thread around a given executor, for tests that drive it over HTTP."""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import replace
from pathlib import Path

from atlas.server.app_assets import load_assets
from atlas.server.app_serve import EngineLimits, serve, shutdown
from atlas.server.auth import TokenAuth
from atlas.server.context import ServerContext, ServerOptions
from atlas.server.metrics import ServerMetrics


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerThread:
    def __init__(self, model_dir: Path, executor, *, options: ServerOptions | None = None,
                 limits: EngineLimits | None = None, auth_tokens: list[str] | None = None,
                 pool_factory=None, load_gate: threading.Event | None = None,
                 serving_process: bool = False) -> None:
        """`load_gate`, when given, holds model loading until it is set (the server is
        listening meanwhile and must answer 503); `serving_process`: serve()'s
        (the test process's collector and switch interval: the caller restores them)."""
        assets = load_assets(model_dir, behavior_lookup=lambda cfg: {"tool_parser": "hermes"})
        self.tokenizer = assets.tokenizer
        self.options = options or ServerOptions(model_name="tiny")
        self.ctx = ServerContext(self.options, assets.tokenizer,
                                 ServerMetrics(self.options.model_name),
                                 auth=TokenAuth(auth_tokens) if auth_tokens else None)
        self.executor = executor
        self.limits = limits or EngineLimits(max_num_seqs=32, max_seq_len=512,
                                             max_prefill_tokens=64)
        self.pool_factory = pool_factory
        self.load_gate = load_gate
        self.serving_process = serving_process
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._runner = None
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        kwargs = {"pool_factory": self.pool_factory} if self.pool_factory else {}
        kwargs["serving_process"] = self.serving_process
        try:
            self._runner = self._loop.run_until_complete(serve(
                self.ctx, "127.0.0.1", self.port, self._load, self.limits,
                self._ready.set, **kwargs))
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()
            return
        self._loop.run_forever()

    def _load(self):
        if self.load_gate is not None:
            self.load_gate.wait(10)
        return self.executor

    def start(self, wait_ready: bool = True) -> "ServerThread":
        self._thread.start()
        if not wait_ready:
            return self
        if not self._ready.wait(10) or self._error is not None:
            raise RuntimeError(f"server did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._runner is not None:
            fut = asyncio.run_coroutine_threadsafe(shutdown(self.ctx, self._runner), self._loop)
            fut.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def with_options(self, **changes) -> ServerOptions:
        return replace(self.options, **changes)


def host_model_server(model_dir: Path, max_seq_len: int, max_batch_size: int,
                      max_prefill_tokens: int) -> ServerThread:
    """A server (not yet started) around a real model directory on the host backend."""
    from atlas.model.load import load_runner
    runner = load_runner(model_dir, backend="host", max_seq_len=max_seq_len,
                         max_batch_size=max_batch_size, max_prefill_tokens=max_prefill_tokens,
                         use_graphs=False)
    return ServerThread(model_dir, runner, options=ServerOptions(model_name="tiny"),
                        limits=EngineLimits(max_num_seqs=max_batch_size,
                                            max_seq_len=max_seq_len,
                                            max_prefill_tokens=max_prefill_tokens))


def default_model_server(max_seq_len: int, max_batch_size: int,
                         max_prefill_tokens: int) -> ServerThread:
    """A server (not yet started) around the real default model on the host backend."""
    from atlas.runtime import model_paths
    return host_model_server(model_paths.ensure_default_model(), max_seq_len,
                             max_batch_size, max_prefill_tokens)
