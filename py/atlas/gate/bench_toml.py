"""BENCH.toml: per-checkpoint gate thresholds, beside the model they describe.

`kernels/<hw>/<model>/BENCH.toml` holds `[[benchmarks]]` entries, each naming its gate, the
quant leaf and the checkpoint it measures. Hardware and model come from the path, so they
cannot disagree with the contents. Each schema rule closes a way a threshold file can lie:

* `status = "unmeasured"` carries no `metrics` table: absence is the TODO, and a guessed
  number a run can clear would report PASS for something nobody measured;
* `status = "measured"` carries a threshold for every metric its gate scores, so the status
  cannot overstate;
* exactly one entry per (gate, hardware) sets `default = true`: no "the only entry wins",
  which a second checkpoint added later would silently move.

Example:

    [[benchmarks]]
    gate = "decode-floor"
    quant = "bf16"
    checkpoint = "Qwen/Qwen3-8B"
    status = "measured"
    default = true
    params = { max_tokens = 256 }     # optional suite-parameter overrides
    [benchmarks.metrics]
    output_tok_s = 140.0

Every violation is reported (not only the first), each naming the file and the entry.
This module is pure: `store.read_bench_files` reads the files.
"""

from __future__ import annotations

import math
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Mapping

from .coverage import BENCH_FILENAME, KERNELS_DIR
from .gates import GATE_NAMES, gate_by_name

MEASURED = "measured"
UNMEASURED = "unmeasured"
_REQUIRED_KEYS = ("gate", "quant", "checkpoint", "status")
_OPTIONAL_KEYS = ("default", "metrics", "params")


@dataclass(frozen=True)
class BenchFile:
    """One BENCH.toml as read from the tree: its path, text, the quantizations its model runs
    in, and for each the leaf whose kernels run it (`hw/model/quant` of the model's own leaf,
    or the hardware's baseline `hw/common/quant`; absent: the model's own)."""

    path: str
    text: str
    quants: Collection[str]
    kernel_leaves: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BenchEntry:
    source: str  # "kernels/hopper/qwen3-8b/BENCH.toml: benchmarks[0]"
    hw: str
    model: str
    quant: str
    gate: str
    checkpoint: str
    measured: bool
    default: bool
    metrics: Mapping[str, float]
    params: Mapping[str, Any]
    target: str = ""  # the leaf whose PTX set a run of this entry measures; "" = hw/model/quant

    @property
    def leaf(self) -> str:
        """`hw/model/quant` of the leaf a run measures (see BenchFile.kernel_leaves)."""
        return self.target or f"{self.hw}/{self.model}/{self.quant}"


@dataclass(frozen=True)
class BenchTree:
    entries: tuple[BenchEntry, ...]
    errors: tuple[str, ...]

    def for_gate(self, gate: str, hw: str) -> list[BenchEntry]:
        return [e for e in self.entries if e.gate == gate and e.hw == hw]

    def default_entry(self, gate: str, hw: str) -> BenchEntry | None:
        defaults = [e for e in self.for_gate(gate, hw) if e.default]
        return defaults[0] if len(defaults) == 1 else None


def validate(files: Iterable[BenchFile]) -> BenchTree:
    """Parse every file and apply every rule, the cross-file default rule included."""
    entries: list[BenchEntry] = []
    errors: list[str] = []
    for bench_file in files:
        file_entries, file_errors = parse_bench_file(bench_file)
        entries += file_entries
        errors += file_errors
    errors += check_defaults(entries)
    return BenchTree(tuple(entries), tuple(errors))


def parse_bench_file(bench_file: BenchFile) -> tuple[list[BenchEntry], list[str]]:
    path = bench_file.path
    parts = path.split("/")
    if len(parts) != 4 or parts[0] != KERNELS_DIR or parts[3] != BENCH_FILENAME:
        return [], [f"{path}: a threshold file lives at kernels/<hw>/<model>/BENCH.toml"]
    hw, model = parts[1], parts[2]
    try:
        doc = tomllib.loads(bench_file.text)
    except tomllib.TOMLDecodeError as exc:
        return [], [f"{path}: not valid TOML: {exc}"]
    unknown = sorted(set(doc) - {"benchmarks"})
    errors = [f"{path}: unknown top-level key(s) {', '.join(unknown)}"] if unknown else []
    raw_entries = doc.get("benchmarks", [])
    if not isinstance(raw_entries, list):
        return [], errors + [f"{path}: 'benchmarks' must be an array of tables"]
    entries: list[BenchEntry] = []
    seen: dict[tuple[str, str, str], str] = {}
    for index, raw in enumerate(raw_entries):
        entry, entry_errors = _parse_entry(path, index, raw, hw, model, bench_file)
        errors += entry_errors
        if entry is None:
            continue
        key = (entry.gate, entry.quant, entry.checkpoint)
        if key in seen:
            errors.append(f"{entry.source}: duplicates {seen[key]} (same gate, quant and "
                          "checkpoint)")
            continue
        seen[key] = entry.source
        entries.append(entry)
    return entries, errors


