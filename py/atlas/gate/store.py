"""The gate's files on disk: records under `.benchmarks/` and the BENCH.toml threshold files.

Thin I/O: reading, parsing through `records`/`bench_toml`, writing. Every decision about the
content lives in those pure modules.
"""

from __future__ import annotations

import json
from pathlib import Path

from atlas.kernels.tree import COMMON_DIR, KERNEL_TOML

from .bench_toml import BenchFile
from .coverage import BENCH_FILENAME, KERNELS_DIR
from .records import Record, RecordError, StoredRecord

BENCHMARKS_DIR = ".benchmarks"



def gate_dir(repo_root: Path, gate: str) -> Path:
    return repo_root / BENCHMARKS_DIR / gate


def read_records(repo_root: Path, gate: str) -> list[StoredRecord]:
    """Every record of one gate. A file that is not a valid record of this gate, or whose
    name is not the one its content implies, is a RecordError: a renamed or hand-edited
    record must not quietly stand for a run."""
    stored: list[StoredRecord] = []
    for path in sorted(gate_dir(repo_root, gate).glob("*.json")):
        rel = path.relative_to(repo_root).as_posix()
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RecordError(f"{rel}: cannot read record: {exc}") from None
        if not isinstance(data, dict):
            raise RecordError(f"{rel}: a record is a JSON object")
        record = Record.from_json(data, rel)
        if record.gate != gate:
            raise RecordError(f"{rel}: records gate {record.gate!r} but sits under {gate}/")
        if record.filename != path.name:
            raise RecordError(f"{rel}: its content names it {record.filename}")
        stored.append(StoredRecord(rel, record))
    return stored


def write_record(repo_root: Path, record: Record) -> Path:
    """Write `record` to its canonical path (replacing a same-day run of the same commit and
    checkpoint) and return that path."""
    path = gate_dir(repo_root, record.gate) / record.filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
    return path


def read_bench_files(repo_root: Path) -> list[BenchFile]:
    """Every file named BENCH.toml under kernels/ (a misplaced one is reported by the schema
    check, not skipped), with the quantizations its model runs in and the leaf running each:
    the model's own `<quant>/` leaf, else the hardware's baseline `common/<quant>/`."""
    files: list[BenchFile] = []
    for path in sorted((repo_root / KERNELS_DIR).rglob(BENCH_FILENAME)):
        own = {p.parent.name for p in path.parent.glob(f"*/{KERNEL_TOML}")}
        common = path.parent.parent / COMMON_DIR
        baseline = {p.parent.name for p in common.glob(f"*/{KERNEL_TOML}")}
        leaves = {q: f"{path.parent.parent.name}/{COMMON_DIR}/{q}" for q in baseline - own}
        files.append(BenchFile(path.relative_to(repo_root).as_posix(), path.read_text(),
                               sorted(own | baseline), leaves))
    return files
