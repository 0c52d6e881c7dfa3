"""Separating `<think>…</think>` reasoning from the answer in a text stream.

Rules the book's bug history taught:
* template-forced thinking: a prompt that ends inside an unclosed `<think>` means the model's
  first tokens are reasoning, although it never emits the opening tag itself;
* closed empty thinking (`<think>\\n\\n</think>\\n\\n`, the template's no-think prologue) is not a
  reasoning block: whitespace-only reasoning is never emitted;
* several blocks in one answer are concatenated into one reasoning channel;
* whitespace right after `</think>` belongs to neither channel;
* a grammar-constrained answer (structured output) is content verbatim once it starts: the
  grammar may put the marker text inside a JSON string (a model can draw the `<think>` token
  there), which must not turn the rest of the answer into reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass

from .holdback import partial_marker_len

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def prompt_opens_thinking(prompt_text: str) -> bool:
    """True when the rendered prompt leaves a `<think>` open for the model to continue."""
    opened = prompt_text.rfind(THINK_OPEN)
    return opened >= 0 and prompt_text.find(THINK_CLOSE, opened) < 0


@dataclass(slots=True)
class ReasoningDelta:
    content: str = ""
    reasoning: str = ""


class ReasoningParser:
    """Stream splitter: feed text, get (content, reasoning) deltas.

    With `emit_reasoning` False (thinking disabled) reasoning is parsed and dropped so the
    client never sees it in the content channel either. With `verbatim_answer` (a grammar
    constrains the answer, which the engine starts after the first reasoning block closes,
    or at once when the output does not open with one) the markers are looked for only
    until the answer starts.
    """

    def __init__(self, *, starts_in_thinking: bool = False, emit_reasoning: bool = True,
                 verbatim_answer: bool = False) -> None:
        self._in_think = starts_in_thinking
        self._emit_reasoning = emit_reasoning
        self._verbatim_answer = verbatim_answer
        self._answer_started = False      # verbatim_answer: past the reasoning, if any
        self._pending = ""
        self._reasoning_started = False   # non-whitespace reasoning seen in this block
        self._after_close = False         # swallow whitespace right after </think>

    def feed(self, text: str) -> ReasoningDelta:
        self._pending += text
        out = ReasoningDelta()
        while self._pending:
            if self._answer_started:
                self._take(self._pending, out)
                self._pending = ""
                break
            marker = THINK_CLOSE if self._in_think else THINK_OPEN
            index = self._pending.find(marker)
            if index > 0 and not self._in_think and self._verbatim_answer:
                self._answer_started = True  # the answer's text comes before the marker
                continue
            if index >= 0:
                self._take(self._pending[:index], out)
                self._pending = self._pending[index + len(marker):]
                self._in_think = not self._in_think
                self._reasoning_started = False
                self._after_close = not self._in_think
                self._answer_started = self._verbatim_answer and not self._in_think
                continue
            keep = partial_marker_len(self._pending, (marker,))
            cut = len(self._pending) - keep
            self._take(self._pending[:cut], out)
            self._pending = self._pending[cut:]
            if cut and not self._in_think and self._verbatim_answer:
                self._answer_started = True  # the answer's first text: no marker after it
                continue
            break
        return out

    def flush(self) -> ReasoningDelta:
        out = ReasoningDelta()
        self._take(self._pending, out)
        self._pending = ""
        return out

    def _take(self, text: str, out: ReasoningDelta) -> None:
        if not text:
            return
        if self._in_think:
            if not self._reasoning_started:
                text = text.lstrip()
                if not text:
                    return
                self._reasoning_started = True
            if self._emit_reasoning:
                out.reasoning += text
            return
        if self._after_close:
            text = text.lstrip()
            if not text:
                return
            self._after_close = False
        out.content += text
