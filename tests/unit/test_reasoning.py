"""<think> splitting: model-opened, template-forced, closed-empty and multiple blocks."""

from __future__ import annotations

import pytest

from atlas.server.reasoning import ReasoningParser, prompt_opens_thinking


def split(text, step, **kw):
    parser = ReasoningParser(**kw)
    content = reasoning = ""
    for i in range(0, len(text), step):
        d = parser.feed(text[i:i + step])
        content, reasoning = content + d.content, reasoning + d.reasoning
    d = parser.flush()
    return content + d.content, reasoning + d.reasoning


STEPS = [1, 2, 5, 1000]


@pytest.mark.parametrize("step", STEPS)
def test_model_opened_block(step):
    assert split("<think>\nLet me see.\n</think>\n\nThe answer is 42.", step) == (
        "The answer is 42.", "Let me see.\n")


@pytest.mark.parametrize("step", STEPS)
def test_template_forced_open_block(step):
    assert split("First, add.\n</think>\n\n4", step, starts_in_thinking=True) == (
        "4", "First, add.\n")


@pytest.mark.parametrize("step", STEPS)
def test_closed_empty_block_is_not_reasoning(step):
    assert split("<think>\n\n</think>\n\nHello!", step) == ("Hello!", "")


@pytest.mark.parametrize("step", STEPS)
def test_multiple_blocks_are_concatenated(step):
    text = "<think>one</think>A<think>two</think>B"
    assert split(text, step) == ("AB", "onetwo")


@pytest.mark.parametrize("step", STEPS)
def test_disabled_thinking_strips_reasoning(step):
    assert split("<think>secret</think>visible", step, emit_reasoning=False) == ("visible", "")


@pytest.mark.parametrize("step", STEPS)
def test_lookalike_tags_are_content(step):
    assert split("a <thin b </think", step) == ("a <thin b </think", "")


@pytest.mark.parametrize("step", STEPS)
def test_a_constrained_answer_keeps_marker_text_as_content(step):
    """Structured output: a JSON string may hold the marker text (a random model drew the
    `<think>` token there, and the rest of the answer vanished into reasoning: CI, session
    10); once the constrained answer starts, nothing in it is a marker."""
    answer = '{"location": "Paris<think> rain</think>", "unit": "celsius"}'
    assert split(answer, step, verbatim_answer=True) == (answer, "")
    assert split(answer, step, verbatim_answer=True, emit_reasoning=False) == (answer, "")
    # a reasoning block before the answer (thinking on) is still split off
    assert split("<think>plan</think>\n" + answer, step, verbatim_answer=True) == (
        answer, "plan")
    assert split("plan</think>" + answer, step, verbatim_answer=True,
                 starts_in_thinking=True) == (answer, "plan")
    # without a grammar the markers still switch channels anywhere
    assert split(answer, step) == ('{"location": "Paris", "unit": "celsius"}', "rain")


def test_prompt_opens_thinking_only_when_unclosed():
    assert prompt_opens_thinking("<|im_start|>assistant\n<think>\n")
    assert not prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not prompt_opens_thinking("<|im_start|>assistant\n")
