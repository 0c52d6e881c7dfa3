#!/usr/bin/env python3
"""Where a decode step's time goes (GPU machine): per-kernel times inside the captured graph,
GPU time per step, and host time per step.

* GPU time per step: CUDA events around back-to-back replays of one decode graph (no host
  work between them), so launch gaps inside the graph are included but host work is not.
* Host time per step: wall time of `EngineCore.step` (scheduler + runner, as the server
  runs it) minus the GPU time, with async scheduling off (each step is committed before the
  next is planned, so the GPU idles for about that long every step); then the wall time
  with async scheduling on (the default: the host plans, launches and commits while the
  GPU runs the step before), where wall - GPU is the host time left on the critical path.
* Per kernel: CUPTI kernel records collected by torch.profiler over a few replays, grouped
  by kernel name, with the bytes each GEMV must move turned into GB/s. With programmatic
  dependent launch (the default) consecutive kernels overlap and each record includes the
  time a kernel waited for its predecessor; ATLAS_PDL=0 gives a breakdown that adds up.
Prints a table; writes JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from engine_decode import start_decoding, stop_all  # noqa: E402


def kernel_rows(prof: Any, steps: int) -> tuple[list[dict], float]:
    """The CUDA kernel records of a torch.profiler run over `steps` identical steps, grouped
    by kernel name (calls and us per step, us per call; largest first), and the us per step
    of all of them together."""
    import torch

    per_kernel: dict[str, list[float]] = defaultdict(list)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.name:
            per_kernel[ev.name].append(ev.device_time_total if hasattr(ev, "device_time_total")
                                       else ev.cuda_time_total)
    rows = []
    kernel_total = 0.0
    for name, times in per_kernel.items():
        total_us = sum(times) / steps
        kernel_total += total_us
        rows.append({"kernel": name, "calls_per_step": len(times) / steps,
                     "us_per_step": total_us, "us_per_call": total_us / (len(times) / steps)})
    rows.sort(key=lambda r: -r["us_per_step"])
    return rows, kernel_total


def print_rows(rows: list[dict], kernel_total: float) -> None:
    print(f"{'kernel':<44} {'calls':>6} {'us/step':>9} {'us/call':>8} {'share':>6}")
    for r in rows:
        print(f"{r['kernel'][:44]:<44} {r['calls_per_step']:>6.0f} {r['us_per_step']:>9.1f} "
              f"{r['us_per_call']:>8.2f} {100 * r['us_per_step'] / kernel_total:>5.1f}%")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--synthetic-seed", type=int,
                    help="generate the weights on the device (--model holds only config.json)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()

    from torch.profiler import ProfilerActivity, profile

    from atlas.model.load import load_runner

    runner = load_runner(a.model, backend="cuda", max_seq_len=a.context + 256,
                         max_batch_size=max(a.batch, 1), max_prefill_tokens=a.context,
                         gpu_memory_utilization=0.85, synthetic_seed=a.synthetic_seed)
    wall_ms, async_wall_ms = (step_wall_ms(runner, a.batch, a.context, mode)
                              for mode in (False, True))

    dev, stream = runner.backend, runner.stream
    bucket = next(b for b in runner.buckets if b >= a.batch)
    graph = runner.graphs[bucket]
    e0, e1 = dev.create_event(), dev.create_event()
    reps = 50
    dev.record_event(e0, stream)
    for _ in range(reps):
        dev.launch_graph(graph, stream)
    dev.record_event(e1, stream)
    dev.synchronize(stream)
    gpu_ms = dev.event_elapsed_ms(e0, e1) / reps

    prof_reps = 5
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(prof_reps):
            dev.launch_graph(graph, stream)
        dev.synchronize(stream)
    rows, kernel_total = kernel_rows(prof, prof_reps)
    weights_gb = runner.info.weights_bytes / 1e9
    print(f"\n== {a.model.name} decode batch {a.batch}, context {a.context}")
    print(f"wall per step {wall_ms:.3f} ms | GPU per step (graph replay) {gpu_ms:.3f} ms | "
          f"host per step ~{wall_ms - gpu_ms:.3f} ms | kernel busy {kernel_total / 1e3:.3f} ms "
          f"| gaps {gpu_ms - kernel_total / 1e3:.3f} ms")
    print(f"async scheduling: wall per step {async_wall_ms:.3f} ms (host on the critical path "
          f"~{async_wall_ms - gpu_ms:.3f} ms) | {a.batch * 1e3 / async_wall_ms:.0f} tok/s vs "
          f"{a.batch * 1e3 / wall_ms:.0f} synchronous")
    print(f"weights {weights_gb:.2f} GB -> {weights_gb / gpu_ms * 1e3:.0f} GB/s over GPU time, "
          f"{weights_gb / wall_ms * 1e3:.0f} GB/s over wall time")
    if kernel_total / 1e3 > gpu_ms:
        print("kernels overlap (programmatic dependent launch): a kernel's time includes its "
              "wait on the one before, so the rows do not add up to the step")
    print_rows(rows, kernel_total)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"model": a.model.name, "batch": a.batch,
                                     "context": a.context, "wall_ms": wall_ms,
                                     "async_wall_ms": async_wall_ms, "gpu_ms": gpu_ms,
                                     "kernel_busy_ms": kernel_total / 1e3,
                                     "kernels": rows}, indent=2))
    return 0


def step_wall_ms(runner, batch: int, context: int, async_scheduling: bool) -> float:
    """Median wall time of one decode `EngineCore.step` at `batch` sequences."""
    core = start_decoding(runner, batch, context, 200, np.random.default_rng(0),
                          async_scheduling=async_scheduling)
    for _ in range(5):
        core.step()
    walls = []
    for _ in range(50):
        t0 = time.perf_counter()
        core.step()
        walls.append(time.perf_counter() - t0)
    stop_all(core)
    return statistics.median(walls) * 1e3


if __name__ == "__main__":
    raise SystemExit(main())
