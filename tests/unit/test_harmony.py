"""gpt-oss's harmony format through the real response path: a BPE tokenizer with the harmony
control tokens as special tokens, the detokenizer keeping exactly those (`TextTokenizer.decoder`),
`<|return|>`/`<|call|>` hidden as stop ids, and `HarmonyParser` splitting reasoning, content
and tool calls; fed one token at a time and in larger chunks, with the same result."""

from __future__ import annotations

import json

import pytest

from atlas.server.generation import output_parser_class
from atlas.server.harmony import HARMONY, HarmonyParser
from atlas.server.protocol_openai import parse_chat_request
from atlas.server.response_stream import ResponseStream
from atlas.server.tokenizer import TextTokenizer
from atlas.server.tool_parsers import parser_class
from tests.server.fakes import build_tiny_tokenizer
from tests.server.harmony_model import HARMONY_EOS, build_harmony_tokenizer

STEPS = [1, 2, 5, 10_000]
CALL = ('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
        '{"location": "Paris"}')


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    raw = build_harmony_tokenizer()
    return TextTokenizer(raw.to_str(), {"eos_token": "<|return|>"},
                         {"eos_token_id": [raw.token_to_id(t) for t in HARMONY_EOS]})


class Streamed:
    """What a client receives: the joined text channels, the calls assembled from their
    deltas, and the push at which each call's name and arguments first arrived."""

    def __init__(self) -> None:
        self.content = self.reasoning = ""
        self.calls: dict[int, dict] = {}
        self.pushes = 0

    def take(self, delta) -> None:
        self.content += delta.content
        self.reasoning += delta.reasoning
        for d in delta.tool_calls:
            call = self.calls.setdefault(d.index, {"name": None, "arguments": ""})
            if d.name is not None:
                assert call["name"] is None, "name streamed twice"
                call.update(name=d.name, named_at=self.pushes)
            else:
                assert call["name"] is not None, "arguments before the name"
                call["arguments"] += d.arguments
                call["complete_at"] = self.pushes
        self.pushes += 1

    @property
    def result(self) -> tuple[str, str, list[tuple[str, str]]]:
        return (self.reasoning, self.content,
                [(c["name"], c["arguments"]) for _, c in sorted(self.calls.items())])


def stream(tok: TextTokenizer, text: str, step: int, *, prompt: str = "<|start|>assistant",
           forced_prefix: str = "", **options) -> Streamed:
    parser = HarmonyParser(**options)
    rs = ResponseStream(tok.decoder(keep=parser.special_markers),
                        context_ids=tok.encode(prompt), hidden_ids=tok.eos_token_ids,
                        tools=parser, forced_prefix=forced_prefix)
    ids = tok.encode(text)
    got = Streamed()
    for i in range(0, len(ids), step):
        got.take(rs.push(ids[i:i + step]))
    got.take(rs.finish())
    assert [(c.name, c.arguments) for c in rs.tool_calls] == got.result[2]
    return got


def args(**kw) -> str:
    return json.dumps(kw)


@pytest.mark.parametrize("step", STEPS)
def test_analysis_then_final(tok, step):
    text = ('<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple.<|end|>'
            '<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>')
    assert stream(tok, text, step).result == ('User asks: "What is 2 + 2?" Simple.',
                                              "2 + 2 = 4.", [])


def test_one_token_at_a_time_equals_one_chunk_and_text_streams_early(tok):
    text = ('<|channel|>analysis<|message|>The quick brown fox.<|end|>'
            '<|start|>assistant<|channel|>final<|message|>Hello! How can I help you today?')
    one, whole = stream(tok, text, 1), stream(tok, text, 10_000)
    assert one.result == whole.result
    # the answer's words arrive while it is generated, not at the end
    ids = tok.encode(text)
    parser = HarmonyParser()
    rs = ResponseStream(tok.decoder(keep=parser.special_markers), tools=parser)
    content = [rs.push([t]).content for t in ids]
    assert "".join(content).startswith("Hello!") and content[-1] == "?"


@pytest.mark.parametrize("step", STEPS)
def test_analysis_then_tool_call_names_before_arguments(tok, step):
    text = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
            + CALL + "<|call|>")
    got = stream(tok, text, step)
    assert got.result == ("Need the weather.", "", [("get_weather", args(location="Paris"))])
    (call,) = got.calls.values()
    if step == 1:   # the name is out as soon as its header is, the arguments at the end
        assert call["named_at"] < call["complete_at"] == got.pushes - 1


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("between", ["<|call|>", "<|end|>"])
def test_two_tool_calls_in_one_completion(tok, step, between):
    text = (CALL + between + "<|start|>assistant<|channel|>commentary to=functions.get_time"
            "<|constrain|>json<|message|>{}<|call|>")
    assert stream(tok, text, step).result == (
        "", "", [("get_weather", args(location="Paris")), ("get_time", "{}")])


