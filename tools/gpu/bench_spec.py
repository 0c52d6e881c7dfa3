#!/usr/bin/env python3
"""Speculative decoding benchmark through the engine core (GPU machine; --backend host with a
tiny fixture and small sizes runs it on a CPU as a smoke test).

1. Step cost: with `batch` sequences decoding, the median `EngineCore.step` time of a plain
   decode step and of a verification step carrying K = 1..max-k drafts per sequence (the
   oracle at acceptance 0, so every step verifies exactly K drafts), and their ratio.
2. Throughput: greedy tok/s of plain decoding, and with the oracle drafter (K drafts at the
   per-token rate `--accept`, and at the rate whose expected fraction of drafts accepted is
   `--draft-acceptance`: with independent per-token errors a rate p accepts (p + ... + p^K)
   / K of the drafts, 0.51 at p = 0.7 and K = 3). A verification step is a decode step of
   B * (K + 1) rows in its own captured graph; its row i computes what a decode step at
   that position does only as far as the kernels are independent of the row count (the
   GEMMs route by rows, the decode attention's split count follows the bucket on CUDA), so
   the random model's argmax may flip at a near-tie and leave a fixed reference wrong for
   the rest of the run. Pass 1's oracle therefore drafts the plain run's greedy output
   ("plain" reference: the acceptance that reference really gets), and each later pass
   drafts the previous pass's output ("verifier" reference: the verifier's own greedy
   path, whose acceptance is the expected one). Every pass reports its measured acceptance
   and whether it matched plain greedy.

Prints tables and writes JSON. A benchmark, not a test: it asserts nothing about speed.
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

from atlas.engine.core import EngineCore  # noqa: E402
from atlas.engine.speculative import MtpDrafter, OracleDrafter, Speculator  # noqa: E402
from engine_decode import random_prompts, start_decoding, stop_all, write_json  # noqa: E402


def median_step_s(core: EngineCore, steps: int) -> float:
    for _ in range(2):
        core.step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        core.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def step_costs(runner, batches: list[int], max_k: int, prompt_len: int, steps: int,
               rng: np.random.Generator) -> dict:
    out: dict = {}
    for b in batches:
        prompts = random_prompts(runner, b, prompt_len, rng)
        core = start_decoding(runner, b, prompt_len, steps + 16, rng, prompts=prompts)
        plain = median_step_s(core, steps)
        stop_all(core)
        row = {"plain_ms": 1e3 * plain}
        for k in range(1, max_k + 1):
            junk = {tuple(p): [0] * (steps + 32) for p in prompts}   # always rejected
            spec = Speculator(OracleDrafter(junk, 0.0, runner.vocab_size), k)
            core = start_decoding(runner, b, prompt_len, steps + 16, rng, prompts=prompts,
                                  speculator=spec)
            t = median_step_s(core, steps)
            stop_all(core)
            row[f"k{k}_ms"] = 1e3 * t
            row[f"k{k}_ratio"] = t / plain
        out[b] = row
    return out


def run_to_end(core: EngineCore, num: int) -> tuple[list[list[int]], float, int]:
    """Step until every sequence finished; (outputs by sequence, seconds, tokens counted
    after the prefill phase)."""
    outputs: list[list[int]] = [list(s.output_ids) for s in
                                sorted(core.scheduler.running, key=lambda s: s.seq_id)]
    if len(outputs) != num:
        raise RuntimeError("some sequences finished or waited during the prefill phase")
    generated = 0
    t0 = time.perf_counter()
    while core.has_work:
        report = core.step()
        for o in report.outputs:
            outputs[o.seq_id] += o.new_token_ids
            generated += len(o.new_token_ids)
    return outputs, time.perf_counter() - t0, generated


def expected_acceptance(token_rate: float, k: int) -> float:
    """Fraction of K drafts accepted when each is right with probability `token_rate`
    independently: drafts count until the first wrong one, E = (p + p^2 + ... + p^K) / K."""
    return sum(token_rate ** i for i in range(1, k + 1)) / k


def token_rate_for(acceptance: float, k: int) -> float:
    """The oracle's per-token rate whose expected draft acceptance is `acceptance`."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_acceptance(mid, k) < acceptance else (lo, mid)
    return (lo + hi) / 2


def throughput(runner, batches: list[int], k: int, rates: list[float], prompt_len: int,
               new: int, passes: int, rng: np.random.Generator) -> dict:
    out: dict = {}
    for b in batches:
        prompts = random_prompts(runner, b, prompt_len, rng)
        core = start_decoding(runner, b, prompt_len, new, rng, prompts=prompts)
        plain, dt, n = run_to_end(core, b)
        row: dict = {"plain_tok_s": n / dt, "passes": []}
        for rate in rates:
            reference = plain
            for i in range(passes):
                oracle = OracleDrafter({tuple(p): r for p, r in zip(prompts, reference)}, rate,
                                       runner.vocab_size, seed=i)
                spec = Speculator(oracle, k)
                core = start_decoding(runner, b, prompt_len, new, rng, prompts=prompts,
                                      speculator=spec)
                got, dt, n = run_to_end(core, b)
                row["passes"].append({
                    "token_rate": rate, "expected_acceptance": expected_acceptance(rate, k),
                    "reference": "plain" if i == 0 else "verifier",
                    "tok_s": n / dt, "speedup": n / dt / row["plain_tok_s"],
                    "acceptance": spec.accepted / max(spec.drafted, 1),
                    "mean_accepted_length": spec.mean_accepted_length,
                    "same_as_plain": sum(g == p for g, p in zip(got, plain)) / b})
                reference = got
        out[b] = row
    return out


