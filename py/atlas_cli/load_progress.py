"""The weight-loading progress line (tensors, GB, GB/s) that `serve` and `generate` show."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class LoadProgress:
    """A WeightStore progress callback drawing one line on stderr.

    On a terminal the line is redrawn at most every 0.2 s; otherwise only the final line is
    written, so logs stay one line per load.
    """

    def __init__(self, stream: TextIO = sys.stderr, interval_s: float = 0.2) -> None:
        self.stream = stream
        self.interval_s = interval_s
        self.tty = stream.isatty()
        self._last = 0.0

    def __call__(self, tensors_done: int, tensors_total: int, bytes_done: int,
                 bytes_total: int, elapsed_s: float) -> None:
        done = tensors_done >= tensors_total
        now = time.monotonic()
        if not done and (not self.tty or now - self._last < self.interval_s):
            return
        self._last = now
        rate = bytes_done / elapsed_s / 1e9 if elapsed_s > 0 else 0.0
        line = (f"loading weights: {tensors_done}/{tensors_total} tensors, "
                f"{bytes_done / 1e9:.2f}/{bytes_total / 1e9:.2f} GB, {rate:.2f} GB/s")
        self.stream.write(("\r" + line + ("\n" if done else "")) if self.tty else line + "\n")
        self.stream.flush()
