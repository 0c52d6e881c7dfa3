"""The shape every workload has: the parameters it reads and the coroutine that runs it.

A suite file (bench/suites/<id>.toml) names a workload and declares those parameters with
types, defaults and descriptions; the loader checks the two agree, so a workload never
reads a parameter no suite declared and a suite never declares one nothing reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from .context import BenchContext
from .results import SuiteOutcome

RunWorkload = Callable[[BenchContext, Mapping[str, Any]], Awaitable[SuiteOutcome]]


@dataclass(frozen=True)
class Workload:
    name: str
    params: frozenset[str]
    run: RunWorkload
