"""What a validated request asks for, independent of which API it came through.

The OpenAI and Anthropic protocol modules both produce a `GenerationSpec`; everything after
(templating, tokenizing, scheduling, parsing the output) is shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.sampling import SamplingParams


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """auto | none | required, or `name` for one named function."""

    mode: str = "auto"
    name: str | None = None

    @property
    def forces_call(self) -> bool:
        return self.mode in ("required", "named")


@dataclass(slots=True)
class GenerationSpec:
    model: str
    sampling: SamplingParams
    max_tokens: int | None
    messages: list[dict[str, Any]] | None = None     # chat (OpenAI message shape)
    prompt: str | list[int] | None = None            # raw completion
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None        # OpenAI {"type": "function", ...}
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    parallel_tool_calls: bool = True
    stream: bool = False
    include_usage: bool = False
    enable_thinking: bool | None = None
    thinking_budget: int | None = None
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    add_generation_prompt: bool = True
