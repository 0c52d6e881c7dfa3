"""The real server driven by the official `openai` SDK: chat (plain and streamed),
completions, tool calls, usage equal to the tokenizer's counts."""

from __future__ import annotations

import json

import openai
import pytest

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                   "required": ["location"]}}}


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def chat_prompt_ids(server, messages, tools=None):
    template = server.tokenizer.chat_template(bool(tools))
    text = template.render(messages, tools=tools, add_generation_prompt=True)
    return server.tokenizer.encode(text)


def test_chat_non_streaming_answers_and_counts_usage(client, server):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    resp = client.chat.completions.create(model="tiny", messages=messages, max_tokens=50)
    choice = resp.choices[0]
    assert choice.message.content == "The capital of France is Paris."
    assert choice.finish_reason == "stop"
    assert resp.usage.prompt_tokens == len(chat_prompt_ids(server, messages))
    answer_ids = server.tokenizer.encode("The capital of France is Paris.")
    assert resp.usage.completion_tokens == len(answer_ids) + 1  # + the eos token
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens


def test_chat_streaming_matches_non_streaming(client):
    messages = [{"role": "user", "content": "Tell me a story."}]
    whole = client.chat.completions.create(model="tiny", messages=messages, max_tokens=12)
    stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=12,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert text == whole.choices[0].message.content and text
    assert finishes[-1] == "length" and whole.choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 12
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_stop_string_cuts_and_is_not_emitted(client):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    resp = client.chat.completions.create(model="tiny", messages=messages, max_tokens=50,
                                          stop=["France"])
    assert resp.choices[0].message.content == "The capital of "
    assert resp.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=50,
                                            stop=["France"], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "The capital of "


def test_ignore_eos_runs_to_max_tokens_without_showing_eos(client):
    """vLLM's `ignore_eos` (benchmark clients send it): the scripted answer ends in EOS,
    which no longer ends the output; the EOS tokens drawn after it are not text."""
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    resp = client.chat.completions.create(model="tiny", messages=messages, max_tokens=20,
                                          extra_body={"ignore_eos": True})
    assert resp.choices[0].message.content == "The capital of France is Paris."
    assert resp.choices[0].finish_reason == "length" and resp.usage.completion_tokens == 20
    done = client.completions.create(model="tiny", prompt="What is the capital of France?",
                                     max_tokens=20, extra_body={"ignore_eos": True})
    assert done.choices[0].finish_reason == "length" and done.usage.completion_tokens == 20


def test_include_stop_str_in_output_keeps_the_matched_stop(client):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    resp = client.chat.completions.create(model="tiny", messages=messages, max_tokens=50,
                                          stop=["France"],
                                          extra_body={"include_stop_str_in_output": True})
    assert resp.choices[0].message.content == "The capital of France"
    assert resp.choices[0].finish_reason == "stop"


def test_stop_strings_wait_for_min_tokens(client, server):
    """A stop string inside the first `min_tokens` tokens' text does not end the output."""
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    past = len(server.tokenizer.encode("The capital of France"))
    resp = client.chat.completions.create(model="tiny", messages=messages, max_tokens=50,
                                          stop=["France"], extra_body={"min_tokens": past})
    assert resp.choices[0].message.content == "The capital of France is Paris."
    assert resp.choices[0].finish_reason == "stop"
    early = client.chat.completions.create(model="tiny", messages=messages, max_tokens=50,
                                           stop=["France"], extra_body={"min_tokens": 1})
    assert early.choices[0].message.content == "The capital of "


def test_logit_bias_reaches_the_sampler_as_masks_and_additive_biases(client, server):
    """-100 bans and 100 selects (the engine's token masks; tests/numerics/test_token_masks.py
    checks the draws): every sampled step of the request carries a mask that says so. Values
    between reach the GPU sampler as SamplingParams.logit_bias (0 is left out), on chat and
    legacy completions alike (tests/numerics/test_logit_bias.py checks the draws)."""
    import numpy as np

    before = len(server.executor.steps)
    resp = client.completions.create(model="tiny", prompt="The capital of France", max_tokens=3,
                                     logit_bias={"7": -100, "11": 100, "12": 100, "14": 2.5,
                                                 "13": -0.75, "15": 0})
    assert resp.choices[0].finish_reason == "length"
    sampled = [st for step in server.executor.steps[before:] for st in step if st.sample]
    masks = [st.token_mask for st in sampled]
    assert len(masks) == 3 and all(m is not None for m in masks)
    row = np.zeros((1, 32), np.uint32)
    masks[0](row, 0)
    assert np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist() == [
        11, 12]
    assert all(st.sampling.logit_bias == ((13, -0.75), (14, 2.5)) for st in sampled)

    before = len(server.executor.steps)
    client.chat.completions.create(model="tiny", max_tokens=2, logit_bias={"20": 99.5},
                                   messages=[{"role": "user", "content": "Name a color."}])
    sampled = [st for step in server.executor.steps[before:] for st in step if st.sample]
    assert sampled and all(st.sampling.logit_bias == ((20, 99.5),) and st.token_mask is None
                           for st in sampled)


