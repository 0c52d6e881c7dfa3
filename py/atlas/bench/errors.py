"""The one exception the harness raises for "this run cannot produce meaningful numbers"."""

from __future__ import annotations


class BenchError(RuntimeError):
    """No server, a bad parameter, a broken suite file, failed requests: the harness broke
    (exit status 1), as opposed to a run that completed and missed a threshold (2). The
    message says what to fix."""
