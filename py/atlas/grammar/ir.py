"""The grammar IR shared by the three front ends (EBNF, regular expressions, JSON schema).

Expressions are frozen (hashable) trees over Unicode text: literals, character classes,
sequences, alternatives, bounded/unbounded repetition and references to named rules. The
lowering in `pda.py` turns them into one pushdown automaton over UTF-8 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Union

from .errors import GrammarError
from .utf8 import MAX_CODE_POINT

CodeRange = tuple[int, int]


def normalize_ranges(ranges: Iterable[CodeRange]) -> tuple[CodeRange, ...]:
    """Sorted, merged, inclusive code-point ranges."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            raise GrammarError(f"empty character range {chr(lo)!r}-{chr(hi)!r}")
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def complement_ranges(ranges: tuple[CodeRange, ...]) -> tuple[CodeRange, ...]:
    out, start = [], 0
    for lo, hi in normalize_ranges(ranges):
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return tuple(out)


def subtract_ranges(ranges: tuple[CodeRange, ...],
                    removed: Iterable[CodeRange]) -> tuple[CodeRange, ...]:
    keep = complement_ranges(normalize_ranges(removed))
    return intersect_ranges(ranges, keep)


def intersect_ranges(a: tuple[CodeRange, ...], b: tuple[CodeRange, ...]) -> tuple[CodeRange, ...]:
    out = []
    for lo, hi in normalize_ranges(a):
        for c, d in normalize_ranges(b):
            if max(lo, c) <= min(hi, d):
                out.append((max(lo, c), min(hi, d)))
    return normalize_ranges(out)


@dataclass(frozen=True, slots=True)
class Lit:
    """Literal text (encoded as UTF-8 by the lowering)."""
    text: str


@dataclass(frozen=True, slots=True)
class Cls:
    """A character class: one code point from the inclusive `ranges`."""
    ranges: tuple[CodeRange, ...]

    @staticmethod
    def of(ranges: Iterable[CodeRange], negated: bool = False) -> "Cls":
        norm = normalize_ranges(ranges)
        return Cls(complement_ranges(norm) if negated else norm)


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple["Expr", ...]


@dataclass(frozen=True, slots=True)
class Alt:
    options: tuple["Expr", ...]


@dataclass(frozen=True, slots=True)
class Rep:
    """`item` repeated min..max times (max None: unbounded)."""
    item: "Expr"
    min: int = 0
    max: int | None = None

    def __post_init__(self) -> None:
        if self.min < 0 or (self.max is not None and self.max < self.min):
            raise GrammarError(f"bad repetition bounds {{{self.min},{self.max}}}")


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to a named rule (the only way to express recursion)."""
    name: str


Expr = Union[Lit, Cls, Seq, Alt, Rep, Ref]

EMPTY = Seq(())


def seq(*items: Expr) -> Expr:
    """A sequence, flattened; a single item stands for itself."""
    flat: list[Expr] = []
    for item in items:
        if isinstance(item, Seq):
            flat.extend(item.items)
        elif not (isinstance(item, Lit) and not item.text):
            flat.append(item)
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat))


def alt(*options: Expr) -> Expr:
    """An alternative with duplicates removed; a single option stands for itself."""
    unique = tuple(dict.fromkeys(options))
    if not unique:
        raise GrammarError("an alternative needs at least one option")
    return unique[0] if len(unique) == 1 else Alt(unique)


#: postfix operators shared by EBNF and regular expressions -> (min, max) repetitions
SIMPLE_QUANTIFIERS: dict[str, tuple[int, int | None]] = {"*": (0, None), "+": (1, None),
                                                         "?": (0, 1)}


def opt(item: Expr) -> Expr:
    return Rep(item, 0, 1)


@dataclass(slots=True)
class Grammar:
    """Named rules and the root rule's name. Built by a front end, compiled by `pda`."""
    rules: dict[str, Expr] = field(default_factory=dict)
    root: str = "root"

    def add(self, name: str, expr: Expr) -> str:
        if name in self.rules:
            raise GrammarError(f"rule {name!r} is defined twice")
        self.rules[name] = expr
        return name

    def check_references(self) -> None:
        """Every referenced rule exists and the root is defined."""
        if self.root not in self.rules:
            raise GrammarError(f"the grammar has no root rule {self.root!r}")
        for name, expr in self.rules.items():
            for ref in _references(expr):
                if ref not in self.rules:
                    raise GrammarError(f"rule {name!r} refers to undefined rule {ref!r}")


def _references(expr: Expr) -> Iterable[str]:
    if isinstance(expr, Ref):
        yield expr.name
    elif isinstance(expr, Seq):
        for item in expr.items:
            yield from _references(item)
    elif isinstance(expr, Alt):
        for item in expr.options:
            yield from _references(item)
    elif isinstance(expr, Rep):
        yield from _references(expr.item)
