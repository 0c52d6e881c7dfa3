"""Unicode code-point ranges -> UTF-8 byte-range sequences.

The automaton runs over bytes (tokens split characters anywhere), so a character class
such as ``[^"\\]`` becomes a few alternatives of byte-range sequences, e.g.
``[\\xC2-\\xDF][\\x80-\\xBF]`` for the two-byte characters. Surrogates (U+D800..U+DFFF) are
never produced: they are not valid in UTF-8.
"""

from __future__ import annotations

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)
_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF, MAX_CODE_POINT)

ByteRange = tuple[int, int]
ByteSequence = tuple[ByteRange, ...]


def _split_by_length(lo: int, hi: int) -> list[tuple[int, int]]:
    """Pieces of [lo, hi] whose code points all encode to the same number of bytes."""
    pieces = []
    start = 0
    for limit in _LENGTH_LIMITS:
        a, b = max(lo, start), min(hi, limit)
        if a <= b:
            pieces.append((a, b))
        start = limit + 1
    return pieces


def _without_surrogates(lo: int, hi: int) -> list[tuple[int, int]]:
    s_lo, s_hi = SURROGATES
    if hi < s_lo or lo > s_hi:
        return [(lo, hi)]
    return [(a, b) for a, b in ((lo, s_lo - 1), (s_hi + 1, hi)) if a <= b]


def _aligned(lo: int, hi: int, length: int) -> list[tuple[int, int]]:
    """Split [lo, hi] (one encoded length) until every continuation byte position spans
    either one value or the full 0x80..0xBF range between the ends, so that the byte-wise
    product of the endpoints' encodings is exactly the range."""
    for i in range(1, length):
        mask = (1 << (6 * i)) - 1
        if lo & ~mask != hi & ~mask:
            if lo & mask:
                return _aligned(lo, lo | mask, length) + _aligned((lo | mask) + 1, hi, length)
            if hi & mask != mask:
                return _aligned(lo, (hi & ~mask) - 1, length) + _aligned(hi & ~mask, hi, length)
    return [(lo, hi)]


def utf8_sequences(lo: int, hi: int) -> list[ByteSequence]:
    """Byte-range sequences whose union encodes exactly the code points [lo, hi]."""
    if not 0 <= lo <= hi <= MAX_CODE_POINT:
        raise ValueError(f"bad code point range {lo:#x}..{hi:#x}")
    out: list[ByteSequence] = []
    for a, b in _without_surrogates(lo, hi):
        for c, d in _split_by_length(a, b):
            length = len(chr(c).encode("utf-8"))
            for e, f in _aligned(c, d, length):
                first, last = chr(e).encode("utf-8"), chr(f).encode("utf-8")
                out.append(tuple(zip(first, last)))
    return out
