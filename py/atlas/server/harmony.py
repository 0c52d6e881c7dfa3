"""OpenAI's harmony output format (gpt-oss): messages on channels instead of tags.

A gpt-oss completion is a run of messages,

    <|start|>assistant<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>FORMAT]<|message|>TEXT

each ended by `<|end|>` (another message follows), `<|return|>` (the answer is done) or
`<|call|>` (a tool call is done). The chat template ends the prompt with `<|start|>assistant`,
so the model's first tokens are `<|channel|>...`. The recipient may also stand in the role
part (`<|start|>assistant to=functions.f<|channel|>commentary json<|message|>`, how the gpt-oss
template writes earlier calls back). Channels:

* `analysis`: the chain of thought -> reasoning (a new message's text after earlier
  reasoning starts on a new line);
* `final`: the answer -> content;
* `commentary`: a function call when addressed `to=functions.NAME` (its text is the JSON
  arguments object, usually announced by `<|constrain|>json`); without a recipient, a
  preamble meant for the user -> content.

The markers are special tokens of the o200k_harmony tokenizer, so `special_markers` asks
the detokenizer to keep them as text (every other special token is still dropped).
`<|return|>` and `<|call|>` are EOS ids, which the response stream never decodes: the end of
the stream ends the last message, and so completes a call in progress.

Tolerated: text before any header (final content: the model answered without a channel), an
unknown or missing channel (content), a missing `<|constrain|>`, arguments that are not JSON
(`dump_arguments` wraps them as {"input": text}, as for the other formats) or empty ("{}"),
a message cut off by the end of the stream. A recipient other than `functions.*` (the
built-in tools `browser.search`, `python`, ...) addresses a tool Atlas does not run: it is
returned as a tool call named as addressed, for the client to run or refuse. Without tools
in the request, a message to a recipient is text of its channel. Markers are matched in
the text: ordinary tokens that spell a marker read as that marker.
"""

from __future__ import annotations

import re

from .holdback import find_first, partial_marker_len
from .tool_parsers import OutputParser, ToolCall, ToolCallDelta, ToolParseResult, ToolSchemas
from .tool_parsers.base import dump_arguments

#: the name `--tool-call-parser` and MODEL.toml's `tool_parser` give this format
HARMONY = "harmony"

_START, _END, _MESSAGE = "<|start|>", "<|end|>", "<|message|>"
_CHANNEL, _CONSTRAIN = "<|channel|>", "<|constrain|>"
_RETURN, _CALL = "<|return|>", "<|call|>"
_MARKERS = (_START, _END, _MESSAGE, _CHANNEL, _CONSTRAIN, _RETURN, _CALL)
_MESSAGE_ENDS = (_END, _RETURN, _CALL)
#: what ends a header: its text, then a body (<|message|>), or no body at all
_HEADER_ENDS = (_MESSAGE, _START, *_MESSAGE_ENDS)
_CHANNEL_NAME = re.compile(re.escape(_CHANNEL) + r"\s*([^\s<]+)")
_RECIPIENT = re.compile(r"(?:^|\s|>)to=([^\s<]+)")
_FUNCTIONS = "functions."


