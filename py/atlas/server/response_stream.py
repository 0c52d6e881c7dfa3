"""From sampled token ids to what the client sees: text, reasoning and tool-call deltas.

One pipeline per response, in this order: incremental detokenization (whole characters
only) -> stop strings (cut, never leak a partial match) -> reasoning split -> tool-call
parsing of the answer channel. Each stage holds back only what it must. A format that
carries its own reasoning channel (harmony) is the last stage alone: it splits the reasoning
too, and its markers are special tokens the detokenizer keeps for it
(`OutputParser.special_markers`, `TextTokenizer.decoder`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Sequence

from ..model.batch import TokenLogprobs
from .detokenize import Decode, IncrementalDetokenizer
from .reasoning import ReasoningParser
from .stop_strings import StopStringMatcher
from .tool_parsers import OutputParser, ToolCall, ToolCallDelta


@dataclass(slots=True)
class StreamDelta:
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    #: the logprobs of the tokens this delta's step produced (when the request asked)
    logprobs: list[TokenLogprobs] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.reasoning or self.tool_calls or self.logprobs)

    def extend(self, other: "StreamDelta") -> None:
        self.content += other.content
        self.reasoning += other.reasoning
        self.tool_calls.extend(other.tool_calls)
        self.logprobs.extend(other.logprobs)


class ResponseStream:
    def __init__(self, decode: Decode, *, context_ids: Sequence[int] = (),
                 stops: Sequence[str] = (), hidden_ids: Collection[int] = (),
                 reasoning: ReasoningParser | None = None, tools: OutputParser | None = None,
                 forced_prefix: str = "", min_tokens: int = 0,
                 keep_stop: bool = False) -> None:
        """`hidden_ids` (stop token ids) are never decoded; `forced_prefix` is assistant
        text the prompt already committed to (a forced tool-call opening); stop strings are
        looked for in the text of the tokens after the first `min_tokens`, and a matched one
        is part of the text with `keep_stop`."""
        self._detok = IncrementalDetokenizer(decode, context_ids)
        self._stops = StopStringMatcher(stops, keep_stop)
        self._hidden = frozenset(hidden_ids)
        self._reasoning = reasoning
        self._tools = tools
        self._prefix = forced_prefix
        self._unstoppable = min_tokens  # tokens still to pass before stop strings apply

    @property
    def matched_stop(self) -> str | None:
        return self._stops.matched

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self._tools.calls if self._tools is not None else []

    def push(self, token_ids: Sequence[int]) -> StreamDelta:
        early, late = token_ids[:self._unstoppable], token_ids[self._unstoppable:]
        self._unstoppable -= len(early)
        text = self._decode(early) + self._stops.feed(self._decode(late))
        return self._route(text, final=False)

    def _decode(self, token_ids: Sequence[int]) -> str:
        visible = [t for t in token_ids if t not in self._hidden]
        return self._detok.feed(visible) if visible else ""

    def finish(self) -> StreamDelta:
        """End of generation: flush every stage's held-back text."""
        text = "" if self._stops.matched is not None else self._detok.flush()
        out = self._route(self._stops.feed(text) + self._stops.flush(), final=True)
        return out

    def _route(self, text: str, final: bool) -> StreamDelta:
        out = StreamDelta()
        if self._reasoning is not None:
            split = self._reasoning.feed(text)
            if final:
                tail = self._reasoning.flush()
                split.content += tail.content
                split.reasoning += tail.reasoning
            out.reasoning, answer = split.reasoning, split.content
        else:
            answer = text
        if self._tools is None:
            out.content = answer
            return out
        if self._prefix:
            answer, self._prefix = self._prefix + answer, ""
        parsed = self._tools.feed(answer)
        if final:
            parsed.extend(self._tools.flush())
        out.content, out.tool_calls = parsed.content, parsed.calls
        out.reasoning += parsed.reasoning
        return out
