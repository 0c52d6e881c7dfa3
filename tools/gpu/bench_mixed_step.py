#!/usr/bin/env python3
"""What a step that prefills beside decoding streams costs them (GPU machine; --backend host
with a tiny fixture and small sizes runs it on a CPU as a smoke test): the inter-token
latency each mixed-step budget (`atlas serve --max-mixed-step-tokens`) buys.

`--batch` sequences decode at a `--context`-token history (the server's default 4,096-token
sequence limit, so decode attention is split as the server splits it). Then, for each budget
C of --budgets, `--reps` prompts of `--prompt` tokens join one at a time and prefill in steps
of C tokens: C - batch of the prompt beside the batch's decode tokens. Per budget: the
median wall time of those full mixed steps and of the decode-only steps before them
(`EngineCore.step` with async scheduling off, so a step's wall is its host plus GPU time,
which every decoding stream waits between two tokens), and the prompt rate the difference
implies, (C - batch) / (mixed - decode).

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
from engine_decode import start_decoding, stop_all, write_json  # noqa: E402


def measure_budget(core: EngineCore, budget: int, batch: int, prompt_len: int, reps: int,
                   rng: np.random.Generator, vocab: int, first_id: int) -> dict:
    """Decode-only and mixed step walls at one budget (the batch keeps decoding)."""
    core.scheduler.mixed_step_budget = budget   # the budget under test
    decode = []
    for _ in range(10):
        t0 = time.perf_counter()
        core.step()
        decode.append((time.perf_counter() - t0) * 1e3)
    mixed = []
    chunk = budget - batch
    for r in range(reps):
        seq_id = first_id + r
        ids = rng.integers(100, vocab - 100, prompt_len).tolist()
        core.add(seq_id, EngineRequest(ids, GREEDY, 1))   # ends with its first token
        joined = core.scheduler.waiting[-1]
        assert joined.seq_id == seq_id
        while joined.num_computed < prompt_len:
            before = joined.num_computed
            t0 = time.perf_counter()
            core.step()
            wall = (time.perf_counter() - t0) * 1e3
            if joined.num_computed - before == chunk:
                mixed.append(wall)   # a full step, not the prompt's remainder
    if not mixed:
        raise RuntimeError(f"budget {budget}: no full mixed step (prompt {prompt_len} tokens "
                           f"is too short for chunks of {chunk})")
    dec, mix = statistics.median(decode), statistics.median(mixed)
    return {"budget": budget, "prompt_tokens_per_step": chunk, "decode_ms": dec,
            "mixed_ms": mix, "mixed_steps": len(mixed), "mixed_max_ms": max(mixed),
            "prompt_tok_s": chunk / (mix - dec) * 1e3 if mix > dec else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--max-seq-len", type=int, default=4096)
    ap.add_argument("--budgets", default="512,768,1024,1536,2048")
    ap.add_argument("--prompt", type=int, default=4000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from atlas.model.load import load_runner

    budgets = [int(b) for b in a.budgets.split(",")]
    if min(budgets) <= a.batch:
        raise SystemExit(f"every budget must exceed --batch {a.batch} (its decode tokens)")
    runner = load_runner(a.model, backend=a.backend, max_batch_size=a.batch + 1,
                         max_seq_len=a.max_seq_len, max_prefill_tokens=max(budgets),
                         gpu_memory_utilization=0.85, fast_load=True, progress=None)
    rng = np.random.default_rng(a.seed)
    steps = len(budgets) * (10 + a.reps * (a.prompt // (min(budgets) - a.batch) + 3))
    core = start_decoding(runner, a.batch, a.context, steps + 16, rng,
                          async_scheduling=False, max_num_seqs=a.batch + 1)
    rows = [measure_budget(core, b, a.batch, a.prompt, a.reps, rng, runner.vocab_size,
                           a.batch + 1000 * i) for i, b in enumerate(budgets)]
    stop_all(core)
    print(f"\n== {a.model.name}: {a.batch} decoding streams at ~{a.context} tokens, "
          f"{a.prompt}-token prompts joining")
    print(f"{'budget':>7} {'prompt/step':>11} {'decode ms':>10} {'mixed ms':>9} "
          f"{'max ms':>8} {'prompt tok/s':>13}")
    for r in rows:
        rate = f"{r['prompt_tok_s']:13,.0f}" if r["prompt_tok_s"] else f"{'-':>13}"
        print(f"{r['budget']:>7} {r['prompt_tokens_per_step']:>11} {r['decode_ms']:>10.2f} "
              f"{r['mixed_ms']:>9.2f} {r['mixed_max_ms']:>8.2f} {rate}")
    write_json(a.out, {"model": str(a.model), "date": time.strftime("%Y-%m-%d"),
                       "commit": os.environ.get("ATLAS_COMMIT", "unknown"),
                       "batch": a.batch, "context": a.context, "max_seq_len": a.max_seq_len,
                       "prompt": a.prompt, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
