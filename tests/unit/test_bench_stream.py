"""Reading an OpenAI stream: SSE framing, what counts as the first token, token counts from
usage (never from chunks), tool-call assembly, and streams that must count as failures."""

from __future__ import annotations

import json

import pytest

from atlas.bench.client import StreamRecorder, normalize_url
from atlas.bench.errors import BenchError
from atlas.bench.sse import SseDecoder


def test_sse_decoder_frames_events():
    dec = SseDecoder()
    lines = [b": keep-alive\n", b"event: x\n", b"data: {\"a\":\n", b"data: 1}\r\n", b"\n",
             b"data:[DONE]\n", b"\n"]
    events = [e for e in (dec.feed(line) for line in lines) if e is not None]
    assert events == ['{"a":\n1}', "[DONE]"]
    dec.feed(b"data: tail\n")
    assert dec.close() == "tail" and dec.close() is None


def chat(delta=None, finish=None):
    return json.dumps({"choices": [{"index": 0, "delta": delta or {},
                                    "finish_reason": finish}]})


USAGE = json.dumps({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 5}})


def record(events):
    rec = StreamRecorder(sent_s=100.0)
    for t, data in events:
        rec.on_event(100.0 + t, data)
    return rec.result(100.0 + events[-1][0] + 0.001)


def test_timing_and_usage():
    r = record([(0.01, chat({"role": "assistant", "content": ""})),  # not a token
                (0.20, chat({"content": "Par"})),
                (0.25, chat({"content": "is"})),
                (0.40, chat({"content": "."})),
                (0.50, chat({}, "stop")), (0.50, USAGE), (0.51, "[DONE]")])
    assert r.ok and r.text == "Paris."
    assert r.ttft_s == pytest.approx(0.20)
    assert r.chunk_gaps_s == pytest.approx((0.05, 0.15))
    # three text chunks, but usage says 5 tokens: the rate uses usage
    assert (r.prompt_tokens, r.completion_tokens) == (11, 5)
    assert r.decode_s == pytest.approx(0.30)
    assert r.tpot_s == pytest.approx(0.30 / 4)
    assert r.decode_tok_s == pytest.approx(4 / 0.30)
    assert r.finish_reason == "stop"


def test_reasoning_counts_as_first_token_and_completions_text():
    r = record([(0.1, chat({"reasoning_content": "hmm"})), (0.2, chat({}, "length")),
                (0.2, USAGE), (0.3, "[DONE]")])
    assert r.ttft_s == pytest.approx(0.1)
    c = record([(0.3, json.dumps({"choices": [{"text": "hi", "finish_reason": None}]})),
                (0.4, json.dumps({"choices": [{"text": "", "finish_reason": "length"}]})),
                (0.4, USAGE), (0.5, "[DONE]")])
    assert c.ttft_s == pytest.approx(0.3) and c.text == "hi" and c.finish_reason == "length"


def test_tool_call_deltas_are_assembled():
    r = record([(0.1, chat({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                                            "function": {"name": "get_weather",
                                                         "arguments": ""}}]})),
                (0.2, chat({"tool_calls": [{"index": 0, "function": {"arguments": '{"loc'}}]})),
                (0.3, chat({"tool_calls": [{"index": 0,
                                            "function": {"arguments": 'ation": "Paris"}'}}]})),
                (0.4, chat({}, "tool_calls")), (0.4, USAGE), (0.5, "[DONE]")])
    assert r.first_tool_s == pytest.approx(0.1) and r.finish_s == pytest.approx(0.4)
    assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == [
        ("get_weather", {"location": "Paris"})]


@pytest.mark.parametrize("events, message", [
    ([(0.1, chat({"content": "a"})), (0.2, chat({}, "stop")), (0.3, "[DONE]")], "no usage"),
    ([(0.1, chat({"content": "a"})), (0.2, USAGE)], "before data: [DONE]"),
    ([(0.1, json.dumps({"error": {"message": "engine died"}})), (0.2, "[DONE]")],
     "engine died"),
    ([(0.1, "not json"), (0.2, "[DONE]")], "not JSON"),
])
def test_broken_streams_are_errors(events, message):
    r = record(events)
    assert not r.ok and message in r.error


def test_single_token_has_no_decode_rate():
    r = record([(0.1, chat({"content": "a"})), (0.2, chat({}, "stop")),
                (0.2, json.dumps({"choices": [], "usage": {"prompt_tokens": 3,
                                                           "completion_tokens": 1}})),
                (0.3, "[DONE]")])
    assert r.ok and r.tpot_s is None and r.decode_tok_s is None


def test_normalize_url():
    assert normalize_url("http://h:1/") == "http://h:1"
    assert normalize_url(" http://h:1/v1/ ") == "http://h:1"
    with pytest.raises(BenchError):
        normalize_url("h:1")
