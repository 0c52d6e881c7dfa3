"""Bad input gets the right status and error shape, and the server keeps serving."""

from __future__ import annotations

import threading
import time

import pytest

from atlas.server.context import ServerOptions
from atlas.server.rate_limit import RateLimits
from tests.server.conftest import make_executor
from tests.server.harness import ServerThread
from tests.server.http import request

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
GOOD_CHAT = {"model": "tiny", "max_tokens": 4,
             "messages": [{"role": "user", "content": "What is the capital of France?"}]}
GOOD_MESSAGES = {"model": "tiny", "max_tokens": 4,
                 "messages": [{"role": "user", "content": "What is the capital of France?"}]}
TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def guarded(model_dir):
    """Auth required and a 4 KiB body limit."""
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    options = ServerOptions(model_name="tiny", max_body_bytes=4096)
    srv = ServerThread(model_dir, make_executor(tok), options=options,
                       auth_tokens=[TOKEN, "other-token"]).start()
    yield srv
    srv.stop()


def assert_openai_error(status_body, status, param=None, contains=""):
    got_status, body = status_body
    assert got_status == status, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert contains in err["message"]
    if param is not None:
        assert err["param"] == param
    return err


def assert_anthropic_error(status_body, status, kind, contains=""):
    got_status, body = status_body
    assert got_status == status, body
    assert body["type"] == "error" and body["error"]["type"] == kind
    assert contains in body["error"]["message"]


def still_serves(srv, headers=AUTH):
    status, body = request(srv.url + CHAT, GOOD_CHAT, headers)
    assert status == 200 and body["choices"][0]["message"]["content"]


def test_malformed_json(guarded):
    err = assert_openai_error(request(guarded.url + CHAT, b'{"model": "tiny", ', AUTH), 400,
                              contains="not valid JSON")
    assert err["type"] == "invalid_request_error"
    assert_anthropic_error(request(guarded.url + MESSAGES, b"[1, 2", AUTH), 400,
                           "invalid_request_error", "not valid JSON")
    assert_openai_error(request(guarded.url + CHAT, b"[]", AUTH), 400, contains="JSON object")
    still_serves(guarded)


@pytest.mark.parametrize("field,value,param", [
    ("temperature", "hot", "temperature"),
    ("temperature", 3.5, "temperature"),
    ("max_tokens", -1, "max_tokens"),
    ("max_tokens", True, "max_tokens"),
    ("top_p", 0, "top_p"),
    ("stream", "yes", "stream"),
    ("messages", "hello", "messages"),
    ("messages", [{"role": "wizard", "content": "x"}], "messages[0].role"),
    ("messages", [{"role": "user", "content": 5}], "messages[0].content"),
    ("stop", [1, 2], "stop"),
    ("n", 0, "n"),
    ("n", 17, "n"),
    ("logprobs", 3, "logprobs"),
    ("top_logprobs", 2, "top_logprobs"),          # without logprobs=true
    ("top_logprobs", 21, "top_logprobs"),
    ("ignore_eos", "yes", "ignore_eos"),
    ("min_tokens", -1, "min_tokens"),
    ("min_tokens", 10**6, "min_tokens"),          # more than max_tokens
    ("logit_bias", {"5": 150}, "logit_bias"),      # beyond OpenAI's [-100, 100]
    ("logit_bias", {"5": -100.5}, "logit_bias"),
    ("logit_bias", {"5": "2"}, "logit_bias"),
    ("logit_bias", {"5": True}, "logit_bias"),
    ("logit_bias", {str(t): 1 for t in range(301)}, "logit_bias"),   # at most 300 entries
    ("logit_bias", {"five": -100}, "logit_bias"),
    ("logit_bias", {"\u00b2": -100}, "logit_bias"),   # a digit, but not an ASCII one
    ("logit_bias", {"99999999": -100}, "logit_bias"),   # not in the vocabulary
    ("allowed_token_ids", [], "allowed_token_ids"),
    ("allowed_token_ids", [1, "2"], "allowed_token_ids"),
    ("allowed_token_ids", [99999999], "allowed_token_ids"),
    ("bad_words", "  ", "bad_words"),
    ("bad_words", [1], "bad_words"),
    ("continue_final_message", "yes", "continue_final_message"),
    ("priority", "high", "priority"),
    ("priority", 1, "priority"),       # the server's policy is fifo: no priorities
])
def test_wrong_types_and_ranges(guarded, field, value, param):
    assert_openai_error(request(guarded.url + CHAT, {**GOOD_CHAT, field: value}, AUTH), 400,
                        param=param)


