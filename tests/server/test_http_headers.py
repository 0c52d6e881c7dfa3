"""Response headers over real HTTP. X-Request-Id: a caller's id is answered back (a missing or
malformed one replaced by a fresh id). CORS: a browser's preflight from an allowed origin is
answered with the methods and the headers it asked for, the answers (JSON, streamed SSE,
errors) name the origin, another origin's preflight is a 403 and gets no allow header; without
--allowed-origins no response names any origin."""

from __future__ import annotations

import re
import urllib.request

import pytest

from atlas.server.context import ServerOptions
from atlas.server.cors import CorsPolicy
from tests.server.conftest import make_executor
from tests.server.harness import ServerThread

APP = "https://app.example.com"
CHAT = {"model": "tiny", "max_tokens": 4,
        "messages": [{"role": "user", "content": "What is the capital of France?"}]}


def call(url: str, method: str, headers: dict[str, str], body: bytes | None = None
         ) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def chat(srv: ServerThread, origin: str, stream: bool = False) -> tuple[int, dict[str, str]]:
    import json
    status, headers, _ = call(srv.url + "/v1/chat/completions", "POST",
                              {"Origin": origin, "Content-Type": "application/json"},
                              json.dumps({**CHAT, "stream": stream}).encode())
    return status, headers


def preflight(srv: ServerThread, origin: str) -> tuple[int, dict[str, str]]:
    status, headers, _ = call(srv.url + "/v1/chat/completions", "OPTIONS", {
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    return status, headers


def _server(model_dir, origins: str | None) -> ServerThread:
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    options = ServerOptions(model_name="tiny", cors=CorsPolicy.parse(origins))
    return ServerThread(model_dir, make_executor(tok), options=options).start()


@pytest.fixture(scope="module")
def allowing(model_dir):
    srv = _server(model_dir, APP + ", http://localhost:3000")
    yield srv
    srv.stop()


def test_allowed_origin_preflight_and_answers(allowing):
    status, headers = preflight(allowing, APP)
    assert status == 204
    assert headers["Access-Control-Allow-Origin"] == APP
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert headers["Access-Control-Allow-Headers"] == "authorization, content-type"
    for stream in (False, True):
        status, headers = chat(allowing, APP, stream)
        assert status == 200 and headers["Access-Control-Allow-Origin"] == APP
    status, headers, _ = call(allowing.url + "/v1/nowhere", "GET", {"Origin": APP})
    assert status == 404 and headers["Access-Control-Allow-Origin"] == APP


def test_other_origins_are_refused(allowing):
    status, headers = preflight(allowing, "https://evil.example")
    assert status == 403 and "Access-Control-Allow-Origin" not in headers
    status, headers = chat(allowing, "https://evil.example")
    assert status == 200 and "Access-Control-Allow-Origin" not in headers


def test_off_by_default_and_origins_are_checked(model_dir):
    srv = _server(model_dir, None)
    try:
        assert preflight(srv, APP)[0] == 405
        assert "Access-Control-Allow-Origin" not in chat(srv, APP)[1]
    finally:
        srv.stop()
    assert CorsPolicy.parse("*").allow_origin("https://any.example") == "*"
    with pytest.raises(ValueError, match="not an origin"):
        CorsPolicy.parse("app.example.com")


def test_request_ids_are_answered(allowing):
    status, headers, _ = call(allowing.url + "/health", "GET", {"X-Request-Id": "gw-123"})
    assert status == 200 and headers["X-Request-Id"] == "gw-123"
    for given in ({}, {"X-Request-Id": "x" * 500}, {"X-Request-Id": "a b"}):
        status, headers, _ = call(allowing.url + "/v1/nowhere", "GET", given)
        assert status == 404 and re.fullmatch(r"[0-9a-f]{32}", headers["X-Request-Id"])
    status, headers = chat(allowing, APP, stream=True)
    assert status == 200 and re.fullmatch(r"[0-9a-f]{32}", headers["X-Request-Id"])
