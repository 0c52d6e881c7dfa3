#!/usr/bin/env python3
"""Speculative decoding benchmark through the engine core (GPU machine; --backend host with a
tiny fixture and small sizes runs it on a CPU as a smoke test).

1. Step cost: with `batch` sequences decoding, the median `EngineCore.step` time of a plain
   decode step and of a verification step carrying K = 1..max-k drafts per sequence (the
   oracle at acceptance 0, so every step verifies exactly K drafts), and their ratio: the
   step-cost table the draft policy reads (engine/speculative.best_num_drafts).
2. Throughput: greedy tok/s of plain decoding, then with the oracle drafter at each
   per-token rate p of `--accept` ("70% acceptance" is p = 0.7: each draft is right with
   probability 0.7 given the ones before it were, so a verification of K = 3 drafts emits
   1 + p + p^2 + p^3 = 2.53 tokens on average; the fraction of drafts accepted is then
   (p + p^2 + p^3) / 3 = 0.51). Each rate runs with fixed K and with the policy (K per
   step from the step-cost table and the measured acceptance, up to max-k). `--prompts N`
   runs each batch's passes over N sets of random prompts, one set after another, and pools
   their tokens, time and acceptance counts: one batch-1 sequence's few hundred tokens
   measure the acceptance to +-0.03 (gpu30: 0.67-0.68 for a nominal 0.7).

The oracle drafts a greedy reference. A verification of up to `runner.invariant_rows` rows
computes each row bit for bit as the plain decode step at its position does
(model/runner.py): there the reference is the plain output, the run reproduces it ("=plain"
1.00) and the measured per-token acceptance is the requested one up to sampling noise
("exact" yes). Beyond it (batch 8 at K = 3 is a 32-row step on other GEMM kernels than an
8-row decode step) the random model's argmax would flip against the plain output at
near-ties and the sequence would leave the reference for good; there the reference is the
greedy output of verification steps of the same shape with every draft rejected, whose
tokens come from the same kernels as the measured pass's ("=ref" says how many sequences
reproduced it; the batch's shape changes near the end, when sequences finish at different
steps). The "model" column gives the speedup the step-cost table predicts at the requested
rate (expected tokens per step / relative step cost). Every pass reports what it measured.

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
from atlas.engine.speculative import (MtpDrafter, OracleDrafter, Speculator,  # noqa: E402
                                      expected_tokens)
from engine_decode import (random_prompts, rejected_drafts, start_decoding,  # noqa: E402
                           stop_all, write_json)


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
            spec = Speculator(rejected_drafts(prompts, steps + 32, runner.vocab_size), k)
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


def measured(*specs: Speculator) -> dict:
    """What a pass's speculators saw, their counts pooled: per-token acceptance (accepted /
    (accepted + rejections), the rate an oracle at p should show), the fraction of drafts
    accepted, tokens emitted per verification step and drafts per verification step."""
    accepted = sum(s.accepted for s in specs)
    rejections = sum(s.rejections for s in specs)
    drafted = sum(s.drafted for s in specs)
    verify_steps = sum(s.verify_steps for s in specs)
    steps = max(verify_steps, 1)
    return {"token_acceptance": accepted / max(accepted + rejections, 1),
            "draft_acceptance": accepted / max(drafted, 1),
            "tokens_per_step": 1 + accepted / steps,
            "drafts_per_step": drafted / steps, "verify_steps": verify_steps}


def _rate(row: dict, key: str) -> str:
    """A measured rate for the table; "-" where the pass verified nothing (the policy chose
    plain decoding throughout)."""
    return f"{row[key]:.2f}" if row["verify_steps"] else "-"


def plain_tok_s(runner, batch: int, prompt_len: int, new: int, rng: np.random.Generator,
                prompts: int = 1) -> float:
    """Greedy tok/s of `batch` sequences decoding `new` tokens without speculation, pooled
    over `prompts` sets of random prompts run one after another."""
    tokens, seconds = 0, 0.0
    for _ in range(prompts):
        _, dt, n = run_to_end(start_decoding(runner, batch, prompt_len, new, rng), batch)
        tokens, seconds = tokens + n, seconds + dt
    return tokens / seconds


def run_sets(runner, b: int, prompt_len: int, new: int, rng: np.random.Generator,
             sets: list[list[list[int]]], speculators: list[Speculator | None]
             ) -> tuple[list[list[int]], float, int]:
    """Each set of `b` prompts decoded to the end in turn (set i under speculators[i]):
    (outputs of every set's sequences, in order; seconds and tokens summed over the sets)."""
    outputs: list[list[int]] = []
    seconds, tokens = 0.0, 0
    for prompts, spec in zip(sets, speculators):
        got, dt, n = run_to_end(start_decoding(runner, b, prompt_len, new, rng, prompts=prompts,
                                               speculator=spec), b)
        outputs += got
        seconds, tokens = seconds + dt, tokens + n
    return outputs, seconds, tokens


def throughput(runner, batches: list[int], k: int, max_k: int, rates: list[float],
               prompt_len: int, new: int, rng: np.random.Generator,
               step_cost: dict[int, list[float]], num_prompts: int = 1) -> dict:
    """Per batch: plain greedy tok/s, then the oracle at each rate with K fixed and with
    the policy, each over `num_prompts` sets of random prompts (run one after another;
    tokens, time and acceptance counts pooled). The oracle's reference is the plain output
    where the K = k verification rows are invariant; elsewhere it is the greedy output of
    verification steps of the same shape (every draft rejected): position q's token then
    comes from the same kernels in the reference and in the measured pass, whichever row of
    its step computes it, so the acceptance is the requested one except where the batch's
    shape changes (sequences ending at different steps, fewer drafts near max_tokens)."""
    out: dict = {}
    for b in batches:
        sets = [random_prompts(runner, b, prompt_len, rng) for _ in range(num_prompts)]
        plain, dt, n = run_sets(runner, b, prompt_len, new, rng, sets, [None] * num_prompts)
        row: dict = {"plain_tok_s": n / dt, "passes": [], "prompts": num_prompts,
                     "reference": "plain" if b * (k + 1) <= runner.invariant_rows
                     else f"K={k} rows"}
        reference = plain
        if row["reference"] != "plain":
            rejecting = [Speculator(rejected_drafts(p, new + k, runner.vocab_size), k)
                         for p in sets]
            reference, _, _ = run_sets(runner, b, prompt_len, new, rng, sets, rejecting)
        seqs = [tuple(p) for prompts in sets for p in prompts]
        known = dict(zip(seqs, reference))
        for rate in rates:
            for policy in (False, True):
                first_seed = len(row["passes"]) * num_prompts
                specs = []
                for i in range(num_prompts):
                    oracle = OracleDrafter(known, rate, runner.vocab_size, seed=first_seed + i)
                    specs.append(Speculator(oracle, max_k, step_cost=step_cost) if policy
                                 else Speculator(oracle, k))
                got, dt, n = run_sets(runner, b, prompt_len, new, rng, sets, specs)
                cost = step_cost.get(b, [])
                row["passes"].append({
                    "token_rate": rate, "k": "policy" if policy else k,
                    "exact": b * ((max_k if policy else k) + 1) <= runner.invariant_rows,
                    "expected_tokens_per_step": expected_tokens(k, rate),
                    "model_speedup": (expected_tokens(k, rate) / cost[k - 1]
                                      if not policy and len(cost) >= k else None),
                    "tok_s": n / dt, "speedup": n / dt / row["plain_tok_s"],
                    "tokens": n, **measured(*specs),
                    "same_as_plain": sum(g == p for g, p in zip(got, plain)) / len(seqs),
                    "same_as_reference": sum(g == r for g, r in zip(got, reference))
                    / len(seqs)})
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
        out[b] = {"tok_s": n / dt, "speedup": n / dt / plain_tok_s[b], **measured(spec),
                  "same_as_plain": sum(g == p for g, p in zip(got, plain)) / b}
    return out


def attention_routes(runner, k: int) -> str:
    """Which attention a batch-1 plain step and a batch-1 verification of k drafts take (the
    A/B of ATLAS_DECODE_ATTN_LONG_MIN_BATCH)."""
    from atlas.runtime.ops import attention_long

    model, d = runner.model, runner.model.dims
    plain = ("tensor-core" if attention_long.uses_long(
        model.kc, d.heads, d.kv_heads, d.head_dim, model.max_blocks * model.block_size)
        else "CUDA-core")
    verify = "verification kernel" if runner.verifies_on_kernel(k + 1) else "rows apart"
    return f"b1 plain {plain}, b1 K={k} verification {verify}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--max-k", type=int, default=4)
    ap.add_argument("--k", type=int, default=3, help="drafts per step of the tok/s runs")
    ap.add_argument("--accept", default="0.7",
                    help="oracle per-token rates, comma-separated: each draft is right with "
                    "this probability given the ones before it were")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per step-cost cell")
    ap.add_argument("--prompts", type=int, default=1,
                    help="sets of random prompts each tok/s pass runs, one after another "
                    "(tokens, time and acceptance counts pooled)")
    ap.add_argument("--mtp", action="store_true",
                    help="also draft with the checkpoint's MTP head (Qwen3.5 / Qwen3-Next)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-fused-baseline", dest="fused_baseline", action="store_false",
                    help="skip the plain tok/s of a runner built without speculation (whose "
                    "batch-1 decode keeps the single-row norm fusions a speculating runner "
                    "switches off for row invariance)")
    ap.add_argument("--step-cost-only", action="store_true",
                    help="measure the step-cost table only (no tok/s passes)")
    ap.add_argument("--synthetic-seed", type=int,
                    help="generate the weights on the device (--model holds only config.json, "
                    "e.g. bench_moe.synthetic_model_dir's): no checkpoint, no tokenizer")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.prompts < 1:
        ap.error("--prompts must be >= 1")
    from atlas.model.load import load_runner

    batches = [int(x) for x in a.batches.split(",")]
    max_k = max(a.max_k, a.k)
    sizes = dict(backend=a.backend, max_batch_size=max(batches),
                 max_seq_len=a.prompt + max(a.steps + 16, a.new) + max_k + 64,
                 max_prefill_tokens=max(2048, max(batches) * (max_k + 1)),
                 gpu_memory_utilization=0.85, fast_load=True, progress=None,
                 synthetic_seed=a.synthetic_seed)
    rng = np.random.default_rng(a.seed)
    rates = [float(x) for x in a.accept.split(",")]
    result: dict = {"model": str(a.model), "date": time.strftime("%Y-%m-%d"),
                    "commit": os.environ.get("ATLAS_COMMIT", "unknown"), "k": a.k,
                    "token_rates": rates, "prompt": a.prompt, "new": a.new,
                    "prompts": a.prompts}
    if a.fused_baseline:   # its memory goes back before the speculating runner loads
        base = load_runner(a.model, **sizes)
        result["fused_plain_tok_s"] = {b: plain_tok_s(base, b, a.prompt, a.new, rng, a.prompts)
                                       for b in batches}
        base.backend.close()
    runner = load_runner(a.model, **sizes, num_draft_tokens=max_k, mtp=a.mtp)
    runner.draft_with_mtp = False   # the plain and oracle runs measure without the head
    result["step_cost"] = step_costs(runner, batches, a.max_k, a.prompt, a.steps, rng)
    step_cost = {b: [row[f"k{k}_ratio"] for k in range(1, a.max_k + 1)]
                 for b, row in result["step_cost"].items()}
    if not a.step_cost_only:
        result["throughput"] = throughput(runner, batches, a.k, a.max_k, rates, a.prompt,
                                          a.new, rng, step_cost, a.prompts)
    result["invariant_rows"] = runner.invariant_rows
    result["attention"] = attention_routes(runner, a.k)
    print(f"\n== {a.model.name}: verification step cost vs a plain decode step "
          f"(attention: {result['attention']})")
    print(f"{'batch':>5} {'plain ms':>9} " + " ".join(f"{f'K={k}':>13}"
                                                    for k in range(1, a.max_k + 1)))
    for b, row in result["step_cost"].items():
        cells = " ".join(f"{row[f'k{k}_ms']:>6.2f} ({row[f'k{k}_ratio']:.2f}x)"
                         for k in range(1, a.max_k + 1))
        print(f"{b:>5} {row['plain_ms']:>9.2f} {cells}")
    if a.step_cost_only:
        write_json(a.out, result)
        return 0
    print(f"\n== oracle drafting a greedy reference (p: per-token rate; exact: every "
          f"verification row computes what plain decode does, <= {runner.invariant_rows} "
          "rows, and the reference is the plain output; else the reference is the output of "
          "verification steps of K rows with every draft rejected; acc/tok: measured "
          "per-token acceptance; tok/step: tokens per verification; model: step-cost "
          "table's speedup at p; =ref / =plain: sequences equal to the reference / plain; "
          f"each pass pooled over {a.prompts} set(s) of random prompts)")
    fused = result.get("fused_plain_tok_s", {})
    if fused:
        print("plain tok/s of a runner without speculation (single-row fusions on): "
              + ", ".join(f"batch {b} {t:.1f}" for b, t in fused.items())
              + "; 'vs fused' divides by it")
    print(f"{'batch':>5} {'p':>5} {'K':>6} {'exact':>5} {'oracle of':>9} {'plain':>9} "
          f"{'spec':>9} {'speedup':>8} {'acc/tok':>7} {'vs fused':>8} {'model':>6} "
          f"{'tok/step':>8} {'tokens':>7} {'=ref':>5} {'=plain':>6}")
    for b, row in result["throughput"].items():
        for p in row["passes"]:
            model = f"{p['model_speedup']:.2f}x" if p["model_speedup"] else "-"
            vs_fused = f"{p['tok_s'] / fused[b]:.2f}x" if b in fused else "-"
            print(f"{b:>5} {p['token_rate']:>5.2f} {p['k']:>6} "
                  f"{'yes' if p['exact'] else 'no':>5} {row['reference']:>9} "
                  f"{row['plain_tok_s']:>9.1f} {p['tok_s']:>9.1f} {p['speedup']:>7.2f}x "
                  f"{_rate(p, 'token_acceptance'):>7} {vs_fused:>8} {model:>6} "
                  f"{_rate(p, 'tokens_per_step'):>8} {p['tokens']:>7} "
                  f"{p['same_as_reference']:>5.2f} {p['same_as_plain']:>6.2f}")
    if a.mtp:
        result["mtp"] = mtp_throughput(runner, batches, a.k, a.prompt, a.new, rng,
                                       {b: row["plain_tok_s"]
                                        for b, row in result["throughput"].items()})
        print(f"\n== MTP head drafting K={a.k} (random head: low acceptance expected)")
        print(f"{'batch':>5} {'spec':>9} {'speedup':>8} {'acc/tok':>7} {'tok/step':>8} "
              f"{'=plain':>7}")
        for b, row in result["mtp"].items():
            print(f"{b:>5} {row['tok_s']:>9.1f} {row['speedup']:>7.2f}x "
                  f"{_rate(row, 'token_acceptance'):>7} {_rate(row, 'tokens_per_step'):>8} "
                  f"{row['same_as_plain']:>7.2f}")
    write_json(a.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