def test_logit_bias_takes_every_value_in_range_and_at_most_300_entries(guarded):
    """OpenAI's range: any number in [-100, 100] is accepted (chat and legacy completions);
    past it, or more than MAX_LOGIT_BIAS entries, is a 400 that names the limit."""
    good = {"model": "tiny", "prompt": "Hi", "max_tokens": 2}
    for url, body in ((CHAT, GOOD_CHAT), ("/v1/completions", good)):
        for bias in ({"5": 2.5}, {"5": -100, "6": 100, "7": -99.9, "8": 0},
                     {str(t): -0.5 for t in range(300)}):
            status, reply = request(guarded.url + url, {**body, "logit_bias": bias}, AUTH)
            assert status == 200, reply
        assert_openai_error(request(guarded.url + url, {**body, "logit_bias": {"5": 150}},
                                    AUTH), 400, "logit_bias", "[-100, 100]")
        many = {str(t): 1 for t in range(301)}
        assert_openai_error(request(guarded.url + url, {**body, "logit_bias": many}, AUTH),
                            400, "logit_bias", "301 entries; at most 300")
    still_serves(guarded)


def test_anthropic_wrong_types(guarded):
    missing = {k: v for k, v in GOOD_MESSAGES.items() if k != "max_tokens"}
    assert_anthropic_error(request(guarded.url + MESSAGES, missing, AUTH), 400,
                           "invalid_request_error", "max_tokens")
    assert_anthropic_error(request(guarded.url + MESSAGES, {**GOOD_MESSAGES,
                                                            "temperature": 1.5}, AUTH),
                           400, "invalid_request_error", "temperature")
    still_serves(guarded)


def test_unknown_fields(guarded):
    assert_openai_error(request(guarded.url + CHAT, {**GOOD_CHAT, "frobnicate": 1}, AUTH), 400,
                        param="frobnicate", contains="Unrecognized request argument")
    assert_anthropic_error(request(guarded.url + MESSAGES, {**GOOD_MESSAGES, "frobnicate": 1},
                                   AUTH), 400, "invalid_request_error",
                           "frobnicate: Extra inputs are not permitted")
    still_serves(guarded)


def test_body_over_the_limit(guarded):
    big = {**GOOD_CHAT, "messages": [{"role": "user", "content": "x" * 8000}]}
    err = assert_openai_error(request(guarded.url + CHAT, big, AUTH), 413,
                              contains="ATLAS_MAX_BODY_BYTES")
    assert err["code"] == "request_too_large"
    assert_anthropic_error(request(guarded.url + MESSAGES, {**GOOD_MESSAGES, "messages": [
        {"role": "user", "content": "x" * 8000}]}, AUTH), 413, "request_too_large")
    still_serves(guarded)


def test_prompt_over_the_context(guarded):
    words = " ".join(["Paris"] * 1200)
    assert len(words) < 4096 * 2
    body = {**GOOD_CHAT, "messages": [{"role": "user", "content": words[:3800]}]}
    assert_openai_error(request(guarded.url + CHAT, body, AUTH), 400, param="messages",
                        contains="context")
    assert_anthropic_error(request(guarded.url + MESSAGES, {**GOOD_MESSAGES, "messages": [
        {"role": "user", "content": words[:3800]}]}, AUTH), 400, "invalid_request_error",
        "context")
    still_serves(guarded)


def test_bad_or_missing_token(guarded):
    err = assert_openai_error(request(guarded.url + CHAT, GOOD_CHAT), 401)
    assert err["type"] == "authentication_error"
    assert_openai_error(request(guarded.url + CHAT, GOOD_CHAT,
                                {"Authorization": "Bearer wrong"}), 401)
    assert_anthropic_error(request(guarded.url + MESSAGES, GOOD_MESSAGES,
                                   {"x-api-key": "wrong"}), 401, "authentication_error")
    status, _ = request(guarded.url + MESSAGES, GOOD_MESSAGES, {"x-api-key": "other-token"})
    assert status == 200
    assert request(guarded.url + "/health")[0] == 200     # reads stay open
    still_serves(guarded)