@pytest.mark.parametrize("step", STEPS)
def test_commentary_preamble_is_content(tok, step):
    text = ("<|channel|>analysis<|message|>Plan.<|end|><|start|>assistant<|channel|>commentary"
            "<|message|>Let me check the weather.<|end|><|start|>assistant" + CALL)
    assert stream(tok, text, step).result == (
        "Plan.", "Let me check the weather.", [("get_weather", args(location="Paris"))])


@pytest.mark.parametrize("step", STEPS)
def test_a_stream_without_a_header_is_final_content(tok, step):
    assert stream(tok, "The capital of France is Paris.<|return|>", step).result == (
        "", "The capital of France is Paris.", [])


@pytest.mark.parametrize("step", STEPS)
def test_unknown_or_missing_channel_is_content(tok, step):
    text = ("<|channel|>summary<|message|>Paris.<|end|><|start|>assistant<|message|>Berlin."
            "<|end|>")
    assert stream(tok, text, step).result == ("", "Paris.\nBerlin.", [])


@pytest.mark.parametrize("step", STEPS)
def test_reasoning_messages_are_one_per_line(tok, step):
    text = ("<|channel|>analysis<|message|>First.<|end|><|start|>assistant<|channel|>analysis"
            "<|message|>Second.<|end|><|start|>assistant<|channel|>final<|message|>Done.")
    assert stream(tok, text, step).result == ("First.\nSecond.", "Done.", [])


@pytest.mark.parametrize("step", STEPS)
def test_malformed_and_empty_arguments(tok, step):
    text = ("<|channel|>commentary to=functions.f<|message|>{location: Paris<|end|>"
            "<|start|>assistant<|channel|>commentary to=functions.g <|constrain|>json<|message|>")
    assert stream(tok, text, step).result == (
        "", "", [("f", json.dumps({"input": "{location: Paris"})), ("g", "{}")])


@pytest.mark.parametrize("step", STEPS)
def test_recipient_in_the_role_and_no_constrain_token(tok, step):
    # how the gpt-oss template writes an earlier call back into the prompt
    text = ('<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>'
            '{"location": "Paris"}<|call|>')
    assert stream(tok, text, step).result == ("", "", [("get_weather",
                                                        args(location="Paris"))])


@pytest.mark.parametrize("step", STEPS)
def test_a_built_in_tool_is_a_call_named_as_addressed(tok, step):
    text = ('<|channel|>analysis<|message|>Search it.<|end|><|start|>assistant<|channel|>'
            'analysis to=browser.search <|constrain|>json<|message|>{"query": "Paris"}<|call|>')
    assert stream(tok, text, step).result == ("Search it.", "",
                                              [("browser.search", args(query="Paris"))])


@pytest.mark.parametrize("step", STEPS)
def test_single_call_limit_drops_later_calls_without_leaking_text(tok, step):
    text = CALL + "<|end|><|start|>assistant" + CALL.replace("Paris", "Berlin") + "<|call|>"
    assert stream(tok, text, step, max_calls=1).result == (
        "", "", [("get_weather", args(location="Paris"))])


@pytest.mark.parametrize("step", STEPS)
def test_without_tools_a_call_is_text_of_its_channel(tok, step):
    text = ("<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant" + CALL + "<|call|>")
    assert stream(tok, text, step, use_tools=False).result == (
        "Hmm.", '{"location": "Paris"}', [])


@pytest.mark.parametrize("step", STEPS)
def test_disabled_thinking_drops_the_analysis(tok, step):
    text = ("<|channel|>analysis<|message|>Secret.<|end|><|start|>assistant<|channel|>final"
            "<|message|>Paris.")
    assert stream(tok, text, step, emit_reasoning=False).result == ("", "Paris.", [])


def test_a_header_cut_off_by_the_end_still_completes_a_named_call(tok):
    assert stream(tok, "<|channel|>commentary to=functions.get_time <|constrain|>",
                  1).result == ("", "", [("get_time", "{}")])
    assert stream(tok, "<|channel|>final", 1).result == ("", "", [])


def test_a_grammar_constrained_answer_is_content_verbatim(tok):
    text = '{"a": "<|channel|>"}'
    parser = HarmonyParser(verbatim_answer=True)
    assert parser.feed(text).content == text and not parser.flush().content


@pytest.mark.parametrize("name", [None, "get_weather"])
def test_forced_prefix_opens_a_call_the_parser_completes(tok, name):
    prefix = HarmonyParser().forced_prefix(name)
    rest = ("" if name else "get_weather <|constrain|>json<|message|>") + '{"location": "Paris"}'
    got = stream(tok, rest, 1, prompt="<|start|>assistant" + prefix, forced_prefix=prefix)
    assert got.result == ("", "", [("get_weather", args(location="Paris"))])


