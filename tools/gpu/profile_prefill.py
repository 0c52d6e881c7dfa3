#!/usr/bin/env python3
"""Where a prefill step's time goes (GPU machine): per-kernel times of one prompt of
`--tokens` tokens prefilled in one engine step, and the step's wall time.

Prefill runs eagerly (no CUDA graph), so the kernel rows are each launch's own time when
ATLAS_PDL=0 and the rows add up to the GPU busy time; the wall time adds the host's launch
work. The hybrid flagship's question is which of its layers' kernels a long prompt pays
for: the chunked delta rule, the projections' GEMMs, the MoE grouped GEMMs or attention.
`--cached N`: every prompt starts with the same N tokens, prefilled once before the timed
steps, so each step computes only its own `--tokens` past a prefix-cache hit: the request
the ttft-warm gate times (a ~2,000-token system prompt cached, a short question after it).
Prints a table; writes JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from profile_decode import kernel_rows, print_rows  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--cached", type=int, default=0,
                    help="a shared prefix of this many tokens before each prompt, cached first")
    ap.add_argument("--synthetic-seed", type=int,
                    help="generate the weights on the device (--model holds only config.json)")
    ap.add_argument("--backend", default="cuda", help="cuda, or host for a CPU smoke run")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()

    from torch.profiler import profile, supported_activities

    from atlas.core.sampling import GREEDY
    from atlas.engine.core import EngineCore
    from atlas.engine.request import EngineRequest
    from atlas.model.load import load_runner

    longest = a.cached + a.tokens  # the warm-up's prompt, prefix included, in one step
    runner = load_runner(a.model, backend=a.backend, max_seq_len=a.cached + a.tokens + 16,
                         max_batch_size=1, max_prefill_tokens=longest,
                         gpu_memory_utilization=0.85, synthetic_seed=a.synthetic_seed)
    core = EngineCore.build(runner, max_prefill_tokens=longest, max_num_seqs=1)
    rng = np.random.default_rng(0)
    requests = iter(range(1_000_000))
    prefix = rng.integers(100, runner.vocab_size - 100, a.cached).tolist()

    def prefill(tokens: int = a.tokens) -> float:
        """One fresh prompt (after the shared prefix) through one forward (it samples one
        token and finishes; with asynchronous scheduling the token is collected by the step
        after the forward)."""
        ids = prefix + rng.integers(100, runner.vocab_size - 100, tokens).tolist()
        core.add(next(requests), EngineRequest(ids, GREEDY, 1))
        t0 = time.perf_counter()
        steps = 0
        while core.has_work:
            core.step()
            steps += 1
            if steps > 2:
                raise RuntimeError(f"a {len(ids)}-token prompt took more than one forward")
        return time.perf_counter() - t0

    prefill()  # warm: kernel loading, first-touch allocations, the prefix into the cache
    wall_ms = statistics.median(prefill() for _ in range(3)) * 1e3
    steps = 2
    # the CUDA kernel records (kernel_rows keeps only those); CPU where torch has no CUDA
    with profile(activities=supported_activities()) as prof:
        for _ in range(steps):
            prefill()
    rows, kernel_total = kernel_rows(prof, steps)
    counters = core.counters()
    hit = counters.get("prefix_cache_hits_total", 0) / max(counters.get(
        "prefix_cache_queries_total", 0), 1)
    past = f" past {a.cached} cached (hits {hit:.0%} of prompt tokens)" if a.cached else ""
    print(f"\n== {a.model.name} prefill of {a.tokens} tokens{past} (one step)")
    print(f"wall per step {wall_ms:.2f} ms ({a.tokens / wall_ms * 1e3:.0f} tok/s) | kernel busy "
          f"{kernel_total / 1e3:.2f} ms")
    print_rows(rows, kernel_total)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"model": a.model.name, "tokens": a.tokens,
                                     "cached": a.cached, "wall_ms": wall_ms,
                                     "kernel_busy_ms": kernel_total / 1e3,
                                     "kernels": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
