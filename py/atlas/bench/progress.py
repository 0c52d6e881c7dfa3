"""Progress on stderr, so stdout stays clean for machine-readable output.

On a terminal the bar redraws in place; into a file or pipe it writes a line at each tenth
of a phase, which keeps CI logs short and still shows a stuck run.
"""

from __future__ import annotations

import sys
from typing import Protocol, TextIO


class Progress(Protocol):
    def begin(self, label: str, total: int) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def end(self) -> None: ...


class NullProgress:
    """For callers that want no output (tests, library use)."""

    def begin(self, label: str, total: int) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def end(self) -> None:
        pass


class ProgressBar:
    """`label [########------------] 12/32`."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.label, self.total, self.done, self._shown_tenth = "", 0, 0, -1

    def begin(self, label: str, total: int) -> None:
        self.label, self.total, self.done, self._shown_tenth = label, max(total, 0), 0, -1
        self._draw()

    def advance(self, n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        self._draw()

    def end(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()

    def line(self) -> str:
        filled = self.WIDTH * self.done // self.total if self.total else self.WIDTH
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        return f"{self.label} [{bar}] {self.done}/{self.total}"

    def _draw(self) -> None:
        if self.live:
            self.stream.write("\r" + self.line())
        else:
            tenth = 10 * self.done // self.total if self.total else 10
            if tenth == self._shown_tenth:
                return
            self._shown_tenth = tenth
            self.stream.write(self.line() + "\n")
        self.stream.flush()
