"""EBNF (GBNF-like) text -> IR Grammar.

    root   ::= "{" ws pair ("," ws pair)* "}"      # comments run to the end of a line
    pair   ::= name ":" ws [0-9]+
    name   ::= "\\"" [a-z_]{1,16} "\\""
    ws     ::= [ \\t\\n]?

Rules are ``name ::= alternatives``; a rule runs until the next ``name ::=``. Items:
"literals" (escapes ``\\n \\t \\r \\\\ \\" \\xHH \\uHHHH``), [character classes] (ranges,
``^`` negation, the same escapes plus ``\\d \\w \\s``), rule names, ``(`` groups ``)``,
``.`` (any character), postfix ``* + ?`` and ``{m}``, ``{m,}``, ``{m,n}``.
"""

from __future__ import annotations

import re

from .cursor import TextCursor
from .ir import SIMPLE_QUANTIFIERS, Cls, Expr, Grammar, Lit, Ref, Rep, alt, seq
from .regex import _Parser as _RegexParser
from .utf8 import MAX_CODE_POINT

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_RULE_START = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\s*::=")
_LITERAL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'",
                    "[": "[", "]": "]", "0": "\0", "f": "\f", "v": "\v"}


class _Parser(TextCursor):
    LANGUAGE = "EBNF grammar"

    def skip_space(self) -> None:
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            elif ch.isspace():
                self.pos += 1
            else:
                return

    def at_rule_start(self) -> bool:
        return bool(_RULE_START.match(self.text, self.pos))

    def parse(self, root: str) -> Grammar:
        grammar = Grammar(root=root)
        self.skip_space()
        while self.pos < len(self.text):
            match = _NAME.match(self.text, self.pos)
            if not match:
                raise self.error("expected a rule name")
            self.pos = match.end()
            self.skip_space()
            if not self.text.startswith("::=", self.pos):
                raise self.error(f"expected '::=' after rule name {match.group()!r}")
            self.pos += 3
            grammar.add(match.group(), self.alternatives())
            self.skip_space()
        grammar.check_references()
        return grammar

    def alternatives(self) -> Expr:
        options = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return alt(*options)

    def sequence(self) -> Expr:
        items: list[Expr] = []
        while True:
            self.skip_space()
            if self.peek() in ("", "|", ")") or self.at_rule_start():
                return seq(*items)
            items.append(self.postfix(self.primary()))

    def primary(self) -> Expr:
        ch = self.peek()
        if ch in "\"'":
            return self.literal(ch)
        if ch == "[":
            self.pos += 1
            regex = _RegexParser(self.text)
            regex.pos = self.pos
            expr = regex.char_class()
            self.pos = regex.pos
            return expr
        if ch == "(":
            self.pos += 1
            inner = self.alternatives()
            self.skip_space()
            if self.peek() != ")":
                raise self.error("expected ')'")
            self.pos += 1
            return inner
        if ch == ".":
            self.pos += 1
            return Cls(((0, MAX_CODE_POINT),))
        match = _NAME.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return Ref(match.group())
        raise self.error(f"unexpected {ch!r}")

    def literal(self, quote: str) -> Expr:
        self.pos += 1
        out = []
        while True:
            if self.pos >= len(self.text):
                raise self.error("unterminated literal")
            ch = self.text[self.pos]
            self.pos += 1
            if ch == quote:
                return Lit("".join(out))
            if ch != "\\":
                out.append(ch)
                continue
            esc = self.text[self.pos:self.pos + 1]
            self.pos += 1
            if esc in _LITERAL_ESCAPES:
                out.append(_LITERAL_ESCAPES[esc])
            elif esc in ("x", "u", "U"):
                digits = {"x": 2, "u": 4, "U": 8}[esc]
                code = self.text[self.pos:self.pos + digits]
                self.pos += digits
                try:
                    out.append(chr(int(code, 16)))
                except ValueError:
                    raise self.error(f"bad \\{esc} escape {code!r}") from None
            else:
                raise self.error(f"unknown escape \\{esc}")

    def postfix(self, item: Expr) -> Expr:
        while True:
            ch = self.peek()
            if ch in SIMPLE_QUANTIFIERS:
                item = Rep(item, *SIMPLE_QUANTIFIERS[ch])
            elif ch == "{":
                match = re.compile(r"\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}").match(self.text, self.pos)
                if not match:
                    raise self.error("bad repetition, expected {m}, {m,} or {m,n}")
                lo = int(match.group(1))
                hi = lo if match.group(2) is None else (
                    int(match.group(3)) if match.group(3) else None)
                if hi is not None and hi < lo:
                    raise self.error(f"bad repetition {match.group()}")
                self.pos = match.end() - 1
                item = Rep(item, lo, hi)
            else:
                return item
            self.pos += 1


def parse_ebnf(text: str, root: str = "root") -> Grammar:
    return _Parser(text).parse(root)
