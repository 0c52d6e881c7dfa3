"""Grammars for tool calls in the model's own format (tool_choice "required" / a named
function / Anthropic "any" / "tool", and strict tools).

Each call's arguments follow that function's JSON schema (`json_schema`), the function
name is one of the given names, and the wrapper is the exact text the model's tool parser
(`atlas.server.tool_parsers`) reads:

* ``hermes`` (Qwen2.5/3, SmolLM):
  ``<tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>``, calls separated by a
  newline;
* ``mistral``: ``[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]``.

The grammar covers the whole assistant output after any reasoning block (the engine starts
the matcher after ``</think>``). For "auto" with strict tools, the engine starts a matcher on
the call body once the parser sees a start marker: `tool_call_grammar(..., opened=True)`.
Marker tokens must have bytes in the Vocabulary (Qwen3's ``<tool_call>`` is an ordinary added
token; a special marker needs `Vocabulary.from_tokenizer_json(literal_special=...)`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .errors import GrammarError
from .ir import Expr, Grammar, Lit, Rep, alt, seq
from .json_schema import SchemaConverter


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    parameters: Any


def tool_specs(tools: Sequence[Mapping[str, Any]]) -> list[ToolSpec]:
    """OpenAI ``{"type": "function", "function": {...}}``, flat ``{"name", "parameters"}``
    or Anthropic ``{"name", "input_schema"}`` tool definitions."""
    out = []
    for i, tool in enumerate(tools):
        body = tool.get("function", tool) if isinstance(tool, Mapping) else None
        name = body.get("name") if isinstance(body, Mapping) else None
        if not isinstance(name, str) or not name:
            raise GrammarError(f"tools[{i}]: a tool needs a non-empty name")
        schema = body.get("parameters", body.get("input_schema", {"type": "object"}))
        out.append(ToolSpec(name, schema))
    if not out:
        raise GrammarError("a tool-call grammar needs at least one tool")
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise GrammarError(f"duplicate tool names in {names}")
    return out


def _call(spec: ToolSpec, grammar: Grammar, index: int, max_whitespace: int | None) -> Expr:
    converter = SchemaConverter(spec.parameters, max_whitespace, grammar, prefix=f"tool{index}:")
    arguments = converter.value(spec.parameters, f"tools/{spec.name}")
    return seq(Lit('{"name": ' + json.dumps(spec.name, ensure_ascii=False) +
                   ', "arguments": '), arguments, Lit("}"))


def tool_call_grammar(tools: Sequence[Mapping[str, Any]], style: str = "hermes",
                      parallel: bool = True, opened: bool = False,
                      max_whitespace: int | None = None) -> Grammar:
    """One or more calls (one if not `parallel`) of the given tools in `style`; `opened`:
    the start marker was already written (auto mode), the grammar begins after it."""
    specs = tool_specs(tools)
    grammar = Grammar()
    call = alt(*(_call(spec, grammar, i, max_whitespace) for i, spec in enumerate(specs)))
    if style == "hermes":
        opener = Lit("" if opened else "<tool_call>")
        first = seq(opener, Lit("\n"), call, Lit("\n</tool_call>"))
        more = seq(Lit("\n<tool_call>\n"), call, Lit("\n</tool_call>"))
    elif style == "mistral":
        first = seq(Lit("[" if opened else "[TOOL_CALLS]["), call)
        more = seq(Lit(", "), call)
    else:
        raise GrammarError(f"no tool-call grammar for format {style!r} (hermes, mistral)")
    body = seq(first, Rep(more, 0, None)) if parallel else first
    grammar.add("root", seq(body, Lit("]")) if style == "mistral" else body)
    return grammar