def test_text_that_only_looks_like_a_marker_is_held_then_released(tok):
    assert stream(tok, "<|channel|>final<|message|>a <| b <|end", 1).result == (
        "", "a <| b <|end", [])


# --- the special-token keep mechanism ---------------------------------------------------------

def test_decoder_keeps_exactly_the_asked_special_tokens(tok):
    ids = tok.encode("<|im_start|><|channel|>final<|message|>Hi<|im_end|><|return|>")
    assert tok.decode(ids) == "finalHi"
    keep = tok.decoder(keep=HarmonyParser.special_markers)
    assert keep(ids) == "<|channel|>final<|message|>Hi<|return|>"   # the ChatML ones dropped
    assert tok.decoder(skip_special_tokens=False)(ids) == tok.decode(ids,
                                                                     skip_special_tokens=False)


def test_decoder_without_markers_is_exactly_decode(tok):
    assert tok.decoder() == tok.decode
    assert tok.decoder(keep=("no such token",)) == tok.decode
    assert tok.decoder(keep=("Paris",)) == tok.decode   # an ordinary token: nothing to keep


def test_tool_formats_keep_only_their_control_tokens():
    """Mistral's [TOOL_CALLS] / [ARGS] are control (special) tokens in its tokenizers; the
    other tool formats' markers are ordinary added tokens, so they ask to keep none."""
    from atlas.server.tool_parsers import PARSERS
    for name in PARSERS:
        want = ("[TOOL_CALLS]", "[ARGS]") if name == "mistral" else ()
        assert parser_class(name).special_markers == want
        assert not parser_class(name).splits_reasoning


def test_mistral_calls_survive_its_special_marker_tokens():
    raw = build_tiny_tokenizer()
    raw.add_special_tokens(["[TOOL_CALLS]", "[ARGS]", "</s>"])
    tok = TextTokenizer(raw.to_str(), {"eos_token": "</s>"}, {})
    parser = parser_class("mistral")({"get_weather": {}})
    ids = tok.encode('Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}</s>')
    assert tok.decode(ids) == 'Sure.get_weather{"city": "Paris"}'   # skipped by default
    rs = ResponseStream(tok.decoder(keep=parser.special_markers), tools=parser,
                        hidden_ids=tok.eos_token_ids)
    got = Streamed()
    got.take(rs.push(ids))
    got.take(rs.finish())
    assert got.result == ("", "Sure.", [("get_weather", '{"city": "Paris"}')])


# --- selection and the request's reasoning effort ------------------------------------------

def test_harmony_is_selected_by_its_name():
    assert output_parser_class(HARMONY) is HarmonyParser
    assert output_parser_class("hermes") is parser_class("hermes")
    assert HarmonyParser.splits_reasoning


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
def test_reasoning_effort_reaches_the_template(effort):
    spec = parse_chat_request({**CHAT, "reasoning_effort": effort})
    assert spec.template_kwargs == {"reasoning_effort": effort} and spec.enable_thinking


def test_template_kwargs_effort_wins_and_none_turns_thinking_off():
    spec = parse_chat_request({**CHAT, "reasoning_effort": "low",
                               "chat_template_kwargs": {"reasoning_effort": "high"}})
    assert spec.template_kwargs == {"reasoning_effort": "high"}
    off = parse_chat_request({**CHAT, "reasoning_effort": "none"})
    assert off.template_kwargs == {} and off.enable_thinking is False


def test_an_unknown_reasoning_effort_is_a_400():
    from atlas.core.sampling import SamplingParams
    from atlas.server.errors import ApiError
    from atlas.server.protocol_responses import parse_responses_request
    with pytest.raises(ApiError) as err:
        parse_chat_request({**CHAT, "reasoning_effort": "extreme"})
    assert (err.value.status, err.value.param) == (400, "reasoning_effort")
    spec = parse_responses_request({"model": "m", "input": "hi",
                                    "reasoning": {"effort": "high"}}, SamplingParams(), None).spec
    assert spec.template_kwargs == {"reasoning_effort": "high"} and spec.enable_thinking


def test_earlier_reasoning_reaches_templates_by_either_name():
    """gpt-oss's template replays an assistant turn's chain of thought from `thinking`,
    Qwen3's from `reasoning_content`: a history message's reasoning is under both."""
    from atlas.server.chat_template import ChatTemplate
    spec = parse_chat_request({"model": "m", "messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning": "add them"},
        {"role": "user", "content": "and 3+3?"}]})
    assert spec.messages[1]["thinking"] == spec.messages[1]["reasoning_content"] == "add them"
    template = ChatTemplate("{% for m in messages %}[{{ m.thinking or '' }}]{% endfor %}")
    assert template.render(spec.messages) == "[][add them][]"
