"""A position in source text, shared by the EBNF and regular-expression parsers."""

from __future__ import annotations

from .errors import GrammarSyntaxError


class TextCursor:
    """`text` read left to right; errors carry the offset and name the language."""

    LANGUAGE = "text"

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str) -> GrammarSyntaxError:
        return GrammarSyntaxError(f"{self.LANGUAGE}: {message}", self.text, self.pos)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""
