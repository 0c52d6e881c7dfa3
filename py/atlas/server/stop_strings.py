"""Stop strings on a text stream: cut at the first match, never leak a partial match."""

from __future__ import annotations

from typing import Sequence

from .holdback import find_first, partial_marker_len


class StopStringMatcher:
    """Feed generated text; returns what is safe to emit and, once, the stop string hit.

    Text that could still grow into a stop string is held back until it either completes
    (generation stops, the stop string itself is not emitted, as OpenAI does) or diverges.
    """

    def __init__(self, stops: Sequence[str], keep_stop: bool = False) -> None:
        """`keep_stop`: the matched stop string ends the emitted text (vLLM's
        include_stop_str_in_output) instead of being cut with what follows it."""
        self._stops = [s for s in stops if s]
        self._keep = keep_stop
        self._pending = ""
        self.matched: str | None = None

    def feed(self, text: str) -> str:
        if self.matched is not None:
            return ""
        if not self._stops:
            return text
        self._pending += text
        hit = find_first(self._pending, self._stops)
        if hit is not None:
            index, self.matched = hit
            end = index + len(self.matched) if self._keep else index
            out, self._pending = self._pending[:end], ""
            return out
        keep = partial_marker_len(self._pending, self._stops)
        cut = len(self._pending) - keep
        out, self._pending = self._pending[:cut], self._pending[cut:]
        return out

    def flush(self) -> str:
        """At end of generation a held partial match is ordinary text."""
        out, self._pending = self._pending, ""
        return "" if self.matched is not None else out
