"""tools/gpu/bench_tp.py runs end to end on the host backend (the host collectives and the
reference kernels), so the multi-GPU stages of the GPU session do not fail on a script bug:
EP=2 against one process on synthetic MoE weights, and both all-reduce implementations with
one rank, each call's sum checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(out: Path, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py")}
    subprocess.run([sys.executable, str(ROOT / "tools" / "gpu" / "bench_tp.py"), *args,
                    "--backend", "host", "--out", str(out)],
                   check=True, env=env, capture_output=True, timeout=300)
    return json.loads(out.read_text())


def test_decode_ep2_on_synthetic_weights_matches_one_process(tmp_path: Path) -> None:
    res = run(tmp_path / "ep.json", "decode", "--model",
              str(ROOT / "tests" / "fixtures" / "tiny-qwen3-moe"), "--split", "ep",
              "--synthetic-seed", "1", "--tp", "1,2", "--batch", "2", "--steps", "4",
              "--prompt-len", "12", "--min-cosine", "0.999")
    assert [(r["world"], r["split"]) for r in res["runs"]] == [(1, "ep"), (2, "ep")]
    assert res["tokens_match_ep2"] and res["prefill_logits_cosine_ep2"] > 0.999
    ranks = {r["world"]: r["weights_bytes_per_rank"] for r in res["runs"]}
    assert ranks[2] < ranks[1]  # half the experts per rank


def test_allreduce_both_implementations_with_one_rank(tmp_path: Path) -> None:
    res = run(tmp_path / "ar.json", "allreduce", "--world", "1", "--hidden", "64",
              "--tokens", "1,2", "--iters", "2")
    assert res["all_sums_ok"]
    assert {(r["impl"], r["tokens"]) for r in res["rows"]} == {
        (impl, t) for impl in ("nccl", "oneshot") for t in (1, 2)}
