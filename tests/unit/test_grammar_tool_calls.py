"""Tool-call grammars: every random walk over the real SmolLM2 vocabulary is text the
server's own tool parser reads as calls of the given tools, with arguments the tool's
schema accepts."""

from __future__ import annotations

import json

import jsonschema
import pytest

from atlas.grammar import GrammarError
from atlas.grammar.tool_calls import tool_call_grammar
from atlas.server.tool_parsers import parser_class
from tests.unit.grammar_support import accepts, load_schema, random_walk, smollm2_compiler

TOOLS = [
    {"type": "function", "function": {"name": "get_weather",
                                      "parameters": load_schema("weather_call")}},
    {"type": "function", "function": {"name": "send_email",
                                      "parameters": load_schema("send_email")}},
    {"name": "run_shell", "input_schema": load_schema("tool_run_shell")},      # Anthropic
]
SCHEMAS = {"get_weather": load_schema("weather_call"), "send_email": load_schema("send_email"),
           "run_shell": load_schema("tool_run_shell")}


def _compile(style: str, parallel: bool, opened: bool = False, tools=TOOLS):
    grammar = tool_call_grammar(tools, style, parallel=parallel, opened=opened)
    key = json.dumps([style, parallel, opened, tools])
    return smollm2_compiler().compile_grammar(grammar, key)


@pytest.mark.parametrize("style", ["hermes", "mistral"])
@pytest.mark.parametrize("parallel", [True, False])
def test_walks_parse_as_valid_calls(style: str, parallel: bool) -> None:
    grammar = _compile(style, parallel)
    for seed in range(6):
        text = random_walk(grammar, seed).decode("utf-8")
        parser = parser_class(style)(SCHEMAS)
        result = parser.feed(text)
        result.extend(parser.flush())
        assert result.content.strip() == "", text
        assert parser.calls, text
        if not parallel:
            assert len(parser.calls) == 1
        for call in parser.calls:
            jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])


def test_named_tool_and_exact_wrapper() -> None:
    grammar = _compile("hermes", False, tools=TOOLS[:1])
    good = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Oslo", ' \
           '"unit": "celsius"}}\n</tool_call>'
    assert accepts(grammar, good)
    assert not accepts(grammar, good.replace("get_weather", "send_email"))
    assert not accepts(grammar, "Sure! " + good)                  # no free text first
    assert not accepts(grammar, good + "\n" + good)                # one call only
    parallel = _compile("hermes", True)
    assert accepts(parallel, good + "\n" + good)
    opened = _compile("hermes", True, opened=True)
    assert accepts(opened, good.removeprefix("<tool_call>"))


def test_bad_tool_lists_are_errors() -> None:
    with pytest.raises(GrammarError, match="at least one tool"):
        tool_call_grammar([])
    with pytest.raises(GrammarError, match="duplicate"):
        tool_call_grammar([TOOLS[0], TOOLS[0]])
    with pytest.raises(GrammarError, match="needs a non-empty name"):
        tool_call_grammar([{"type": "function", "function": {}}])
    with pytest.raises(GrammarError, match="no tool-call grammar"):
        tool_call_grammar(TOOLS, "qwen3_coder")
