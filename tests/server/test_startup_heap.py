"""The serving process moves its startup heap out of the cycle collector's reach
(app_serve.freeze_startup_heap): full collections while serving then trace only what
serving allocated, not the model, kernel caches and tables loading made; and it shortens
the GIL switch interval (app_serve.tune_serving_process). An embedding process keeps both."""

from __future__ import annotations

import gc
import sys

import pytest

from atlas.server import app_serve
from atlas.server.app_assets import load_assets
from tests.server.conftest import make_executor
from tests.server.harness import ServerThread
from tests.server.http import request

MESSAGES = {"model": "tiny", "max_tokens": 4,
            "messages": [{"role": "user", "content": "What is the capital of France?"}]}


def _traced(obj: object) -> bool:
    """Whether a full collection would visit `obj` (frozen objects are in no generation)."""
    return any(o is obj for o in gc.get_objects())


def test_a_serving_startup_freezes_what_loading_made(model_dir) -> None:
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    gc.unfreeze()
    executor = make_executor(tok)
    assert _traced(executor)
    interval = sys.getswitchinterval()
    srv = ServerThread(model_dir, executor, serving_process=True).start()
    try:
        assert gc.get_freeze_count() > 0
        assert not _traced(executor)
        assert not _traced(srv.ctx.engine)
        assert sys.getswitchinterval() == pytest.approx(app_serve.SERVING_SWITCH_INTERVAL_S)
        status, body = request(srv.url + "/v1/chat/completions", MESSAGES)
        assert status == 200, body
    finally:
        srv.stop()
        gc.unfreeze()
        sys.setswitchinterval(interval)


def test_an_embedding_process_keeps_its_collector(model_dir) -> None:
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    gc.unfreeze()
    executor = make_executor(tok)
    interval = sys.getswitchinterval()
    srv = ServerThread(model_dir, executor).start()
    try:
        assert gc.get_freeze_count() == 0
        assert _traced(executor)
        assert sys.getswitchinterval() == interval
    finally:
        srv.stop()
