#!/usr/bin/env python3
"""Prefix-cache benchmark through the engine core (GPU machine; --backend host with a tiny
fixture and small sizes runs it on a CPU as a smoke test).

An agent-style turn: a long shared prefix (default 8,192 tokens) plus a short new turn
(default 64 tokens). TTFT is the wall time from `add` to the step that emits the request's
first token, `EngineCore.step` after step, as the server runs it. Cold: a fresh prefix
nobody computed (median of --reps runs, each with its own random prefix). Warm: the same
prefix again with a different new turn (median of --reps turns after one cold turn). The
issue's bar is warm <= 10% of cold. Also prints the prefix cache's hit counters, and on a
hybrid model its recurrent-state snapshot counters (a hit restores the state snapshotted at
the last 256-token checkpoint of the prefix).

Prints a table and writes JSON. A benchmark, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from atlas.core.sampling import GREEDY  # noqa: E402
from atlas.engine.core import EngineCore  # noqa: E402
from atlas.engine.request import EngineRequest  # noqa: E402
from engine_decode import write_json  # noqa: E402


def ttft_s(core: EngineCore, seq_id: int, ids: list[int]) -> float:
    """Seconds until the request's first token; the request then runs to its end (1 token)."""
    t0 = time.perf_counter()
    core.add(seq_id, EngineRequest(ids, GREEDY, 1))
    first = None
    while core.has_work:
        report = core.step()
        if first is None and any(o.seq_id == seq_id and o.new_token_ids
                                 for o in report.outputs):
            first = time.perf_counter() - t0
    if first is None:
        raise RuntimeError(f"request {seq_id} produced no token")
    return first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--prefix", type=int, default=8192)
    ap.add_argument("--turn", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from atlas.model.load import load_runner

    total = a.prefix + a.turn
    chunk = -(-total // 64) * 64   # the whole prompt in one prefill step
    runner = load_runner(a.model, backend=a.backend, max_batch_size=1,
                         max_seq_len=total + 64, max_prefill_tokens=chunk,
                         gpu_memory_utilization=0.85, fast_load=True, progress=None)
    rng = np.random.default_rng(a.seed)

    def ids(n: int) -> list[int]:
        return rng.integers(100, runner.vocab_size - 100, n).tolist()

    core = EngineCore.build(runner, max_prefill_tokens=chunk, max_num_seqs=1)
    ttft_s(core, 0, ids(total))   # warm-up: kernels, allocator
    cold = [ttft_s(core, 1 + i, ids(total)) for i in range(a.reps)]
    prefix = ids(a.prefix)
    ttft_s(core, 100, prefix + ids(a.turn))   # computes and caches the prefix
    before = core.scheduler.blocks.prefix_cache_stats()
    warm = [ttft_s(core, 101 + i, prefix + ids(a.turn)) for i in range(a.reps)]
    stats = core.scheduler.blocks.prefix_cache_stats()
    assert before is not None and stats is not None
    hit = (stats.hit_tokens - before.hit_tokens) / a.reps
    result = {"model": str(a.model), "date": time.strftime("%Y-%m-%d"),
              "commit": os.environ.get("ATLAS_COMMIT", "unknown"), "prefix": a.prefix,
              "turn": a.turn, "cold_ttft_ms": [1e3 * t for t in cold],
              "warm_ttft_ms": [1e3 * t for t in warm],
              "warm_over_cold": statistics.median(warm) / statistics.median(cold),
              "warm_hit_tokens": hit, "hit_rate": stats.hit_rate,
              "cached_blocks": stats.cached_blocks, "evictions": stats.evictions,
              "state_snapshots": {k: v for k, v in core.counters().items()
                                  if k.startswith("prefix_cache_state_")}}
    print(f"\n== {a.model.name}: {a.prefix}-token shared prefix + {a.turn}-token turn")
    print(f"cold TTFT {statistics.median(cold) * 1e3:9.1f} ms  (median of {a.reps})")
    print(f"warm TTFT {statistics.median(warm) * 1e3:9.1f} ms  = "
          f"{result['warm_over_cold']:.1%} of cold (bar: <= 10%)")
    print(f"warm hit {hit:.0f} of {total} prompt tokens; cache hit rate {stats.hit_rate:.1%}, "
          f"{stats.cached_blocks} blocks cached, {stats.evictions} evictions")
    if result["state_snapshots"]:   # a hybrid model: hits restore recurrent-state snapshots
        print("state snapshots: " + ", ".join(f"{k.removeprefix('prefix_cache_state_')} {v:g}"
                                              for k, v in result["state_snapshots"].items()))
    write_json(a.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
