"""Suite definitions: data files `bench/suites/<id>.toml`, one per suite.

    description = "..."
    workload = "fixed-prompt"          # which workload runs it (atlas.bench.workloads)

    [params.max_tokens]                # one table per parameter, in display order
    type = "int"                       # int, float, str, bool, int_list
    default = 30
    min = 1                            # optional lower bound for numbers
    description = "..."

    [verdict]                          # optional thresholds on the run's metrics
    tool_call_success_rate = { min = 1.0 }

The directory is `$ATLAS_BENCH_SUITES` when set, else `bench/suites` at the repository root
beside this package. A file that does not match its workload's parameters is refused with
its path, so a typo in a suite file cannot run a different benchmark than it describes.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import BenchError
from .params import ParamSpec
from .verdict import Threshold
from .workloads import WORKLOADS

SUITES_DIR_ENV = "ATLAS_BENCH_SUITES"
# Not resolved: under Bazel runfiles this file is a symlink into the source tree.
_REPO_ROOT = Path(__file__).absolute().parents[3]  # <root>/py/atlas/bench/suites.py

_SUITE_KEYS = {"description", "workload", "params", "verdict"}
_PARAM_KEYS = {"type", "default", "description", "min"}


Refuse = Callable[[str], BenchError]


@dataclass(frozen=True)
class SuiteDef:
    id: str
    description: str
    workload: str
    params: tuple[ParamSpec, ...]
    thresholds: tuple[Threshold, ...]
    source: Path


def suites_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    explicit = env.get(SUITES_DIR_ENV)
    return Path(explicit) if explicit else _REPO_ROOT / "bench" / "suites"


def load_suites(directory: Path | None = None) -> dict[str, SuiteDef]:
    """Every suite in the directory, by id (the file name's stem), sorted by id."""
    directory = directory or suites_dir()
    files = sorted(directory.glob("*.toml")) if directory.is_dir() else []
    if not files:
        raise BenchError(f"no suite files (*.toml) in {directory}; set {SUITES_DIR_ENV} to "
                         f"the directory holding them")
    return {path.stem: parse_suite(path.stem, _read(path), path) for path in files}


def find_suite(suite_id: str, directory: Path | None = None) -> SuiteDef:
    suites = load_suites(directory)
    if suite_id not in suites:
        raise BenchError(f"unknown suite {suite_id!r}; suites: {', '.join(suites)}")
    return suites[suite_id]


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BenchError(f"{path}: {exc}") from None


def parse_suite(suite_id: str, raw: Mapping[str, Any], source: Path) -> SuiteDef:
    """Check one suite file's contents against the schema above and its workload."""
    def refuse(why: str) -> BenchError:
        return BenchError(f"{source}: {why}")

    unknown = sorted(set(raw) - _SUITE_KEYS)
    if unknown:
        raise refuse(f"unknown keys {', '.join(unknown)} "
                     f"(allowed: {', '.join(sorted(_SUITE_KEYS))})")
    workload = raw.get("workload")
    if workload not in WORKLOADS:
        raise refuse(f"workload {workload!r} is not one of {', '.join(WORKLOADS)}")
    description = raw.get("description")
    if not isinstance(description, str) or not description.strip():
        raise refuse("needs a description")
    params = tuple(_param(name, spec, refuse)
                   for name, spec in _table(raw, "params", refuse).items())
    declared, wanted = {p.name for p in params}, WORKLOADS[workload].params
    if declared != wanted:
        missing, extra = sorted(wanted - declared), sorted(declared - wanted)
        raise refuse(f"workload {workload} reads parameters {', '.join(sorted(wanted))}"
                     + (f"; missing {', '.join(missing)}" if missing else "")
                     + (f"; not read: {', '.join(extra)}" if extra else ""))
    thresholds = tuple(_threshold(metric, bound, refuse)
                       for metric, bound in _table(raw, "verdict", refuse).items())
    return SuiteDef(suite_id, description.strip(), workload, params, thresholds, source)


def _table(raw: Mapping[str, Any], key: str, refuse: Refuse) -> dict[str, Any]:
    table = raw.get(key, {})
    if not isinstance(table, dict):
        raise refuse(f"[{key}] must be a table")
    return table


def _param(name: str, spec: Any, refuse: Refuse) -> ParamSpec:
    if not isinstance(spec, dict):
        raise refuse(f"[params.{name}] must be a table")
    unknown = sorted(set(spec) - _PARAM_KEYS)
    missing = sorted({"type", "default", "description"} - set(spec))
    if unknown or missing:
        raise refuse(f"[params.{name}] " + "; ".join(
            ([f"unknown keys {', '.join(unknown)}"] if unknown else [])
            + ([f"missing {', '.join(missing)}"] if missing else [])))
    minimum = spec.get("min")
    if minimum is not None and (isinstance(minimum, bool)
                                or not isinstance(minimum, (int, float))):
        raise refuse(f"[params.{name}] min must be a number")
    try:
        return ParamSpec(name, spec["type"], spec["default"], str(spec["description"]), minimum)
    except ValueError as exc:
        raise refuse(f"[params.{name}] default: {exc}") from None


def _threshold(metric: str, bound: Any, refuse: Refuse) -> Threshold:
    if not isinstance(bound, dict) or not bound or set(bound) - {"min", "max"}:
        raise refuse(f"[verdict] {metric} must be {{ min = x }}, {{ max = y }} or both")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in bound.values()):
        raise refuse(f"[verdict] {metric}: bounds must be numbers")
    return Threshold(metric, bound.get("min"), bound.get("max"))