def mtp_throughput(runner, batches: list[int], k: int, prompt_len: int, new: int,
                   rng: np.random.Generator, plain_tok_s: dict) -> dict:
    """tok/s and acceptance with the checkpoint's own MTP head drafting (a random head on
    random weights accepts little: this measures the drafting cost honestly)."""
    out: dict = {}
    for b in batches:
        prompts = random_prompts(runner, b, prompt_len, rng)
        runner.draft_with_mtp = False
        plain, _, _ = run_to_end(start_decoding(runner, b, prompt_len, new, rng,
                                                prompts=prompts), b)
        runner.draft_with_mtp = True
        spec = Speculator(MtpDrafter(runner.mtp_drafts), k)
        core = start_decoding(runner, b, prompt_len, new, rng, prompts=prompts,
                              speculator=spec)
        got, dt, n = run_to_end(core, b)
        runner.draft_with_mtp = False
        out[b] = {"tok_s": n / dt, "speedup": n / dt / plain_tok_s[b],
                  "acceptance": spec.accepted / max(spec.drafted, 1),
                  "mean_accepted_length": spec.mean_accepted_length,
                  "same_as_plain": sum(g == p for g, p in zip(got, plain)) / b}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--max-k", type=int, default=4)
    ap.add_argument("--k", type=int, default=3, help="drafts per step of the tok/s runs")
    ap.add_argument("--accept", type=float, default=0.7,
                    help="oracle per-token rate: each draft is right with this probability")
    ap.add_argument("--draft-acceptance", type=float, default=0.7,
                    help="also run the per-token rate whose expected fraction of drafts "
                    "accepted is this (0 to skip)")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per step-cost cell")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--mtp", action="store_true",
                    help="also draft with the checkpoint's MTP head (Qwen3.5 / Qwen3-Next)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from atlas.model.load import load_runner

    batches = [int(x) for x in a.batches.split(",")]
    max_k = max(a.max_k, a.k)
    runner = load_runner(a.model, backend=a.backend, max_batch_size=max(batches),
                         max_seq_len=a.prompt + max(a.steps + 16, a.new) + max_k + 64,
                         max_prefill_tokens=max(2048, max(batches) * (max_k + 1)),
                         gpu_memory_utilization=0.85, fast_load=True, progress=None,
                         num_draft_tokens=max_k, mtp=a.mtp)
    runner.draft_with_mtp = False   # the plain and oracle runs measure without the head
    rng = np.random.default_rng(a.seed)
    rates = [a.accept] + ([token_rate_for(a.draft_acceptance, a.k)] if a.draft_acceptance
                          else [])
    result: dict = {"model": str(a.model), "date": time.strftime("%Y-%m-%d"),
                    "commit": os.environ.get("ATLAS_COMMIT", "unknown"), "k": a.k,
                    "token_rates": rates, "prompt": a.prompt, "new": a.new}
    result["step_cost"] = step_costs(runner, batches, a.max_k, a.prompt, a.steps, rng)
    result["throughput"] = throughput(runner, batches, a.k, rates, a.prompt, a.new,
                                      a.passes, rng)
    print(f"\n== {a.model.name}: verification step cost vs a plain decode step")
    print(f"{'batch':>5} {'plain ms':>9} " + " ".join(f"{f'K={k}':>13}"
                                                    for k in range(1, a.max_k + 1)))
    for b, row in result["step_cost"].items():
        cells = " ".join(f"{row[f'k{k}_ms']:>6.2f} ({row[f'k{k}_ratio']:.2f}x)"
                         for k in range(1, a.max_k + 1))
        print(f"{b:>5} {row['plain_ms']:>9.2f} {cells}")
    print(f"\n== oracle K={a.k}: tok/s per pass (p: per-token rate, exp: the fraction of "
          "drafts it should accept, accept: measured)")
    print(f"{'batch':>5} {'p':>5} {'exp':>5} {'oracle of':>9} {'plain':>9} {'spec':>9} "
          f"{'speedup':>8} {'accept':>7} {'acc/step':>8} {'=plain':>7}")
    for b, row in result["throughput"].items():
        for p in row["passes"]:
            print(f"{b:>5} {p['token_rate']:>5.2f} {p['expected_acceptance']:>5.2f} "
                  f"{p['reference']:>9} {row['plain_tok_s']:>9.1f} {p['tok_s']:>9.1f} "
                  f"{p['speedup']:>7.2f}x "
                  f"{p['acceptance']:>7.2f} {p['mean_accepted_length']:>8.2f} "
                  f"{p['same_as_plain']:>7.2f}")
    if a.mtp:
        result["mtp"] = mtp_throughput(runner, batches, a.k, a.prompt, a.new, rng,
                                       {b: row["plain_tok_s"]
                                        for b, row in result["throughput"].items()})
        print(f"\n== MTP head drafting K={a.k} (random head: low acceptance expected)")
        print(f"{'batch':>5} {'spec':>9} {'speedup':>8} {'accept':>7} {'acc/step':>8} "
              f"{'=plain':>7}")
        for b, row in result["mtp"].items():
            print(f"{b:>5} {row['tok_s']:>9.1f} {row['speedup']:>7.2f}x "
                  f"{row['acceptance']:>7.2f} {row['mean_accepted_length']:>8.2f} "
                  f"{row['same_as_plain']:>7.2f}")
    write_json(a.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