def test_completions_batch_prompts_and_echo(client, server):
    """A legacy completion with an array of prompts: choice p * n + i answers prompt p, as
    each prompt alone would; usage counts every prompt; echo starts each text with its
    prompt, streamed too; with logprobs its prompt tokens come first (the first without
    one)."""
    prompts = ["The capital of France", "Tell me a story."]
    alone = [client.completions.create(model="tiny", prompt=p, max_tokens=6).choices[0].text
             for p in prompts]
    both = client.completions.create(model="tiny", prompt=prompts, max_tokens=6, n=2)
    assert [c.index for c in both.choices] == [0, 1, 2, 3]
    assert [c.text for c in both.choices] == [alone[0], alone[0], alone[1], alone[1]]
    assert both.usage.prompt_tokens == sum(len(server.tokenizer.encode(p, True))
                                           for p in prompts)
    echo = client.completions.create(model="tiny", prompt=prompts, max_tokens=6, echo=True)
    assert [c.text for c in echo.choices] == [p + a for p, a in zip(prompts, alone)]
    streamed = ["", ""]
    for chunk in client.completions.create(model="tiny", prompt=prompts, max_tokens=6,
                                           echo=True, stream=True):
        for c in chunk.choices:
            streamed[c.index] += c.text
    assert streamed == [c.text for c in echo.choices]
    scored = client.completions.create(model="tiny", prompt=prompts[0], max_tokens=2,
                                       echo=True, logprobs=1).choices[0].logprobs
    n_prompt = len(server.tokenizer.encode(prompts[0], True))
    assert len(scored.tokens) == n_prompt   # the fake model scores prompts, no samples
    assert "".join(scored.tokens) == prompts[0]
    assert scored.token_logprobs[0] is None and None not in scored.token_logprobs[1:]


def test_skip_special_tokens_and_truncate_prompt_tokens(client, server):
    """vLLM's text options: special tokens' text is left out unless skip_special_tokens is
    false; truncate_prompt_tokens keeps the prompt's last tokens."""
    prompt = "Say something special"
    shown = client.completions.create(model="tiny", prompt=prompt, max_tokens=30)
    kept = client.completions.create(model="tiny", prompt=prompt, max_tokens=30,
                                     extra_body={"skip_special_tokens": False})
    assert (shown.choices[0].text, kept.choices[0].text) == ("Beforeafter",
                                                             "Before<|im_start|>after")
    cut = client.completions.create(model="tiny", prompt="The capital of France", max_tokens=2,
                                    extra_body={"truncate_prompt_tokens": 2})
    assert cut.usage.prompt_tokens == 2


def test_completions_plain_and_streamed(client, server):
    prompt = "The capital of France"
    resp = client.completions.create(model="tiny", prompt=prompt, max_tokens=8)
    assert resp.choices[0].finish_reason in ("stop", "length")
    assert resp.usage.prompt_tokens == len(server.tokenizer.encode(prompt, True))
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="tiny", prompt=prompt, max_tokens=8, stream=True) if c.choices)
    assert streamed == resp.choices[0].text


def test_tool_call_non_streaming(client):
    resp = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL], max_tokens=60)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"location": "Paris"}


def test_tool_call_streaming_deltas(client):
    stream = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL], max_tokens=60, stream=True)
    name, args, ids, finish, content = None, "", set(), None, ""
    for chunk in stream:
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or ():
            assert tc.index == 0
            if tc.id:
                ids.add(tc.id)
            if tc.function.name:
                name = tc.function.name
            args += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert name == "get_weather" and len(ids) == 1 and finish == "tool_calls"
    assert json.loads(args) == {"location": "Paris"}
    assert "<tool_call>" not in content


def test_tool_choice_none_returns_text(client):
    resp = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL], tool_choice="none", max_tokens=60)
    assert resp.choices[0].message.tool_calls is None


def test_models_lists_the_served_model(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny"]


def test_a_repeated_prefix_reports_cached_tokens_and_counts_hits(client, server):
    from tests.server.http import request

    system = {"role": "system", "content": "You answer questions about the alphabet. " * 8}
    first = client.chat.completions.create(
        model="tiny", max_tokens=4, messages=[system, {"role": "user", "content": "Why A?"}])
    second = client.chat.completions.create(
        model="tiny", max_tokens=4, messages=[system, {"role": "user", "content": "Why B?"}])
    stream = client.completions.create(model="tiny", max_tokens=2, stream=True,
                                       prompt=system["content"] + "Z",
                                       stream_options={"include_usage": True})
    block = server.executor.block_size
    cached = second.usage.prompt_tokens_details.cached_tokens
    shared = len(chat_prompt_ids(server, [system]))   # the system turn's tokens, at least
    # earlier tests' prompts share the template's first block at most
    assert first.usage.prompt_tokens_details.cached_tokens <= block
    assert cached % block == 0 and shared - block < cached < second.usage.prompt_tokens
    # a raw completion of the same text lacks the chat template's opening tokens
    assert list(stream)[-1].usage.prompt_tokens_details.cached_tokens <= block
    status, text = request(server.url + "/metrics")
    hits = next(l for l in text.splitlines() if l.startswith("atlas_prefix_cache_hits_total"))
    assert status == 200 and int(hits.split()[-1]) >= cached
