"""The HTTP benchmark harness: suites (bench/suites/*.toml) run against any
OpenAI-compatible server, measured on the client, stored under $ATLAS_HOME/runs.

It speaks HTTP only and imports nothing of the server or the model, so the same numbers
can be taken from Atlas or from another engine. `suite_runner()` is the interface the
merge-lattice gate (atlas.gate.record) runs suites through.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from .progress import Progress, ProgressBar
from .runner import run_suite
from .store import RunStore
from .suites import find_suite

API_KEY_ENV = "ATLAS_BENCH_API_KEY"


class HttpSuiteRunner:
    """Runs a suite for the gate: parameters as strings or typed values, metrics back, and
    the run stored like any other (source "gate"). Raises BenchError on a broken run."""

    def __init__(self, store: RunStore | None = None, progress: Progress | None = None) -> None:
        self.store = store or RunStore()
        self.progress = progress or ProgressBar()

    def run(self, suite_id: str, url: str, model: str,
            params: Mapping[str, Any]) -> Mapping[str, float]:
        run = run_suite(find_suite(suite_id), url, model, params, progress=self.progress,
                        api_key=os.environ.get(API_KEY_ENV), source="gate")
        self.store.save(run)
        return run["metrics"]


def suite_runner() -> HttpSuiteRunner:
    return HttpSuiteRunner()
