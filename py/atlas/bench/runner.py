"""Running one suite end to end: resolve parameters, check the server, run the workload,
judge the thresholds, and describe the run as the record the store keeps.

Parameters are resolved before anything is sent (an unknown key costs nothing), and
/health is checked before the workload starts, so a run fails fast with a message rather
than minutes in with a timeout.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from .client import BenchClient
from .context import BenchContext
from .params import resolve_params
from .progress import NullProgress, Progress
from .provenance import provenance
from .results import SuiteOutcome
from .store import new_run_id
from .suites import SuiteDef
from .verdict import judge
from .workloads import WORKLOADS


async def _execute(suite: SuiteDef, url: str, model: str, params: Mapping[str, Any],
                   progress: Progress, api_key: str | None,
                   timeout_s: float) -> SuiteOutcome:
    async with BenchClient(url, model, api_key=api_key, timeout_s=timeout_s) as client:
        await client.check_health()
        ctx = BenchContext(client, progress, await client.max_model_len())
        return await WORKLOADS[suite.workload].run(ctx, params)


def run_suite(suite: SuiteDef, url: str, model: str, overrides: Mapping[str, Any], *,
              progress: Progress | None = None, api_key: str | None = None,
              timeout_s: float = 600.0, source: str = "cli",
              cwd: Path | None = None) -> dict[str, Any]:
    """Run `suite` against the server at `url` and return the run record (JSON-ready).
    Raises BenchError when the run cannot produce meaningful numbers."""
    params = resolve_params(suite.id, suite.params, overrides)
    run_id = new_run_id()
    created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    started = time.perf_counter()
    outcome = asyncio.run(_execute(suite, url, model, params, progress or NullProgress(),
                                   api_key, timeout_s))
    verdict = judge(suite.thresholds, outcome.metrics)
    by_name = {p.name: p for p in suite.params}
    return {
        "run_id": run_id, "suite": suite.id, "workload": suite.workload,
        "created_at": created, "source": source,
        "target": {"url": url, "model": model},
        "params": {name: list(v) if by_name[name].type == "int_list" else v
                   for name, v in params.items()},
        **provenance(cwd),
        "duration_s": time.perf_counter() - started,
        "metrics": outcome.metrics,
        "verdict": {**verdict.as_dict(),
                    "thresholds": [t.describe() for t in suite.thresholds]},
        "levels": [level.as_dict() for level in outcome.levels],
        "info": outcome.info or {},
        "requests": [r.as_dict() for r in outcome.requests],
    }
