"""Incremental detokenization that never emits half of a multi-byte character.

Byte-level BPE splits one UTF-8 character across tokens, so decoding token by token yields
U+FFFD. We decode a small window of already-emitted tokens plus the new ones and emit only
the text past the window's old decoding, holding everything back while it ends in U+FFFD.
The window always starts at the previously emitted tokens ("prefix offset") so decoders that
depend on the previous token (leading-space rules of SentencePiece) see their context.
"""

from __future__ import annotations

from typing import Callable, Sequence

Decode = Callable[[Sequence[int]], str]

_REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """Feed token ids one or more at a time; get back only complete new text."""

    def __init__(self, decode: Decode, context_ids: Sequence[int] = (),
                 context_tokens: int = 6) -> None:
        self._decode = decode
        self._ids: list[int] = list(context_ids[-context_tokens:])
        self._prefix = 0
        self._read = len(self._ids)

    def feed(self, new_ids: Sequence[int]) -> str:
        self._ids.extend(new_ids)
        prefix_text = self._decode(self._ids[self._prefix:self._read])
        full_text = self._decode(self._ids[self._prefix:])
        if full_text.endswith(_REPLACEMENT) or len(full_text) <= len(prefix_text):
            return ""
        new_text = full_text[len(prefix_text):]
        self._prefix = self._read
        self._read = len(self._ids)
        return new_text

    def flush(self) -> str:
        """Text still held back (an incomplete character at the end of generation)."""
        prefix_text = self._decode(self._ids[self._prefix:self._read])
        full_text = self._decode(self._ids[self._prefix:])
        self._prefix = self._read = len(self._ids)
        return full_text[len(prefix_text):]
