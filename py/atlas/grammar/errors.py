"""Errors of the grammar engine. Each says what to fix: the server maps them to 400s
(bad schema or grammar) and to a failed request (a dead end while decoding)."""

from __future__ import annotations


class GrammarError(ValueError):
    """A grammar, regular expression or JSON schema that cannot be compiled."""


class GrammarSyntaxError(GrammarError):
    """Malformed EBNF or regular-expression text; the message names the offset."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        snippet = text[max(0, offset - 20):offset + 20]
        super().__init__(f"{message} at offset {offset} (near {snippet!r})")
        self.offset = offset


class UnsupportedSchemaError(GrammarError):
    """A JSON schema keyword or shape the compiler cannot enforce (never silently ignored)."""


class GrammarDeadEndError(RuntimeError):
    """No token of the vocabulary can continue the output (nor may it end here).

    Raised instead of returning an all-zero mask, which would make the sampler pick an
    arbitrary token or loop forever.
    """
