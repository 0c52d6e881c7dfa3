"""Holding back text that might be the start of a marker.

A streamed chunk ending in "<tool_" may be the start of "<tool_call>" or of a stop string;
emitting it would leak bytes the client must never see. Every streaming parser here uses
this one rule: emit all but the longest suffix that is a proper prefix of some marker.
"""

from __future__ import annotations

from typing import Iterable


def partial_marker_len(text: str, markers: Iterable[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of any marker."""
    best = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:n]):
                best = n
                break
    return best


def find_first(text: str, markers: Iterable[str], start: int = 0) -> tuple[int, str] | None:
    """Earliest occurrence of any marker at or after `start` as (index, marker); longest wins
    a tie so "</tool_call>" is not mistaken for a shorter marker at the same place."""
    found: tuple[int, str] | None = None
    for marker in markers:
        i = text.find(marker, start)
        if i >= 0 and (found is None or i < found[0]
                       or (i == found[0] and len(marker) > len(found[1]))):
            found = (i, marker)
    return found
