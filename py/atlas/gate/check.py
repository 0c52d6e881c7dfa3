"""The verdict of `atlas gate check`: for each gate, does its latest record still stand?

Pure: the caller supplies each gate's latest record, the paths changed since (or why they
could not be listed), and a function recomputing a target's closure hash from the tree. The
decision per gate:

1. no record of the default checkpoint               -> OPEN, "no record yet"
2. the record's verdict is FAIL                       -> OPEN, naming the failed metrics
3. the changes since it are unknown                   -> OPEN, saying why
4. the floor (`coverage`) re-opens nothing for it     -> VALID
5. every path re-opening it lies under kernels/       -> the closure rung: VALID iff every
                                                         measured target's closure hash,
                                                         recomputed with the record's own
                                                         arch, compiler and flags, equals the
                                                         baked one; else OPEN naming targets
6. otherwise                                          -> OPEN, naming the paths

The rung can only narrow the floor's answer, and only for kernel sources: a boundary file or
any re-opening path outside kernels/ leaves the floor's answer standing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .coverage import KERNELS_DIR, invalidating_paths, is_boundary_file, is_under
from .gates import Gate
from .records import StoredRecord, TargetStamp, Verdict

#: how many paths or targets a message names before "… and N more"
MAX_NAMED = 3


class ClosureUnavailable(Exception):
    """The tree cannot produce a target's closure hash (the leaf is gone, an include does not
    resolve, ...). The message says why; the target counts as changed."""


#: recomputes a target's closure hash from the current tree with the stamp's arch, compiler
#: version and flags; raises ClosureUnavailable when it cannot
ClosureNow = Callable[[TargetStamp], str]


@dataclass(frozen=True)
class GateInput:
    """What the check knows about one gate. `changed` is None when the paths changed since
    the record could not be listed; `changed_error` then says why."""

    gate: Gate
    latest: StoredRecord | None
    changed: tuple[str, ...] | None
    changed_error: str = ""


@dataclass(frozen=True)
class GateStatus:
    gate: Gate
    is_open: bool
    reason: str

    @property
    def blocks(self) -> bool:
        """An open required gate is what makes `check` fail."""
        return self.is_open and self.gate.required

    def line(self) -> str:
        state = "OPEN" if self.is_open else "VALID"
        note = "" if self.gate.required else " [not required]"
        return f"{state:<5} {self.gate.name}{note} — {self.reason}"


def evaluate(item: GateInput, closure_now: ClosureNow) -> GateStatus:
    """One gate's status; the order of the tests is the module docstring's."""
    gate, stored = item.gate, item.latest
    if stored is None:
        return GateStatus(gate, True, "no record yet")
    record = stored.record
    head = f"latest record is for {record.commit[:10]} ({_basename(stored.path)})"
    if record.verdict is Verdict.FAIL:
        return GateStatus(gate, True, f"{head} — it failed: {_named(record.failures)}")
    if item.changed is None:
        return GateStatus(gate, True, f"{head} — cannot list changes since: "
                                      f"{item.changed_error}")
    changed = sorted(set(item.changed) | set(record.dirty_paths))
    reopening = invalidating_paths(gate.name, changed)
    verdict = "" if record.verdict is Verdict.PASS else " (verdict UNMEASURED: no thresholds)"
    if not reopening:
        return GateStatus(gate, False, f"{head}{verdict} — none of the {len(changed)} changed "
                                       f"paths re-opens it")
    if not _closure_rung_applies(reopening):
        return GateStatus(gate, True, f"{head} — invalidated by {_named(reopening)}")
    drifted = _drifted_targets(record.targets, closure_now)
    if drifted:
        return GateStatus(gate, True, f"{head} — closure hash changed for {_named(drifted)} "
                                      f"(kernel edits: {_named(reopening)})")
    measured = [t.target.name for t in record.targets]
    return GateStatus(gate, False, f"{head}{verdict} — kernel edits leave the closure hash of "
                                   f"every measured target unchanged ({_named(measured)})")


def evaluate_all(items: Sequence[GateInput], closure_now: ClosureNow) -> list[GateStatus]:
    return [evaluate(item, closure_now) for item in items]


def any_blocking(statuses: Sequence[GateStatus]) -> bool:
    return any(s.blocks for s in statuses)


def _closure_rung_applies(reopening: Sequence[str]) -> bool:
    return all(is_under(p, KERNELS_DIR) and not is_boundary_file(p) for p in reopening)


def _drifted_targets(stamps: Sequence[TargetStamp], closure_now: ClosureNow) -> list[str]:
    drifted: list[str] = []
    for stamp in stamps:
        try:
            same = closure_now(stamp) == stamp.closure_hash
        except ClosureUnavailable as exc:
            drifted.append(f"{stamp.target.name} ({exc})")
            continue
        if not same:
            drifted.append(stamp.target.name)
    return drifted


def _named(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_NAMED])
    rest = len(items) - MAX_NAMED
    return f"{shown}, … and {rest} more" if rest > 0 else shown


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]