class HarmonyParser(OutputParser):
    """Feed the completion's text (markers kept); receive content, reasoning and tool-call
    deltas: text as it arrives (only what may still be a marker held back), a call's name
    once its header is complete, its arguments when its message ends.

    `use_tools` off (no tools, or tool_choice none): messages to a recipient are text of
    their channel. `emit_reasoning` off (thinking disabled): analysis is parsed and dropped.
    `verbatim_answer` (a grammar constrains the output, from its first token since harmony
    has no reasoning block the engine knows): the whole text is content.
    """

    special_markers = _MARKERS
    splits_reasoning = True

    def __init__(self, schemas: ToolSchemas | None = None, max_calls: int | None = None, *,
                 use_tools: bool = True, emit_reasoning: bool = True,
                 verbatim_answer: bool = False) -> None:
        super().__init__(schemas, max_calls)
        self._use_tools = use_tools
        self._emit_reasoning = emit_reasoning
        self._verbatim = verbatim_answer
        self._pending = ""
        self._in_header = False
        self._channel: str | None = None   # None: no header (content)
        self._call: str | None = None      # the call the current message is (its name)
        self._keep_call = False            # ... within max_calls
        self._arguments = ""
        self._headerless = True            # leading whitespace is no text of the message
        self._fresh = True                 # no text of the current message emitted yet
        self._said = {"content": False, "reasoning": False}

    def feed(self, text: str) -> ToolParseResult:
        if self._verbatim:
            return ToolParseResult(content=text)
        self._pending += text
        out = ToolParseResult()
        self._drain(out, final=False)
        return out

    def flush(self) -> ToolParseResult:
        out = ToolParseResult()
        if self._verbatim:
            return out
        self._drain(out, final=True)
        if self._in_header:   # cut off in a header: a call's name may already be known
            self._open(self._pending, out)
            self._pending = ""
        self._end_message(out)
        return out

    def forced_prefix(self, name: str | None) -> str:
        head = f"{_CHANNEL}commentary to={_FUNCTIONS}"
        return head if name is None else f"{head}{name} {_CONSTRAIN}json{_MESSAGE}"

    # --- the stream machine ----------------------------------------------------------------

    def _drain(self, out: ToolParseResult, final: bool) -> None:
        while self._pending:
            if self._in_header:
                hit = find_first(self._pending, _HEADER_ENDS)
                if hit is None:
                    return   # a header is no text for the client: wait for its end
                index, marker = hit
                header, self._pending = (self._pending[:index],
                                         self._pending[index + len(marker):])
                if marker == _START:
                    continue   # a new header replaces the unfinished one
                self._in_header = False
                self._open(header, out)
                if marker != _MESSAGE:   # a message without a body
                    self._end_message(out)
                continue
            hit = find_first(self._pending, _MARKERS)
            if hit is None:
                keep = 0 if final else partial_marker_len(self._pending, _MARKERS)
                cut = len(self._pending) - keep
                self._text(self._pending[:cut], out)
                self._pending = self._pending[cut:]
                return
            index, marker = hit
            self._text(self._pending[:index], out)
            self._pending = self._pending[index + len(marker):]
            if marker in (_START, _CHANNEL):
                self._end_message(out)
                self._in_header = True
                if marker == _CHANNEL:   # the prompt's <|start|>assistant opened it
                    self._pending = marker + self._pending
            elif marker in _MESSAGE_ENDS:
                self._end_message(out)
            # a stray <|message|> or <|constrain|> in a body is structure, not text

    def _open(self, header: str, out: ToolParseResult) -> None:
        """A message's header is complete: its channel, and a call's name when addressed."""
        channel = _CHANNEL_NAME.search(header)
        recipient = _RECIPIENT.search(header)
        self._channel = channel.group(1) if channel else None
        self._headerless = False
        name = recipient.group(1).removeprefix(_FUNCTIONS) if recipient else ""
        if self._use_tools and name and name != "assistant":
            self._call, self._keep_call = name, not self._full
            if self._keep_call:
                out.calls.append(ToolCallDelta(len(self.calls), name=name))

    def _text(self, text: str, out: ToolParseResult) -> None:
        if not text:
            return
        if self._call is not None:
            self._arguments += text
            return
        if self._headerless:
            text = text.lstrip()
            if not text:
                return
            self._headerless = False
        kind = "reasoning" if self._channel == "analysis" else "content"
        if kind == "reasoning" and not self._emit_reasoning:
            return
        if self._fresh and self._said[kind]:
            text = "\n" + text   # one message's text per line
        self._fresh = False
        self._said[kind] = True
        if kind == "reasoning":
            out.reasoning += text
        else:
            out.content += text

    def _end_message(self, out: ToolParseResult) -> None:
        if self._call is not None and self._keep_call:
            arguments = self._arguments.strip()
            call = ToolCall(self._call, dump_arguments(arguments) if arguments else "{}")
            out.calls.append(ToolCallDelta(len(self.calls), arguments=call.arguments))
            self.calls.append(call)
        self._call, self._keep_call, self._arguments = None, False, ""
        self._channel = None
        self._headerless = self._fresh = True
