"""tools/profile_host_step.py (host work per engine step by phase) runs on the mock backend,
and every phase it names still matches a method the step calls: a renamed method would
silently time as zero."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_phase_is_timed_in_both_modes():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py")}
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "profile_host_step.py"),
                          "--batches", "1,3", "--steps", "6", "--tokenizer", "/nonexistent"],
                         check=True, env=env, capture_output=True, text=True, timeout=300).stdout
    lines = out.splitlines()
    header = lines[1].split()
    rows = [dict(zip(header, line.split())) for line in lines[2:]]
    assert [(r["mode"], r["batch"]) for r in rows] == [("sync", "1"), ("sync", "3"),
                                                       ("async", "1"), ("async", "3")]
    for r in rows:
        assert all(float(r[p]) > 0 for p in ("total", "schedule", "pack", "upload", "commit"))
        assert float(r["launch"]) >= 0 and float(r["readback"]) >= 0
        assert r["detok"] == "nan"   # no tokenizer given
