"""The serving process moves its startup heap out of the cycle collector's reach
(app_serve.freeze_startup_heap): full collections while serving then trace only what
serving allocated, not the model, kernel caches and tables loading made."""

from __future__ import annotations

import gc

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
    srv = ServerThread(model_dir, executor, freeze_heap=True).start()
    try:
        assert gc.get_freeze_count() > 0
        assert not _traced(executor)
        assert not _traced(srv.ctx.engine)
        status, body = request(srv.url + "/v1/chat/completions", MESSAGES)
        assert status == 200, body
    finally:
        srv.stop()
        gc.unfreeze()


def test_an_embedding_process_keeps_its_collector(model_dir) -> None:
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    gc.unfreeze()
    executor = make_executor(tok)
    srv = ServerThread(model_dir, executor).start()
    try:
        assert gc.get_freeze_count() == 0
        assert _traced(executor)
    finally:
        srv.stop()
