"""Server-sent events, decoded line by line: the framing of every OpenAI-style stream.

An event is one or more `data:` lines ended by a blank line; `event:`/`id:` fields and `:`
comments carry nothing the harness measures, so only the data payload comes back.
"""

from __future__ import annotations


class SseDecoder:
    """Feed lines (without or with their line ending); get each event's data when the event
    ends. Multi-line data is joined with newlines, as the SSE specification says."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, raw_line: bytes) -> str | None:
        line = raw_line.decode("utf-8").rstrip("\r\n")
        if not line:
            return self._flush()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if field == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def close(self) -> str | None:
        """The last event, for a stream that ended without its blank line."""
        return self._flush()

    def _flush(self) -> str | None:
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return data
