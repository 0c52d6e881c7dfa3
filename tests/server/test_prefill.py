"""A final assistant message continued, not closed: Anthropic's prefill (a conversation
ending in an assistant turn with text) and vLLM's `continue_final_message` on chat
completions and /tokenize. The prompt must end with that text, without the template's end
of turn and without a new generation prompt. Also the token sequences a `bad_words` entry
bans."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.server.http import request

QUESTION = {"role": "user", "content": "What is the capital of France?"}
PREFILL = "The capital of"


def open_prompt_ids(server, messages):
    """The conversation rendered without a generation prompt and cut right after the final
    message's text, encoded: what continuing it must feed the model."""
    text = server.tokenizer.chat_template(False).render(messages, add_generation_prompt=False)
    end = text.rindex(messages[-1]["content"]) + len(messages[-1]["content"])
    assert text[end:].startswith("<|im_end|>")   # what continuing drops
    return server.tokenizer.encode(text[:end])


def test_tokenize_continues_the_final_message(server):
    messages = [QUESTION, {"role": "assistant", "content": PREFILL}]
    status, body = request(server.url + "/tokenize", {"messages": messages,
                                                      "continue_final_message": True})
    assert status == 200 and body["tokens"] == open_prompt_ids(server, messages)
    text = server.tokenizer.decode(body["tokens"], skip_special_tokens=False)
    assert text.endswith("<|im_start|>assistant\n" + PREFILL)
    status, body = request(server.url + "/tokenize", {"messages": messages})
    closed = server.tokenizer.decode(body["tokens"], skip_special_tokens=False)
    assert closed.endswith(PREFILL + "<|im_end|>\n<|im_start|>assistant\n")


def test_anthropic_prefill_is_continued(server):
    client = anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)
    messages = [QUESTION, {"role": "assistant", "content": PREFILL}]
    for stream in (False, True):
        kwargs = dict(model="tiny", max_tokens=64, messages=messages)
        if stream:
            with client.messages.stream(**kwargs) as s:
                msg = s.get_final_message()
        else:
            msg = client.messages.create(**kwargs)
        assert msg.usage.input_tokens == len(open_prompt_ids(server, messages))
        assert msg.content[0].text and msg.stop_reason == "end_turn"
    count = client.messages.count_tokens(model="tiny", messages=messages)
    assert count.input_tokens == len(open_prompt_ids(server, messages))
    with pytest.raises(anthropic.BadRequestError, match="trailing whitespace"):
        client.messages.create(model="tiny", max_tokens=8, messages=[
            QUESTION, {"role": "assistant", "content": PREFILL + " "}])


def test_openai_continue_final_message(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    messages = [QUESTION, {"role": "assistant", "content": PREFILL}]
    resp = client.chat.completions.create(model="tiny", messages=messages, max_tokens=32,
                                          extra_body={"continue_final_message": True})
    assert resp.usage.prompt_tokens == len(open_prompt_ids(server, messages))
    # without it the final message is a closed turn and a new one is opened
    closed = client.chat.completions.create(model="tiny", messages=messages, max_tokens=32)
    assert closed.usage.prompt_tokens == len(open_prompt_ids(server, messages)) + len(
        server.tokenizer.encode("<|im_end|>\n<|im_start|>assistant\n"))
    with pytest.raises(openai.BadRequestError, match="continue_final_message"):
        client.chat.completions.create(model="tiny", messages=messages, max_tokens=8,
                                       extra_body={"continue_final_message": True,
                                                   "add_generation_prompt": True})
    with pytest.raises(openai.BadRequestError, match="no text to continue"):
        client.chat.completions.create(model="tiny", max_tokens=8, messages=[
            QUESTION, {"role": "assistant", "content": ""}],
            extra_body={"continue_final_message": True})


def test_bad_word_token_sequences_spell_the_word(server):
    """Each sequence a bad word bans decodes to the word, bare or after one space (vLLM's
    two spellings: the word alone, and mid-text when that is as many tokens)."""
    from atlas.server.generation import bad_word_ids
    tok = server.tokenizer
    for word in ("Paris", " weather", "capital of"):
        seqs = bad_word_ids(tok, word)
        assert seqs[0] == tuple(tok.encode(word.lstrip()))
        assert {tok.decode(list(s)) for s in seqs} <= {word.lstrip(), " " + word.lstrip()}
        assert len(set(seqs)) == len(seqs) and all(len(s) == len(seqs[0]) for s in seqs)
