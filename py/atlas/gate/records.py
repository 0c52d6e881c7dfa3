"""Gate records: what one measured run attests, and which record a gate is judged by.

A record is `.benchmarks/<gate>/<date>-<commit>.json` (a non-default checkpoint adds its
slug: `<date>-<commit>-<slug>.json`). It carries the targets the server had loaded with the
closure hashes baked into their PTX sets at build time (never recomputed from the tree when
writing: the tree and the binary differ exactly when it matters), the metrics, the
thresholds they were judged against, and the verdict.

Only a record of the gate's default checkpoint can discharge the gate, and only when its
verdict is not FAIL. This module is pure: reading and writing files is `store`'s job.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..core.target import KernelTarget

RECORD_SCHEMA = 1
COMMIT_ABBREV = 10


class RecordError(ValueError):
    """A record file that does not hold a valid record; the message names the file."""


class Verdict(enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    #: The checkpoint's BENCH.toml entry has no thresholds yet: the run is a first measurement,
    #: not a pass. It still discharges the gate (a run happened on this code), and says so.
    UNMEASURED = "unmeasured"


@dataclass(frozen=True)
class TargetStamp:
    """One loaded PTX set as its artifact describes it: enough to recompute its closure hash
    from a tree with the same arch, compiler and flags it was built with."""

    target: KernelTarget
    arch: str
    compiler_version: str
    flags: tuple[str, ...]
    closure_hash: str

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target.name, "arch": self.arch,
                "compiler_version": self.compiler_version, "flags": list(self.flags),
                "closure_hash": self.closure_hash}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TargetStamp":
        """Accepts a record's target entry or a PTX-set artifact's header (same field names)."""
        target = data["target"]
        if isinstance(target, Mapping):
            target = KernelTarget(target["hw"], target["model"], target["quant"])
        else:
            target = KernelTarget.parse(str(target))
        flags = data["flags"]
        if isinstance(flags, str) or not all(isinstance(f, str) for f in flags):
            raise ValueError(f"flags of {target} must be a list of strings")
        closure_hash = str(data["closure_hash"])
        if not closure_hash:
            raise ValueError(f"{target} carries an empty closure hash")
        return cls(target, str(data["arch"]), str(data["compiler_version"]), tuple(flags),
                   closure_hash)


@dataclass(frozen=True)
class Record:
    gate: str
    suite: str
    checkpoint: str
    is_default: bool
    model: str
    url: str
    targets: tuple[TargetStamp, ...]
    params: Mapping[str, Any]
    metrics: Mapping[str, float]
    thresholds: Mapping[str, float]
    verdict: Verdict
    failures: tuple[str, ...]
    date: str
    recorded_at: str
    commit: str
    atlas_version: str
    #: perf paths that were uncommitted when the run was made: the commit does not describe
    #: them, so `check` counts them as changed since the record
    dirty_paths: tuple[str, ...] = field(default=())

    @property
    def filename(self) -> str:
        return record_filename(self.date, self.commit, None if self.is_default
                               else self.checkpoint)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RECORD_SCHEMA, "gate": self.gate, "suite": self.suite,
            "checkpoint": self.checkpoint, "default": self.is_default, "model": self.model,
            "url": self.url, "targets": [t.to_json() for t in self.targets],
            "params": dict(self.params), "metrics": dict(self.metrics),
            "thresholds": dict(self.thresholds), "verdict": self.verdict.value,
            "failures": list(self.failures), "date": self.date,
            "recorded_at": self.recorded_at, "commit": self.commit,
            "atlas_version": self.atlas_version, "dirty_paths": list(self.dirty_paths),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str) -> "Record":
        """Parse one record; any missing or malformed field is a RecordError naming `source`."""
        try:
            if data.get("schema") != RECORD_SCHEMA:
                raise ValueError(f"schema {data.get('schema')!r}, expected {RECORD_SCHEMA}")
            targets = tuple(TargetStamp.from_json(t) for t in data["targets"])
            if not targets:
                raise ValueError("no targets: a record must say what it measured")
            return cls(
                gate=str(data["gate"]), suite=str(data["suite"]),
                checkpoint=str(data["checkpoint"]), is_default=_bool(data["default"]),
                model=str(data["model"]), url=str(data["url"]), targets=targets,
                params=dict(data["params"]),
                metrics={k: float(v) for k, v in data["metrics"].items()},
                thresholds={k: float(v) for k, v in data["thresholds"].items()},
                verdict=Verdict(data["verdict"]), failures=tuple(data["failures"]),
                date=_date(data["date"]), recorded_at=_timestamp(data["recorded_at"]),
                commit=_commit(data["commit"]), atlas_version=str(data["atlas_version"]),
                dirty_paths=tuple(str(p) for p in data.get("dirty_paths", ())),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise RecordError(f"{source}: not a valid gate record: {detail}") from None


@dataclass(frozen=True)
class StoredRecord:
    """A record and the file it was read from (the file name is what a reader looks for)."""

    path: str
    record: Record


def record_filename(date: str, commit: str, checkpoint: str | None) -> str:
    stem = f"{date}-{commit[:COMMIT_ABBREV]}"
    if checkpoint is not None:
        stem += "-" + checkpoint_slug(checkpoint)
    return stem + ".json"


def checkpoint_slug(checkpoint: str) -> str:
    """`Qwen/Qwen3-8B` -> `qwen-qwen3-8b`: safe in a file name, still recognisable."""
    slug = re.sub(r"[^a-z0-9.]+", "-", checkpoint.lower()).strip("-.")
    if not slug:
        raise ValueError(f"checkpoint {checkpoint!r} has no usable characters for a file name")
    return slug


def latest_record(records: Iterable[StoredRecord]) -> StoredRecord | None:
    """The record a gate is judged by: the most recent run of its default checkpoint.
    Non-default checkpoints are measured for information and never stand for the gate."""
    defaults = [r for r in records if r.record.is_default]
    if not defaults:
        return None
    return max(defaults, key=lambda r: (r.record.recorded_at, r.path))


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"'default' must be true or false, got {value!r}")
    return value


def _date(value: Any) -> str:
    text = str(value)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise ValueError(f"date must be YYYY-MM-DD, got {text!r}")
    return text


def _timestamp(value: Any) -> str:
    """UTC, second resolution, fixed width: so timestamps order as strings."""
    text = str(value)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", text):
        raise ValueError(f"recorded_at must be YYYY-MM-DDTHH:MM:SSZ, got {text!r}")
    return text


def _commit(value: Any) -> str:
    text = str(value)
    if not re.fullmatch(r"[0-9a-f]{7,64}", text):
        raise ValueError(f"commit must be a hex object id, got {text!r}")
    return text
