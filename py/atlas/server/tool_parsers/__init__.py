"""Tool-call parsers by wire format; `--tool-call-parser` and MODEL.toml name them (and
`harmony`, gpt-oss's channel format, which also splits the reasoning: server/harmony.py)."""

from __future__ import annotations

from .base import (OutputParser, ToolCall, ToolCallDelta, ToolParser, ToolParseResult,
                   ToolSchemas)
from .glm45 import Glm45ToolParser
from .hermes import HermesToolParser
from .llama3_json import Llama3JsonToolParser
from .minimax_m2 import MiniMaxM2ToolParser
from .mistral import MistralToolParser
from .qwen3_coder import Qwen3CoderToolParser

PARSERS: dict[str, type[ToolParser]] = {
    "hermes": HermesToolParser,
    "qwen3_coder": Qwen3CoderToolParser,
    "mistral": MistralToolParser,
    "llama3_json": Llama3JsonToolParser,
    "minimax_m2": MiniMaxM2ToolParser,
    "glm45": Glm45ToolParser,
}


def parser_class(name: str) -> type[ToolParser]:
    """The parser registered under `name`; ValueError lists the known ones."""
    try:
        return PARSERS[name]
    except KeyError:
        known = ", ".join(PARSERS)
        raise ValueError(f"unknown tool-call parser {name!r}; known: {known}") from None


__all__ = ["OutputParser", "PARSERS", "ToolCall", "ToolCallDelta", "ToolParseResult",
           "ToolParser", "ToolSchemas", "parser_class"]
