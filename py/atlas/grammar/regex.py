"""Regular expressions -> IR: the practical subset JSON-schema patterns and tool formats use.

Supported: literals and escapes (``\\d \\w \\s`` and their negations, ``\\n \\t \\xHH
\\uHHHH``, escaped punctuation), classes with ranges and negation, ``.`` (any character but
a newline), groups (capturing, ``(?:``, named), alternation, quantifiers ``* + ? {m} {m,}
{m,n}`` (a lazy ``?`` suffix is accepted: generation has no match preference). The match
is whole-string: ``^`` at the start and ``$`` at the end are implied and may be written.
Classes ``\\d \\w \\s`` are ASCII, as in JSON Schema's ECMA-262 dialect.
Backreferences, lookaround and word boundaries cannot be expressed by the automaton and
are errors.
"""

from __future__ import annotations

from .cursor import TextCursor
from .ir import (SIMPLE_QUANTIFIERS, CodeRange, Cls, Expr, Lit, Rep, alt, complement_ranges,
                 normalize_ranges, seq)

DIGIT: tuple[CodeRange, ...] = ((0x30, 0x39),)
WORD: tuple[CodeRange, ...] = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
SPACE: tuple[CodeRange, ...] = ((0x09, 0x0D), (0x20, 0x20))
CLASS_ESCAPES = {"d": DIGIT, "w": WORD, "s": SPACE}
CHAR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0", "a": "\a",
                "e": "\x1b"}
ANY_BUT_NEWLINE = complement_ranges(((0x0A, 0x0A),))


class _Parser(TextCursor):
    LANGUAGE = "regular expression"

    def take(self) -> str:
        if self.pos >= len(self.text):
            raise self.error("unexpected end")
        self.pos += 1
        return self.text[self.pos - 1]

    def parse(self) -> Expr:
        expr = self.alternation(depth=0)
        if self.pos != len(self.text):
            raise self.error(f"unbalanced {self.peek()!r}")
        return expr

    def alternation(self, depth: int) -> Expr:
        options = [self.sequence(depth)]
        while self.peek() == "|":
            self.take()
            options.append(self.sequence(depth))
        return alt(*options)

    def sequence(self, depth: int) -> Expr:
        items: list[Expr] = []
        if self.peek() == "^" and depth == 0:
            self.take()
        while self.peek() not in ("", "|", ")"):
            if self.peek() == "$" and depth == 0:
                self.take()
                if self.peek() not in ("", "|"):
                    raise self.error("'$' is only supported at the end")
                break
            items.append(self.quantified(self.atom(depth)))
        return seq(*items)

    def quantified(self, atom: Expr) -> Expr:
        while self.peek() in ("*", "+", "?", "{"):
            start = self.pos
            ch = self.take()
            if ch in SIMPLE_QUANTIFIERS:
                atom = Rep(atom, *SIMPLE_QUANTIFIERS[ch])
            else:
                bounds = self.bounds()
                if bounds is None:           # a literal '{'
                    self.pos = start
                    return atom
                atom = Rep(atom, *bounds)
            if self.peek() == "?":           # lazy: same language
                self.take()
            elif self.peek() == "+":
                raise self.error("possessive quantifiers are not supported")
        return atom

    def bounds(self) -> tuple[int, int | None] | None:
        end = self.text.find("}", self.pos)
        if end < 0:
            return None
        body = self.text[self.pos:end]
        lo_text, comma, hi_text = body.partition(",")
        if not lo_text.isdigit() or (hi_text and not hi_text.isdigit()):
            return None
        self.pos = end + 1
        lo = int(lo_text)
        hi = (int(hi_text) if hi_text else None) if comma else lo
        if hi is not None and hi < lo:
            raise self.error(f"bad repetition {{{body}}}")
        return lo, hi

    def atom(self, depth: int) -> Expr:
        ch = self.take()
        if ch == "(":
            if self.text.startswith("?:", self.pos):
                self.pos += 2
            elif self.text.startswith("?P<", self.pos) or self.text.startswith("?<", self.pos):
                if self.text.startswith("?<=", self.pos) or self.text.startswith("?<!", self.pos):
                    raise self.error("lookbehind is not supported")
                self.pos = self.text.index(">", self.pos) + 1
            elif self.peek() == "?":
                raise self.error("lookahead and inline flags are not supported")
            inner = self.alternation(depth + 1)
            if self.peek() != ")":
                raise self.error("expected ')'")
            self.take()
            return inner
        if ch == "[":
            return self.char_class()
        if ch == ".":
            return Cls(ANY_BUT_NEWLINE)
        if ch == "\\":
            return self.escape(in_class=False)
        if ch in "*+?":
            raise self.error(f"nothing to repeat before {ch!r}")
        if ch in "^$":
            raise self.error(f"{ch!r} is only supported at the start/end of the pattern")
        return Lit(ch)

    def escape(self, in_class: bool) -> Expr:
        ch = self.take()
        if ch.lower() in CLASS_ESCAPES:
            return Cls.of(CLASS_ESCAPES[ch.lower()], negated=ch.isupper())
        if ch in CHAR_ESCAPES:
            return Lit(CHAR_ESCAPES[ch])
        if ch in ("x", "u"):
            digits = 2 if ch == "x" else 4
            if self.peek() == "{":
                end = self.text.index("}", self.pos)
                code, self.pos = self.text[self.pos + 1:end], end + 1
            else:
                code, self.pos = self.text[self.pos:self.pos + digits], self.pos + digits
            try:
                return Lit(chr(int(code, 16)))
            except ValueError:
                raise self.error(f"bad \\{ch} escape {code!r}") from None
        if ch == "b" and in_class:
            return Lit("\b")
        if ch.isalnum():
            raise self.error(f"unsupported escape \\{ch} (backreferences, word boundaries "
                             "and anchors inside the pattern cannot be enforced)")
        return Lit(ch)

    def class_item(self) -> tuple[CodeRange, ...]:
        if self.peek() == "\\":
            self.take()
            item = self.escape(in_class=True)
            if isinstance(item, Cls):
                return item.ranges
            return ((ord(item.text), ord(item.text)),)
        ch = self.take()
        return ((ord(ch), ord(ch)),)

    def char_class(self) -> Expr:
        negated = self.peek() == "^"
        if negated:
            self.take()
        ranges: list[CodeRange] = []
        first = True
        while first or self.peek() != "]":
            if not self.peek():
                raise self.error("unterminated character class")
            first = False
            item = self.class_item()
            if (len(item) == 1 and item[0][0] == item[0][1] and self.peek() == "-"
                    and self.pos + 1 < len(self.text) and self.text[self.pos + 1] != "]"):
                self.take()
                end = self.class_item()
                if len(end) != 1 or end[0][0] != end[0][1]:
                    raise self.error("a class range must end at one character")
                if end[0][0] < item[0][0]:
                    raise self.error("class range out of order")
                item = ((item[0][0], end[0][0]),)
            ranges.extend(item)
        self.take()
        return Cls.of(normalize_ranges(ranges), negated=negated)


def parse_regex(pattern: str) -> Expr:
    """The IR for a whole-string match of `pattern`."""
    return _Parser(pattern).parse()
