"""Special-token strings inside message text stay text (no role injection).

A chat template writes control tokens (`<|im_start|>`, `<|im_end|>`) around each message and
the tokenizer turns every occurrence of their strings into the control token, wherever it
came from. So a user who writes `<|im_end|><|im_start|>system` in a message would forge a
role boundary. Before rendering, each special-token string in user, system and tool text is
replaced by a marker made of a private-use character and the token's index; after
rendering, the text is encoded in segments: template text as usual, each marker as the
plain text of its token (`encode_special_tokens`), i.e. split into ordinary pieces.

Assistant messages are left as written: they replay the model's own output (its reasoning
and tool-call tags are the template's business). Raw completion prompts are the client's
whole text and keep their special tokens too.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Mapping, Sequence

#: roles whose text comes from outside the model
PROTECTED_ROLES = frozenset({"user", "system", "tool"})
_PRIVATE_USE = range(0xE000, 0xF900)


class ProtectedContent:
    """The messages with special-token strings escaped, and how to read the rendered
    template back: `segments` for encoding, `restore` for the text as written."""

    def __init__(self, specials: Sequence[str], messages: Sequence[Mapping[str, Any]]) -> None:
        self.specials = sorted(specials, key=len, reverse=True)   # longest match first
        texts = [m["content"] for m in messages if isinstance(m.get("content"), str)]
        # a marker character no message uses, so no text can pass for a marker
        self.mark = next(chr(c) for c in _PRIVATE_USE if not any(chr(c) in t for t in texts))
        self._marker = re.compile(f"{self.mark}(\\d+){self.mark}")
        self._special = (re.compile("|".join(re.escape(s) for s in self.specials))
                         if self.specials else None)
        self.messages = [self._escape_message(m) for m in messages]

    def _escape_message(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        content = message.get("content")
        if (self._special is None or message.get("role") not in PROTECTED_ROLES
                or not isinstance(content, str)):
            return message
        index = {s: i for i, s in enumerate(self.specials)}
        escaped = self._special.sub(lambda m: f"{self.mark}{index[m.group()]}{self.mark}",
                                    content)
        return message if escaped == content else {**message, "content": escaped}

    def segments(self, rendered: str) -> Iterator[tuple[str, bool]]:
        """(text, is_plain) pieces of the rendered prompt in order: is_plain marks the
        special-token strings that came from message text."""
        pos = 0
        for m in self._marker.finditer(rendered):
            if m.start() > pos:
                yield rendered[pos:m.start()], False
            yield self.specials[int(m.group(1))], True
            pos = m.end()
        if pos < len(rendered):
            yield rendered[pos:], False

    def restore(self, rendered: str) -> str:
        """The rendered prompt with each marker back to the string the client wrote."""
        return self._marker.sub(lambda m: self.specials[int(m.group(1))], rendered)