def test_unknown_tool_choice_name(guarded):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    body = {**GOOD_CHAT, "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": "launch_rockets"}}}
    assert_openai_error(request(guarded.url + CHAT, body, AUTH), 400,
                        param="tool_choice.function.name", contains="launch_rockets")
    anth = {**GOOD_MESSAGES, "tools": [{"name": "get_weather", "input_schema": {}}],
            "tool_choice": {"type": "tool", "name": "launch_rockets"}}
    assert_anthropic_error(request(guarded.url + MESSAGES, anth, AUTH), 400,
                           "invalid_request_error", "launch_rockets")
    still_serves(guarded)


def test_rate_limit_overflow(model_dir):
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    options = ServerOptions(model_name="tiny", rate_limits=RateLimits(rpm=60, burst_rpm=2))
    srv = ServerThread(model_dir, make_executor(tok), options=options).start()
    try:
        key_a = {"Authorization": "Bearer client-a"}
        assert request(srv.url + CHAT, GOOD_CHAT, key_a)[0] == 200
        assert request(srv.url + CHAT, GOOD_CHAT, key_a)[0] == 200
        err = assert_openai_error(request(srv.url + CHAT, GOOD_CHAT, key_a), 429)
        assert err["type"] == "rate_limit_error"
        assert_anthropic_error(request(srv.url + MESSAGES, GOOD_MESSAGES, key_a), 429,
                               "rate_limit_error")
        # another key has its own bucket
        assert request(srv.url + CHAT, GOOD_CHAT, {"Authorization": "Bearer client-b"})[0] == 200
    finally:
        srv.stop()


def test_health_is_503_until_the_model_is_loaded(model_dir):
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    gate = threading.Event()
    srv = ServerThread(model_dir, make_executor(tok), load_gate=gate).start(wait_ready=False)
    try:
        for _ in range(200):
            try:
                status, body = request(srv.url + "/health")
                break
            except OSError:
                time.sleep(0.02)
        assert status == 503 and body == {"status": "loading"}
        err = assert_openai_error(request(srv.url + CHAT, GOOD_CHAT), 503)
        assert err["code"] == "model_not_loaded"
        gate.set()
        for _ in range(200):
            if request(srv.url + "/health")[0] == 200:
                break
            time.sleep(0.02)
        still_serves(srv, headers={})
    finally:
        gate.set()
        srv.stop()


def test_metrics_exposes_prometheus_text(guarded):
    still_serves(guarded)
    status, text = request(guarded.url + "/metrics")
    assert status == 200
    for name in ("atlas_requests_total", "atlas_tokens_generated_total", "atlas_ttft_seconds_count",
                 "atlas_decode_throughput_tok_per_sec", "atlas_kv_pool_utilization_ratio",
                 "atlas_active_sequences", "atlas_state_slots_in_use 0",
                 "atlas_state_slots_total 0"):
        assert name in text
    line = next(l for l in text.splitlines() if l.startswith("atlas_ttft_seconds_count"))
    assert float(line.split()[-1]) >= 1


def test_engine_failure_is_a_500_and_the_server_recovers(model_dir):
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    srv = ServerThread(model_dir, make_executor(tok, fail_on=tok.encode(" explode"))).start()
    try:
        boom = {**GOOD_CHAT, "messages": [{"role": "user", "content": "please explode now"}]}
        err = assert_openai_error(request(srv.url + CHAT, boom), 500)
        assert err["type"] == "server_error"
        assert_anthropic_error(request(srv.url + MESSAGES, {**GOOD_MESSAGES, "messages": boom[
            "messages"]}), 500, "api_error")
        still_serves(srv, headers={})
        blocks = srv.ctx.engine.scheduler.blocks
        assert blocks.num_available == blocks.num_blocks
    finally:
        srv.stop()


def test_a_scheduler_bug_ends_requests_instead_of_hanging_them(model_dir):
    from atlas.server.app_assets import load_assets
    from tests.server.fakes import FakeBlockPool

    class BrokenPool(FakeBlockPool):
        def allocate(self, n):
            raise RuntimeError("allocator bug")

    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    srv = ServerThread(model_dir, make_executor(tok), pool_factory=BrokenPool).start()
    try:
        assert_openai_error(request(srv.url + CHAT, GOOD_CHAT), 500)
        assert_openai_error(request(srv.url + CHAT, GOOD_CHAT), 500)  # the loop still runs
    finally:
        srv.stop()
