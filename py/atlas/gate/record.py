"""Running a gate: its suite against a server, scored by BENCH.toml, written as a record.

The benchmark harness is another package (`atlas.bench`); the gate reaches it through one
small interface, `SuiteRunner`, obtained from `atlas.bench.suite_runner()`. When the harness
is not installed that is an error saying so, never a fake run.

Everything is checked before the suite runs (gate, threshold files, measured targets, which
BENCH.toml entry applies), because a suite can take an hour and a mistake found afterwards
wastes it. `plan` and `make_record` are pure; the CLI does the I/O around them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Protocol, Sequence

from atlas.kernels.ptxset import SKIPPED_COMPILER

from .bench_toml import BenchEntry, BenchTree
from .coverage import invalidated_by
from .gates import Gate
from .records import Record, TargetStamp
from .verdict import judge

HARNESS_MODULE = "atlas.bench"
HARNESS_FACTORY = "suite_runner"


class SuiteRunner(Protocol):
    """What the gate needs from the benchmark harness: run one suite, return flat metrics
    (name -> number, e.g. {"output_tok_s": 142.3}). Raises on a broken run."""

    def run(self, suite_id: str, url: str, model: str,
            params: Mapping[str, Any]) -> Mapping[str, float]: ...


class HarnessMissing(RuntimeError):
    """The benchmark harness is not installed, or does not offer the gate's interface."""


class RecordRefused(ValueError):
    """The run cannot produce a meaningful record; the message says what to fix."""


def load_suite_runner() -> SuiteRunner:
    try:
        module = importlib.import_module(HARNESS_MODULE)
    except ImportError as exc:
        raise HarnessMissing(f"the benchmark harness is not installed ({exc})") from None
    factory = getattr(module, HARNESS_FACTORY, None)
    if not callable(factory):
        raise HarnessMissing(f"the benchmark harness is not installed: {HARNESS_MODULE} "
                             f"provides no {HARNESS_FACTORY}() returning a SuiteRunner")
    return factory()


@dataclass(frozen=True)
class RecordPlan:
    """What a run will measure and how it will be scored."""

    gate: Gate
    entry: BenchEntry
    stamps: tuple[TargetStamp, ...]
    params: Mapping[str, Any]


def plan(gate: Gate, stamps: Sequence[TargetStamp], bench: BenchTree,
         checkpoint: str | None, overrides: Mapping[str, Any]) -> RecordPlan:
    """Pick the BENCH.toml entry for this run and refuse anything that would make the record
    lie: a threshold file with errors, a skip build, targets the entry does not describe."""
    if bench.errors:
        raise RecordRefused("BENCH.toml has errors:\n  " + "\n  ".join(bench.errors))
    skipped = [s.target.name for s in stamps if s.compiler_version == SKIPPED_COMPILER]
    if skipped:
        raise RecordRefused(f"{', '.join(skipped)} is a skip build (ATLAS_SKIP_BUILD=1, no "
                            f"PTX): gates measure compiled kernels")
    hws = sorted({s.target.hw for s in stamps})
    if len(hws) != 1:
        raise RecordRefused(f"the measured targets span hardware {', '.join(hws)}; a record "
                            f"is for one hardware")
    entry = _pick_entry(gate, hws[0], bench, checkpoint)
    measured = {s.target.name for s in stamps}
    if entry.leaf not in measured:
        raise RecordRefused(f"{entry.source} is for {entry.leaf}, but the measured targets are "
                            f"{', '.join(sorted(measured))}")
    params = {**entry.params, **overrides}
    return RecordPlan(gate, entry, tuple(stamps), params)


def _pick_entry(gate: Gate, hw: str, bench: BenchTree, checkpoint: str | None) -> BenchEntry:
    entries = bench.for_gate(gate.name, hw)
    if not entries:
        raise RecordRefused(f"no BENCH.toml entry for gate {gate.name} on {hw}: add one to "
                            f"kernels/{hw}/<model>/BENCH.toml (status = \"unmeasured\" until a "
                            f"run sets the bar)")
    if checkpoint is None:
        default = bench.default_entry(gate.name, hw)
        if default is None:
            raise RecordRefused(f"gate {gate.name} on {hw} has no single default checkpoint")
        return default
    chosen = [e for e in entries if e.checkpoint == checkpoint]
    if len(chosen) != 1:
        known = ", ".join(sorted({e.checkpoint for e in entries}))
        raise RecordRefused(f"gate {gate.name} on {hw} has {len(chosen)} entries for "
                            f"checkpoint {checkpoint!r} (checkpoints: {known})")
    return chosen[0]


def make_record(run: RecordPlan, metrics: Mapping[str, float], *, url: str, model: str,
                commit: str, uncommitted: Sequence[str], now: datetime,
                atlas_version: str) -> Record:
    """The record of one finished run. `uncommitted` paths that could re-open a gate are kept
    as the record's dirty paths (the commit does not describe them); `now` must be UTC."""
    judgement = judge(run.gate, run.entry, metrics)
    return Record(
        gate=run.gate.name, suite=run.gate.suite, checkpoint=run.entry.checkpoint,
        is_default=run.entry.default, model=model, url=url, targets=run.stamps,
        params=dict(run.params), metrics=judgement.scored, thresholds=dict(run.entry.metrics),
        verdict=judgement.verdict, failures=judgement.failures,
        date=now.strftime("%Y-%m-%d"), recorded_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        commit=commit, atlas_version=atlas_version,
        dirty_paths=tuple(sorted(p for p in uncommitted if invalidated_by([p]))),
    )