def check_defaults(entries: Iterable[BenchEntry]) -> list[str]:
    """Exactly one `default = true` per (gate, hardware) that has any entry at all."""
    groups: dict[tuple[str, str], list[BenchEntry]] = defaultdict(list)
    for entry in entries:
        groups[(entry.gate, entry.hw)].append(entry)
    errors: list[str] = []
    for (gate, hw), group in sorted(groups.items()):
        defaults = [e.source for e in group if e.default]
        if not defaults:
            listed = ", ".join(e.source for e in group)
            errors.append(f"gate {gate} on {hw}: no entry sets default = true ({listed})")
        elif len(defaults) > 1:
            errors.append(f"gate {gate} on {hw}: {len(defaults)} entries set default = true "
                          f"({', '.join(defaults)}); exactly one may")
    return errors


def _parse_entry(path: str, index: int, raw: Any, hw: str, model: str,
                 bench_file: BenchFile) -> tuple[BenchEntry | None, list[str]]:
    quants = bench_file.quants
    where = f"{path}: benchmarks[{index}]"
    if not isinstance(raw, dict):
        return None, [f"{where}: must be a table"]
    if all(isinstance(raw.get(k), str) for k in ("gate", "quant", "checkpoint")):
        where += f" ({raw['gate']}, {raw['quant']}, {raw['checkpoint']})"
    errors: list[str] = []
    unknown = sorted(set(raw) - set(_REQUIRED_KEYS) - set(_OPTIONAL_KEYS))
    if unknown:
        errors.append(f"{where}: unknown key(s) {', '.join(unknown)}")
    for key in _REQUIRED_KEYS:
        if not isinstance(raw.get(key), str) or not raw[key]:
            errors.append(f"{where}: '{key}' must be a non-empty string")
    if errors:
        return None, errors
    gate, quant, status = raw["gate"], raw["quant"], raw["status"]
    if gate not in GATE_NAMES:
        errors.append(f"{where}: unknown gate {gate!r}; gates: {', '.join(GATE_NAMES)}")
    if quant not in quants:
        known = ", ".join(sorted(quants)) or "none"
        errors.append(f"{where}: no quant leaf kernels/{hw}/{model}/{quant}/ nor baseline "
                      f"kernels/{hw}/common/{quant}/ runs this model (runs in: {known})")
    if status not in (MEASURED, UNMEASURED):
        errors.append(f"{where}: status must be {MEASURED!r} or {UNMEASURED!r}, "
                      f"got {status!r}")
    default = raw.get("default", False)
    if not isinstance(default, bool):
        errors.append(f"{where}: 'default' must be true or false")
    params = raw.get("params", {})
    if not isinstance(params, dict):
        errors.append(f"{where}: 'params' must be a table")
    metrics: dict[str, float] = {}
    if status == UNMEASURED and "metrics" in raw:
        errors.append(f"{where}: an unmeasured entry carries no metrics (absence is the TODO; "
                      "a guessed threshold would report PASS for something nobody measured)")
    elif status == MEASURED and gate in GATE_NAMES:
        metrics, metric_errors = _parse_metrics(where, gate, raw.get("metrics"))
        errors += metric_errors
    if errors:
        return None, errors
    return BenchEntry(where, hw, model, quant, gate, raw["checkpoint"], status == MEASURED,
                      default, metrics, params, bench_file.kernel_leaves.get(quant, "")), []


def _parse_metrics(where: str, gate: str, raw: Any) -> tuple[dict[str, float], list[str]]:
    scored = gate_by_name(gate).metrics
    if not isinstance(raw, dict) or not raw:
        return {}, [f"{where}: a measured entry must carry a metrics table with "
                    f"{', '.join(scored)}"]
    errors: list[str] = []
    unknown = sorted(set(raw) - set(scored))
    if unknown:
        errors.append(f"{where}: gate {gate} does not score {', '.join(unknown)} "
                      f"(it scores {', '.join(scored)})")
    missing = [m for m in scored if m not in raw]
    if missing:
        errors.append(f"{where}: measured entry has no threshold for {', '.join(missing)}")
    metrics: dict[str, float] = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            errors.append(f"{where}: metric {name} must be a finite number, got {value!r}")
        else:
            metrics[name] = float(value)
    return metrics, errors
