"""Decimal text for integer and number ranges, as IR (JSON schema minimum/maximum).

Sound first: every string the expression matches is a JSON number inside the range. For
integers the expression is exact; for non-integers it covers ``k.ddd`` for each integer
part k whose whole unit interval lies inside the range (no exponents), which is the part
of the range that is "expressible" without arbitrary-precision digit constraints.
"""

from __future__ import annotations

import math

from .ir import Cls, Expr, Lit, Rep, alt, seq

DIGIT = Cls(((0x30, 0x39),))
NONZERO = Cls(((0x31, 0x39),))


def _digits(lo: str, hi: str) -> Cls:
    return Cls(((ord(lo), ord(hi)),))


def _same_length(lo: str, hi: str) -> Expr:
    """Decimal strings of one length between lo and hi (inclusive, lo <= hi)."""
    if lo == hi:
        return Lit(lo)
    if len(lo) == 1:
        return _digits(lo, hi)
    if lo[0] == hi[0]:
        return seq(Lit(lo[0]), _same_length(lo[1:], hi[1:]))
    rest = len(lo) - 1
    options = [seq(Lit(lo[0]), _same_length(lo[1:], "9" * rest))]
    if int(hi[0]) - int(lo[0]) > 1:
        options.append(seq(_digits(str(int(lo[0]) + 1), str(int(hi[0]) - 1)),
                           Rep(DIGIT, rest, rest)))
    options.append(seq(Lit(hi[0]), _same_length("0" * rest, hi[1:])))
    return alt(*options)


def _natural_range(lo: int, hi: int | None) -> Expr | None:
    """Non-negative integers in [lo, hi] without leading zeros (hi None: unbounded)."""
    if hi is not None and lo > hi:
        return None
    options = []
    length = len(str(lo))
    top = hi if hi is not None else 10 ** length - 1
    for digits in range(length, len(str(top)) + 1):
        a = max(lo, 10 ** (digits - 1) if digits > 1 else 0)
        b = min(top, 10 ** digits - 1)
        if a <= b:
            options.append(_same_length(str(a), str(b)))
    if hi is None:
        options.append(seq(NONZERO, Rep(DIGIT, length, None)))
    return alt(*options)


def integer_range(lo: int | None, hi: int | None) -> Expr | None:
    """JSON integers in [lo, hi] (None: unbounded); None when the range is empty."""
    if lo is not None and hi is not None and lo > hi:
        return None
    options = []
    if lo is None or lo < 0:                      # negatives: "-" m, m in [max(1,-hi), -lo]
        m_lo = 1 if hi is None or hi >= 0 else -hi
        m_hi = None if lo is None else -lo
        negative = _natural_range(m_lo, m_hi)
        if negative is not None:
            options.append(seq(Lit("-"), negative))
    if hi is None or hi >= 0:
        natural = _natural_range(max(0, lo or 0), hi)
        if natural is not None:
            options.append(natural)
    return alt(*options) if options else None


def number_range(lo: float | None, hi: float | None, lo_exclusive: bool,
                 hi_exclusive: bool) -> Expr | None:
    """JSON numbers inside the bounds (module docstring); None if none is expressible."""
    int_lo = None if lo is None else (math.floor(lo) + 1 if lo_exclusive else math.ceil(lo))
    int_hi = None if hi is None else (math.ceil(hi) - 1 if hi_exclusive else math.floor(hi))
    options = []
    integers = integer_range(int_lo, int_hi)
    if integers is not None:
        options.append(integers)
    fraction = seq(Lit("."), Rep(DIGIT, 1, None))
    # k.ddd with k >= 0 lies in [k, k+1) (the digits may all be 0): needs k >= lo (k > lo
    # when exclusive) and k + 1 <= hi.
    k_lo = 0 if lo is None else max(0, math.floor(lo) + 1 if lo_exclusive else math.ceil(lo))
    k_hi = None if hi is None else math.floor(hi) - 1
    positive = integer_range(k_lo, k_hi) if k_hi is None or k_hi >= k_lo else None
    if positive is not None:
        options.append(seq(positive, fraction))
    # -m.ddd lies in (-(m+1), -m]: needs -(m+1) >= lo and -m <= hi (-m < hi when exclusive).
    m_lo = 0 if hi is None else max(0, math.floor(-hi) + 1 if hi_exclusive else math.ceil(-hi))
    m_hi = None if lo is None else math.floor(-lo) - 1
    negative = integer_range(m_lo, m_hi) if m_hi is None or m_hi >= m_lo else None
    if negative is not None:
        options.append(seq(Lit("-"), negative, fraction))
    return alt(*options) if options else None
