"""Progress on stderr for every startup step that can take more than a couple of seconds:
fetching and converting the default model, loading weights (tensors, GB, GB/s), preflight,
CUDA-graph capture.

On a terminal a line is redrawn in place; otherwise (logs, CI) a step prints when it starts
and when it ends, plus a heartbeat line every `heartbeat_s`, so a log never goes silent for
long while something is still running.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TextIO


class LoadProgress:
    """A WeightStore progress callback drawing one line on stderr.

    On a terminal the line is redrawn at most every 0.2 s; otherwise only the final line is
    written, so logs stay one line per load.
    """

    def __init__(self, stream: TextIO | None = None, interval_s: float = 0.2) -> None:
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self.tty = self.stream.isatty()
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


def conversion_progress(stream: TextIO | None = None,
                        heartbeat_s: float = 5.0) -> Callable[[int, int], None]:
    """A model-import progress callback (tensors converted): redrawn on a terminal, one
    line every `heartbeat_s` and the final count otherwise."""
    stream = stream or sys.stderr
    t0 = time.perf_counter()
    tty = stream.isatty()
    last = [t0]

    def show(done: int, total: int) -> None:
        now = time.perf_counter()
        final = done == total
        if not (tty or final or now - last[0] >= heartbeat_s):
            return
        last[0] = now
        line = f"converting the model: converted {done}/{total} tensors ({now - t0:.1f} s)"
        stream.write(("\r" + line + ("\n" if final else "")) if tty else line + "\n")
        stream.flush()

    return show


@contextmanager
def step(label: str, stream: TextIO | None = None, heartbeat_s: float = 5.0,
         detail: Callable[[], str] = lambda: "") -> Iterator[None]:
    """Announce a step (preflight, graph capture, a pip download, a conversion): its label,
    a ticking elapsed time (terminal) or heartbeat lines (logs) with `detail()` (e.g. a
    count the step updates), and its duration at the end. (The stream is looked up when
    the step runs, so a redirected sys.stderr is honoured.)"""
    stream = stream or sys.stderr
    tty = stream.isatty()
    t0 = time.perf_counter()
    stop = threading.Event()
    stream.write(f"{label} ..." + ("" if tty else "\n"))
    stream.flush()

    def tick() -> None:
        interval = 0.5 if tty else heartbeat_s
        while not stop.wait(interval):
            elapsed = time.perf_counter() - t0
            more = f", {detail()}" if detail() else ""
            stream.write(f"\r{label} ... {elapsed:.0f} s{more}" if tty
                         else f"{label}: still running ({elapsed:.0f} s{more})\n")
            stream.flush()

    ticker = threading.Thread(target=tick, daemon=True, name=f"progress: {label}")
    ticker.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        ticker.join()
        elapsed = time.perf_counter() - t0
        end = f"done in {elapsed:.1f} s" if ok else f"failed after {elapsed:.1f} s"
        end += f" ({detail()})" if detail() else ""
        stream.write(f"\r{label} ... {end}\n" if tty else f"{label}: {end}\n")
        stream.flush()
