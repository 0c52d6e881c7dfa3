"""The GPU engine benchmarks (speculative decoding, prefix cache) run end to end on the host
backend with the tiny fixture, so the GPU session's one call does not fail on a script bug."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny-qwen3"


def run(script: str, out: Path, *args: str, model: Path = FIXTURE) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py")}
    subprocess.run([sys.executable, str(ROOT / "tools" / "gpu" / script), "--model",
                    str(model), "--backend", "host", "--out", str(out), *args],
                   check=True, env=env, capture_output=True, timeout=300)
    return json.loads(out.read_text())


def test_bench_spec_reports_step_costs_and_oracle_passes(tmp_path):
    res = run("bench_spec.py", tmp_path / "spec.json", "--batches", "1,2", "--prompt", "16",
              "--new", "10", "--steps", "2", "--passes", "2", "--max-k", "2", "--k", "2")
    assert set(res["step_cost"]) == {"1", "2"}
    assert {"plain_ms", "k1_ratio", "k2_ratio"} <= set(res["step_cost"]["1"])
    for row in res["throughput"].values():
        assert [p["reference"] for p in row["passes"]] == ["plain", "verifier"] * 2
        # the second rate is the one whose expected draft acceptance is 0.7
        assert [round(p["expected_acceptance"], 3) for p in row["passes"]][2:] == [0.7, 0.7]
        assert row["plain_tok_s"] > 0
        assert all(0 < p["acceptance"] <= 1 and p["same_as_plain"] == 1.0
                   for p in row["passes"])


def test_bench_spec_drafts_with_the_mtp_head(tmp_path):
    res = run("bench_spec.py", tmp_path / "spec.json", "--batches", "1", "--prompt", "16",
              "--new", "6", "--steps", "1", "--passes", "1", "--max-k", "2", "--k", "2",
              "--draft-acceptance", "0", "--mtp",
              model=ROOT / "tests" / "fixtures" / "tiny-qwen3_5-mtp")
    row = res["mtp"]["1"]
    assert row["same_as_plain"] == 1.0 and row["tok_s"] > 0 and 0 <= row["acceptance"] <= 1


def test_bench_prefix_warm_turns_hit_the_whole_prefix(tmp_path):
    res = run("bench_prefix.py", tmp_path / "prefix.json", "--prefix", "96", "--turn", "8",
              "--reps", "1")
    assert res["warm_hit_tokens"] == 96 and len(res["cold_ttft_ms"]) == 1
    assert res["warm_over_cold"] > 0


def test_bench_grammar_decode_times_constrained_and_plain_steps(tmp_path):
    res = run("bench_grammar_decode.py", tmp_path / "grammar.json", "--vocab", "bytes",
              "--batches", "1,2", "--steps", "3", "--warmup", "2", "--prompt-len", "8",
              "--margin", "120")
    assert [r["batch"] for r in res["rows"]] == [1, 2]
    for row in res["rows"]:
        assert row["plain_tok_s"] > 0 and row["constrained_tok_s"] > 0
        assert row["ratio"] == row["constrained_tok_s"] / row["plain_tok_s"]
