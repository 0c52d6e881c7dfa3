"""The run store: every run as one JSON file, `$ATLAS_HOME/runs/<suite>/<run-id>.json`
(`~/.atlas` when ATLAS_HOME is unset).

Run ids are `run-<nanoseconds since the epoch>`, so sorting ids sorts runs by start time and
a run id alone finds its file. Files are written whole to a temporary name and renamed, so
a reader never sees half a run.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Mapping

import orjson

from .errors import BenchError

HOME_ENV = "ATLAS_HOME"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a suite or run id: one path component


def atlas_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    explicit = env.get(HOME_ENV)
    return Path(explicit) if explicit else Path.home() / ".atlas"


def new_run_id() -> str:
    return f"run-{time.time_ns()}"


class RunStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else atlas_home() / "runs"

    def save(self, run: Mapping[str, Any]) -> Path:
        """Write `run` (it carries `suite` and `run_id`); returns the file written."""
        if not (_NAME.match(run["suite"]) and _NAME.match(run["run_id"])):
            raise BenchError(f"cannot store run {run['run_id']!r} of suite {run['suite']!r}")
        directory = self.root / run["suite"]
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{run['run_id']}.json"
        partial = path.with_suffix(".json.partial")
        partial.write_bytes(orjson.dumps(run, option=orjson.OPT_INDENT_2))
        partial.replace(path)
        return path

    def load(self, run_id: str) -> dict[str, Any]:
        if not _NAME.match(run_id):
            raise BenchError(f"{run_id!r} is not a run id (run-<digits>)")
        matches = sorted(self.root.glob(f"*/{run_id}.json")) if self.root.is_dir() else []
        if not matches:
            raise BenchError(f"no stored run {run_id!r} under {self.root}")
        return _read(matches[0])

    def history(self, suite: str | None = None, limit: int | None = None
                ) -> list[dict[str, Any]]:
        """Stored runs, newest first, optionally of one suite only."""
        if suite is not None and not _NAME.match(suite):
            raise BenchError(f"{suite!r} is not a suite id")
        if not self.root.is_dir():
            return []
        pattern = f"{suite}/run-*.json" if suite else "*/run-*.json"
        paths = sorted(self.root.glob(pattern), key=lambda p: _id_time(p.stem), reverse=True)
        return [_read(p) for p in paths[:limit]]


def _id_time(run_id: str) -> int:
    digits = run_id.removeprefix("run-")
    return int(digits) if digits.isdigit() else 0


def _read(path: Path) -> dict[str, Any]:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise BenchError(f"cannot read stored run {path}: {exc}") from None
