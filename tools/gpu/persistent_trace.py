#!/usr/bin/env python3
"""Where the persistent batch-1 decode kernel's time goes (GPU machine): its blocks' timelines.

Loads the model with ATLAS_PERSISTENT_DECODE=1, decodes a few tokens after a `--prompt`-token
prompt (so the caches and the step inputs hold a real batch-1 step), then re-launches that
step's layers `--steps` times with a trace buffer: every block stamps %globaltimer as each of
a layer's five phases ends on it and as the barrier after it opens
(ops/decode_persistent.TRACE_SLOTS_PER_LAYER). Prints, per phase and averaged over layers
and launches, block 0's own work (from the previous barrier's opening to its phase end), its
wait (phase end to the barrier's opening), and that wait split in two: how late the slowest
block's phase end is after block 0's, and how long after that block 0's barrier opened (the
signal's own latency), with the kernel's total. Under the readiness-count schedule (the
default; ATLAS_PERSISTENT_FLAGS=0 takes the barriers) "the barrier opens" is where block 0's
wait for the next phase's input returned (at once where block 0 has no rows of that phase).
A benchmark script: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from atlas.core.sampling import GREEDY  # noqa: E402
from atlas.engine.llm_engine import LLMEngine  # noqa: E402
from atlas.engine.request import EngineRequest  # noqa: E402
from atlas.model.load import load_runner  # noqa: E402
from atlas.runtime.ops import decode_persistent, embedding  # noqa: E402

PHASES = ("norm+qkv", "attention", "o_proj", "norm+gate_up", "down")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--backend", default="cuda", help="host: a smoke run (no timeline)")
    ap.add_argument("--synthetic-seed", type=int,
                    help="generate the weights on the device (--model holds only config.json)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    os.environ["ATLAS_PERSISTENT_DECODE"] = "1"
    runner = load_runner(a.model, backend=a.backend, max_seq_len=a.prompt + 64, max_batch_size=1,
                         max_prefill_tokens=max(a.prompt, 256), synthetic_seed=a.synthetic_seed)
    model, b, dev, s = runner.model, runner.bufs, runner.backend, runner.stream
    if model.persistent is None:
        print(f"{a.model}: the persistent kernel does not cover this model", file=sys.stderr)
        return 1
    prompt = [int(t) for t in np.random.default_rng(0).integers(10, 1000, a.prompt)]
    LLMEngine(runner, max_prefill_tokens=runner.limits.max_prefill_tokens).generate(
        [EngineRequest(prompt, GREEDY, 8)])
    d, layers = model.dims, model.persistent.num_layers
    grid = decode_persistent.persistent_grid(model.kc)
    slots = 1 + decode_persistent.TRACE_SLOTS_PER_LAYER * layers
    trace = dev.alloc(8 * grid * slots)
    starts, ends = dev.create_event(), dev.create_event()
    runs, totals = [], []
    for i in range(a.steps + 3):  # 3 warm-up launches
        embedding.embedding(model.kc, s, b.ids, model.embed, b.resid, 1, d.hidden, d.vocab)
        dev.record_event(starts, s)
        decode_persistent.decode_persistent(
            model.kc, s, model.persistent, b.resid, b.qkv, b.attn, b.act, b.part_o, b.part_ml,
            model.cos_sin, b.positions, b.slots, b.block_tables, b.kv_lens, d.hidden, d.heads,
            d.kv_heads, d.head_dim, d.inter, model.block_size,
            runner.decode_splits(1), model.scale, d.eps, trace=trace)
        dev.record_event(ends, s)
        dev.synchronize(s)
        if i >= 3:
            runs.append(dev.download(trace, np.uint64, grid * slots).astype(np.int64)
                        .reshape(grid, slots))
            totals.append(dev.event_elapsed_ms(starts, ends) * 1e3)
    dev.free(trace)
    t = np.stack(runs)                                   # [steps, block, slots] ns
    n = len(runs)
    marks = t[:, :, 1:].reshape(n, grid, layers, 5, 2)   # [.., layer, phase, (end, open)]
    opened = np.concatenate([t[:, :, :1], marks[..., 1].reshape(n, grid, -1)],
                            axis=2)[:, :, :-1].reshape(n, grid, layers, 5)
    work = (marks[:, 0, ..., 0] - opened[:, 0]).mean(axis=(0, 1)) / 1e3
    wait = (marks[:, 0, ..., 1] - marks[:, 0, ..., 0]).mean(axis=(0, 1)) / 1e3
    # the slowest block's phase end: how late it is after block 0's, and how long after it
    # block 0's barrier opened / wait returned (the signal's own latency)
    slowest = marks[..., 0].max(axis=1)                  # [steps, layer, phase]
    late = (slowest - marks[:, 0, ..., 0]).mean(axis=(0, 1)) / 1e3
    signal = (marks[:, 0, ..., 1] - slowest).mean(axis=(0, 1)) / 1e3
    start_spread = float(np.median(t[:, :, 0].max(axis=1) - t[:, :, 0].min(axis=1))) / 1e3
    total_us = float(np.median(totals))
    span_us = float(np.median(t[:, 0, -1] - t[:, 0, 0])) / 1e3
    schedule = "readiness counts" if model.kc.routes.persistent_flags else "barriers"
    print(f"{a.model.name}: {layers} layers, context {a.prompt + 8}, kernel {total_us:.1f} us "
          f"(block 0 start to end {span_us:.1f} us, {span_us / layers:.2f} us a layer; "
          f"{schedule}, ATLAS_PERSISTENT_FLAGS; {grid} blocks started within "
          f"{start_spread:.2f} us)")
    print(f"{'phase':<14} {'block 0 us':>10} {'wait+barrier us':>16} {'slowest late us':>16} "
          f"{'signal us':>10}")
    for row in zip(PHASES, work, wait, late, signal):
        widths = (10, 16, 16, 10)
        print(f"{row[0]:<14} " + " ".join(f"{v:>{w}.2f}" for v, w in zip(row[1:], widths)))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({
            "model": str(a.model), "layers": layers, "context": a.prompt + 8,
            "kernel_us": total_us, "block0_span_us": span_us, "schedule": schedule,
            "blocks": grid, "start_spread_us": start_spread,
            "phases": {p: {"block0_us": float(w), "wait_barrier_us": float(b_),
                           "slowest_late_us": float(lt), "signal_us": float(sg)}
                       for p, w, b_, lt, sg in zip(PHASES, work, wait, late, signal)}},
            indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
