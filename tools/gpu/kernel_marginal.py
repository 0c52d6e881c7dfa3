#!/usr/bin/env python3
"""What each kernel family costs a decode step where it runs (GPU machine): the graph of
one decode step is captured again with every launch of one family doubled (or left out),
and the change in GPU time per step is that family's marginal cost.

Why: with programmatic dependent launch (the default) consecutive kernels overlap, so the
per-kernel rows of profile_decode.py include each kernel's wait on the one before and do not
add up to the step, while ATLAS_PDL=0 gives rows that add up for a step that is not the one
served. A doubled launch runs after its twin under the same PDL rules, so (doubled - plain)
is the time the family adds to the critical path of the served step; (plain - skipped) the
same from the other side (a skipped kernel also takes its latency out of the next one's
wait). Kernels that update the residual stream in place change the values when doubled or
skipped: the timing of the weight streams does not depend on them (synthetic weights).

    python3 tools/gpu/kernel_marginal.py --model cfg/qwen3-30b-a3b --synthetic-seed 0 \\
        --batch 1 --context 512 --family moe_gate_up --family decode_attn ...

Variants are timed round-robin (--rounds x 100 replays each) so drift hits them alike;
prints the plain step, then per family and mode the step and its difference, median over
rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from engine_decode import random_prompts, start_decoding  # noqa: E402


def capture_variant(runner, bucket: int, family: str | None, copies: int):
    """The decode graph of `bucket` rows with every launch whose kernel name contains
    `family` issued `copies` times (0: left out); None: the plain graph."""
    dev = runner.backend
    plain_launch = dev.launch

    def launch(handle, grid, block, shared_mem, stream, args):
        n = copies if family is not None and family in handle.func else 1
        for _ in range(n):
            plain_launch(handle, grid, block, shared_mem, stream, args)

    dev.launch = launch
    try:
        runner._capture(bucket, False)
    finally:
        del dev.launch  # the instance attribute: the class's method again
    return runner.graphs[bucket]


def time_graph(runner, graph, reps: int) -> float:
    """GPU ms per replay of `graph`, `reps` back-to-back replays between two events."""
    dev, stream = runner.backend, runner.stream
    e0, e1 = dev.create_event(), dev.create_event()
    dev.record_event(e0, stream)
    for _ in range(reps):
        dev.launch_graph(graph, stream)
    dev.record_event(e1, stream)
    dev.synchronize(stream)
    return dev.event_elapsed_ms(e0, e1) / reps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--synthetic-seed", type=int)
    ap.add_argument("--family", action="append", default=[],
                    help="a substring of kernel names (repeatable)")
    ap.add_argument("--modes", default="double,skip",
                    help="comma-separated: double, skip")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()

    from atlas.model.load import load_runner

    runner = load_runner(a.model, backend="cuda", max_seq_len=a.context + 96,
                         max_batch_size=a.batch, max_prefill_tokens=max(a.context, a.batch),
                         gpu_memory_utilization=0.85, synthetic_seed=a.synthetic_seed)
    rng = np.random.default_rng(0)
    core = start_decoding(runner, a.batch, a.context, 64, rng,
                          prompts=random_prompts(runner, a.batch, a.context, rng),
                          async_scheduling=False)
    bucket = next(b for b in runner.buckets if b >= a.batch)
    copies = {"double": 2, "skip": 0}
    variants = {("plain", ""): capture_variant(runner, bucket, None, 1)}
    for fam in a.family:
        for mode in a.modes.split(","):
            variants[(mode, fam)] = capture_variant(runner, bucket, fam, copies[mode])
    # a capture leaves dummy one-key rows in the input buffers: one real step uploads the
    # sequences' inputs again, which every replay then reads
    core.step()
    for g in variants.values():  # warm
        time_graph(runner, g, 10)
    times: dict[tuple[str, str], list[float]] = {k: [] for k in variants}
    for _ in range(a.rounds):
        for k, g in variants.items():
            times[k].append(time_graph(runner, g, 100))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med[("plain", "")]
    print(f"\n== {a.model.name} decode batch {a.batch}, context {a.context}: plain step "
          f"{base * 1e3:.1f} us (median of {a.rounds} x 100 replays)")
    print(f"{'family':<36} {'mode':<7} {'step us':>9} {'diff us':>9} {'spread us':>9}")
    rows = []
    for (mode, fam), t in med.items():
        if mode == "plain":
            continue
        spread = (max(times[(mode, fam)]) - min(times[(mode, fam)])) * 1e3
        print(f"{fam[:36]:<36} {mode:<7} {t * 1e3:>9.1f} {(t - base) * 1e3:>+9.1f} "
              f"{spread:>9.1f}")
        rows.append({"family": fam, "mode": mode, "step_us": t * 1e3,
                     "diff_us": (t - base) * 1e3, "spread_us": spread})
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"model": a.model.name, "batch": a.batch,
                                     "context": a.context, "plain_us": base * 1e3,
                                     "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
