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
  by kernel name, with the bytes each GEMV must move turned into GB/s.
* Attention keys: the replays read the last step's inputs, whose kv_lens are not --context:
  the prompts prefill one after another, so at --batch 64 --context 1536 the sequences hold
  about 1,590..1,660 keys. The graph's kv_lens, the K/V bytes a layer's attention reads for
  them and each decode-attention row's rate over those bytes are printed, so the rows compare
  with the kernel table's (whose rows read exactly `history` keys). With programmatic
  dependent launch (the default) consecutive kernels overlap and each record includes the
  time a kernel waited for its predecessor; ATLAS_PDL=0 gives a breakdown that adds up.
* --verify K: the runner is built to speculate with K drafts (as `--speculative ...
  --num-draft-tokens K` serves: its plain step is that server's), and one verification
  step (batch x (K + 1) rows, every draft rejected so every step verifies K) is measured
  the same way: its wall time (always synchronous: the next drafts follow the accepted
  tokens), its graph's GPU time and kernels; then both side by side per kernel family
  (`*_single` paired with its m-row entry point) with the verification's extra us per step.
Prints tables; writes JSON with --out ("verify" holds the verification step's numbers).
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

from atlas.engine.speculative import Speculator, expected_tokens  # noqa: E402
from engine_decode import (random_prompts, rejected_drafts, start_decoding,  # noqa: E402
                           stop_all)


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


def device_records(prof: Any) -> list[tuple[float, float, str]]:
    """(start us, end us, name) of a torch.profiler run's CUDA device records: kernels, and
    copies as "Memcpy HtoD (Pinned -> Device)" and the like."""
    import torch

    return [(ev.time_range.start, ev.time_range.end, ev.name) for ev in prof.events()
            if ev.device_type == torch.autograd.DeviceType.CUDA and ev.name]


def critical_path(recs: list[tuple[float, float, str]], steps: int) -> list[dict]:
    """What each kernel adds to the step's end, by the records' timestamps: the kernels of
    `steps` replays in start order (the graph's launch order), each charged with how far its
    end lies past the latest end before it, grouped by (kernel, the kernel launched before
    it), so the same GEMV after attention and after the MoE down are told apart. The charges
    add up to the replays' span (PDL-on rows overlap and do not); `lead` is how long before
    its predecessor's end a kernel started (launched early: prologue and wait)."""
    groups: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    last_end = prev_end = None
    prev_name = ""
    for start, end, name in sorted(recs):
        if last_end is not None:
            groups[(name, prev_name)].append((max(0.0, end - last_end), prev_end - start))
        last_end = end if last_end is None else max(last_end, end)
        prev_end, prev_name = end, name
    rows = [{"kernel": name, "after": after, "calls_per_step": len(v) / steps,
             "us_per_step": sum(c for c, _ in v) / steps,
             "us_per_call": sum(c for c, _ in v) / len(v),
             "lead_us": sum(ld for _, ld in v) / len(v)} for (name, after), v in groups.items()]
    rows.sort(key=lambda r: -r["us_per_step"])
    return rows


def print_critical_path(rows: list[dict]) -> None:
    total = sum(r["us_per_step"] for r in rows)
    print(f"critical path (each kernel's end past the latest end before it; adds up to "
          f"{total:.1f} us a step)")
    print(f"{'kernel':<40} {'after':<32} {'calls':>5} {'us/step':>8} {'us/call':>8} "
          f"{'lead':>6}")
    for r in rows:
        print(f"{r['kernel'][:40]:<40} {r['after'][:32]:<32} {r['calls_per_step']:>5.0f} "
              f"{r['us_per_step']:>8.1f} {r['us_per_call']:>8.2f} {r['lead_us']:>6.2f}")


def step_boundaries(recs: list[tuple[float, float, str]], graph_kernels: list[str]
                    ) -> dict:
    """What lies between consecutive step graphs of an async-scheduled decode loop: the
    records sorted by start, the kernels of the graph (`graph_kernels`, one replay's names in
    launch order) cut into replays, and for each pair of replays the span from the first
    one's last end to the next one's first start (the device time no step kernel runs) with
    the other records (the step's copies) that start inside it. Returns the median span and,
    per record name, calls per boundary, median us a call and median start after the span's
    beginning."""
    names, recs = set(graph_kernels), sorted(recs)
    kernels = [r for r in recs if r[2] in names]
    others = [r for r in recs if r[2] not in names]
    k = len(graph_kernels)
    first = next((i for i in range(len(kernels))
                  if [r[2] for r in kernels[i:i + k]] == graph_kernels), None)
    if first is None:
        return {"span_us": float("nan"), "boundaries": 0, "records": {}}
    replays = [kernels[i:i + k] for i in range(first, len(kernels) - k + 1, k)]
    spans: list[float] = []
    seen: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for a, b in zip(replays, replays[1:]):
        end, start = max(r[1] for r in a), b[0][0]
        spans.append(start - end)
        for s0, e0, name in others:
            if end - 1.0 <= s0 <= start:
                seen[name].append((e0 - s0, s0 - end))
    n = max(len(spans), 1)
    return {"span_us": statistics.median(spans) if spans else float("nan"),
            "boundaries": len(spans),
            "records": {name: {"calls": len(v) / n,
                               "us_per_call": statistics.median(d for d, _ in v),
                               "starts_after_us": statistics.median(o for _, o in v)}
                        for name, v in seen.items()}}


def async_boundaries(runner, batch: int, context: int, prompts: list[list[int]], tokens: int,
                     graph_kernels: list[str]) -> dict:
    """`step_boundaries` of 20 async-scheduled decode steps under torch.profiler (CUDA
    backend only): where the async wall's ~20 us a step past the graph replay goes."""
    from torch.profiler import ProfilerActivity, profile

    core = start_decoding(runner, batch, context, tokens, np.random.default_rng(0),
                          prompts=prompts, async_scheduling=True)
    for _ in range(5):
        core.step()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            core.step()
        runner.backend.synchronize(runner.stream)
    stop_all(core)
    return step_boundaries(device_records(prof), graph_kernels)


def print_boundaries(b: dict) -> None:
    print(f"between step graphs (async loop, {b.get('boundaries', 0)} boundaries): median "
          f"{b['span_us']:.2f} us with no step kernel running")
    for name, r in sorted(b["records"].items(), key=lambda kv: kv[1]["starts_after_us"]):
        print(f"  {name[:48]:<48} {r['calls']:>4.1f} a boundary, {r['us_per_call']:6.2f} us, "
              f"starts {r['starts_after_us']:6.2f} us after the last kernel's end")


def print_rows(rows: list[dict], kernel_total: float) -> None:
    print(f"{'kernel':<44} {'calls':>6} {'us/step':>9} {'us/call':>8} {'share':>6}")
    for r in rows:
        print(f"{r['kernel'][:44]:<44} {r['calls_per_step']:>6.0f} {r['us_per_step']:>9.1f} "
              f"{r['us_per_call']:>8.2f} {100 * r['us_per_step'] / kernel_total:>5.1f}%")


def graph_profile(runner, graph) -> dict:
    """GPU ms per replay of one captured step graph (back-to-back replays between two
    events) and its per-kernel rows (torch.profiler over a few replays; CUDA backend only,
    the host backend's smoke runs get none)."""
    dev, stream = runner.backend, runner.stream
    e0, e1 = dev.create_event(), dev.create_event()
    reps = 50
    dev.record_event(e0, stream)
    for _ in range(reps):
        dev.launch_graph(graph, stream)
    dev.record_event(e1, stream)
    dev.synchronize(stream)
    gpu_ms = dev.event_elapsed_ms(e0, e1) / reps
    rows: list[dict] = []
    path: list[dict] = []
    order: list[str] = []
    kernel_total = 0.0
    if dev.name == "cuda":
        from torch.profiler import ProfilerActivity, profile

        prof_reps = 5
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(prof_reps):
                dev.launch_graph(graph, stream)
            dev.synchronize(stream)
        rows, kernel_total = kernel_rows(prof, prof_reps)
        recs = sorted(device_records(prof))
        path = critical_path(recs, prof_reps)
        order = [name for _, _, name in recs[:len(recs) // prof_reps]]
    return {"gpu_ms": gpu_ms, "kernel_busy_ms": kernel_total / 1e3, "kernels": rows,
            "critical_path": path, "launch_order": order}


def attention_keys(runner, batch: int, rows: list[dict]) -> dict:
    """The kv_lens of the decode graph's rows (its last step's inputs), the K/V bytes one
    layer's attention reads for them (every key of every kv head, K and V, in the pool's
    dtype) and each decode-attention row's GB/s over those bytes."""
    lens = runner.backend.download(runner.bufs.kv_lens, np.int32, batch)
    cfg = runner.kv.cfg
    layer_bytes = float(lens.sum()) * cfg.bytes_per_token / cfg.num_layers
    rates = {r["kernel"]: layer_bytes / r["us_per_call"] / 1e3 for r in rows
             if r["kernel"].startswith("decode_attn") and "combine" not in r["kernel"]}
    return {"kv_lens_mean": float(lens.mean()), "kv_lens_min": int(lens.min()),
            "kv_lens_max": int(lens.max()), "kv_bytes_per_layer": layer_bytes,
            "attention_gb_s": rates}


def kernel_family(name: str) -> str:
    """A kernel's name without its single-row suffix or ring infix: a verification step runs
    the m-row entry point (`gemv_ring_*` by default) of what a batch-1 step runs as
    `*_single`, so the comparison pairs them."""
    return name.replace("_single", "").replace("gemv_ring_", "gemv_")


def compare_rows(plain: list[dict], verify: list[dict]) -> list[dict]:
    """Per kernel family: calls and us per step in the plain and the verification step,
    and the verification's extra us per step; largest extra first."""
    fams: dict[str, dict] = defaultdict(lambda: {"plain_calls": 0.0, "plain_us": 0.0,
                                                 "verify_calls": 0.0, "verify_us": 0.0})
    for rows, key in ((plain, "plain"), (verify, "verify")):
        for r in rows:
            f = fams[kernel_family(r["kernel"])]
            f[f"{key}_calls"] += r["calls_per_step"]
            f[f"{key}_us"] += r["us_per_step"]
    out = [{"family": name, **v, "extra_us": v["verify_us"] - v["plain_us"]}
           for name, v in fams.items()]
    out.sort(key=lambda r: -abs(r["extra_us"]))
    return out


def print_comparison(plain: dict, verify: dict, k: int, batch: int) -> None:
    rows = batch * (k + 1)
    print(f"\n== verification step ({batch} x {k + 1} = {rows} rows) vs plain decode step "
          f"(batch {batch})")
    print(f"GPU per step (graph replay): plain {plain['gpu_ms']:.3f} ms, verification "
          f"{verify['gpu_ms']:.3f} ms = {verify['gpu_ms'] / plain['gpu_ms']:.3f}x")
    print(f"wall per step: plain async {plain['async_wall_ms']:.3f} ms (sync "
          f"{plain['wall_ms']:.3f}), verification (always synchronous) "
          f"{verify['wall_ms']:.3f} ms = {verify['wall_ms'] / plain['async_wall_ms']:.3f}x "
          f"plain async; host on the critical path: verification "
          f"{verify['wall_ms'] - verify['gpu_ms']:.3f} ms, plain async "
          f"{plain['async_wall_ms'] - plain['gpu_ms']:.3f} ms")
    tokens = expected_tokens(k, BAR_ACCEPTANCE)
    wall_ratio = verify["wall_ms"] / plain["async_wall_ms"]
    print(f"at per-token acceptance {BAR_ACCEPTANCE}: {tokens:.3f} tokens per verification -> "
          f"{tokens / wall_ratio:.2f}x plain tok/s by wall time, "
          f"{tokens * plain['gpu_ms'] / verify['gpu_ms']:.2f}x by GPU time (issue 13's bar: "
          f"2x, a verification <= {tokens / 2:.3f}x a plain step)")
    print(f"{'kernel family':<44} {'plain':>6} {'us/step':>9} {'verify':>6} {'us/step':>9} "
          f"{'extra us':>9}")
    for r in compare_rows(plain["kernels"], verify["kernels"]):
        print(f"{r['family'][:44]:<44} {r['plain_calls']:>6.0f} {r['plain_us']:>9.1f} "
              f"{r['verify_calls']:>6.0f} {r['verify_us']:>9.1f} {r['extra_us']:>+9.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--verify", type=int, default=0, metavar="K",
                    help="also profile a verification step of K drafts per sequence (the "
                    "runner is built to speculate: its plain step is the speculating "
                    "server's) and compare it with the plain step")
    ap.add_argument("--synthetic-seed", type=int,
                    help="generate the weights on the device (--model holds only config.json)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()

    from atlas.model.load import load_runner

    k = a.verify
    prefill_budget = max(a.context, a.batch * (k + 1))
    tokens = step_tokens(a.batch, a.context, prefill_budget)
    runner = load_runner(a.model, backend=a.backend,
                         max_seq_len=a.context + tokens + k + 16,
                         max_batch_size=max(a.batch, 1), max_prefill_tokens=prefill_budget,
                         gpu_memory_utilization=0.85, synthetic_seed=a.synthetic_seed,
                         num_draft_tokens=k)
    rng = np.random.default_rng(0)
    prompts = random_prompts(runner, a.batch, a.context, rng)
    wall_ms, async_wall_ms = (step_wall_ms(runner, a.batch, a.context, prompts, mode, tokens)
                              for mode in (False, True))
    bucket = next(b for b in runner.buckets if b >= a.batch)
    plain = {"wall_ms": wall_ms, "async_wall_ms": async_wall_ms,
             **graph_profile(runner, runner.graphs[bucket])}
    gpu_ms, kernel_total, rows = plain["gpu_ms"], plain["kernel_busy_ms"] * 1e3, plain["kernels"]
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
    if plain["critical_path"]:
        print_critical_path(plain["critical_path"])
    if plain["launch_order"]:
        plain["boundaries"] = async_boundaries(runner, a.batch, a.context, prompts, tokens,
                                               plain["launch_order"])
        print_boundaries(plain["boundaries"])
    keys = attention_keys(runner, a.batch, rows)
    print(f"attention keys (the graph's kv_lens): mean {keys['kv_lens_mean']:.0f}, "
              f"{keys['kv_lens_min']}..{keys['kv_lens_max']}; K/V a layer "
              f"{keys['kv_bytes_per_layer'] / 1e6:.1f} MB; " + ", ".join(
                  f"{name} {rate:.0f} GB/s" for name, rate in keys["attention_gb_s"].items()))
    result = {"model": a.model.name, "batch": a.batch, "context": a.context,
              "wall_ms": wall_ms, "async_wall_ms": async_wall_ms, "gpu_ms": gpu_ms,
              "kernel_busy_ms": kernel_total / 1e3, "kernels": rows,
              "critical_path": plain["critical_path"], "attention_keys": keys,
              "boundaries": plain.get("boundaries")}
    if k:
        rows_v = a.batch * (k + 1)
        phases: dict[str, list[float]] = {}
        verify = {"k": k, "rows": rows_v,
                  "wall_ms": verify_wall_ms(runner, a.batch, a.context, prompts, k, tokens,
                                            phases),
                  **graph_profile(runner, runner.verify_graphs[
                      next(b for b in runner.verify_buckets if b >= rows_v)])}
        verify["host_phases_us"] = phase_medians_us(phases)
        print(f"\n== verification step, K = {k}: {rows_v} rows")
        print_rows(verify["kernels"], verify["kernel_busy_ms"] * 1e3)
        print("host phases of a verification step (median us a call; collect includes the "
              "wait for the device): " + ", ".join(
                  f"{name} {us:.1f}" for name, us in verify["host_phases_us"].items()))
        print_comparison(plain, verify, k, a.batch)
        result["verify"] = verify
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2))
    return 0


#: the per-token acceptance issue 13's speculation bar is stated at (2x plain tok/s at K = 3)
BAR_ACCEPTANCE = 0.7
#: timed steps of a measurement, after 5 untimed ones
TIMED_STEPS = 50


def step_tokens(batch: int, context: int, prefill_budget: int) -> int:
    """Tokens each sequence may generate: those it decodes while the later prompts prefill,
    then 5 untimed and TIMED_STEPS timed steps, and room for the drafts of the last
    verification. Every step of the prefill phase carries one decode token for each
    sequence already decoding, so the prompts get at least prefill_budget - batch tokens a
    step: the phase takes at most ceil(batch x context / that) + 1 steps. (A flat 64 tokens
    ended the first sequences of 64 x 1,536 before the last ones had decoded: "only 62 of
    64 sequences are decoding", H200 2026-12-02.)"""
    prefill_steps = -(-batch * context // max(prefill_budget - batch, 1)) + 1
    return prefill_steps + 5 + TIMED_STEPS + 9


def median_step_ms(core, phases: dict[str, list[float]] | None = None) -> float:
    """Median wall time of TIMED_STEPS `EngineCore.step` calls after 5 untimed ones;
    `phases` (when given) collects the timed steps' host phases (`HOST_PHASES`)."""
    for _ in range(5):
        core.step()
    walls = []
    timers = PhaseTimers(core) if phases is not None else None
    for _ in range(TIMED_STEPS):
        t0 = time.perf_counter()
        core.step()
        walls.append(time.perf_counter() - t0)
    if timers is not None:
        phases.update(timers.finish())
    stop_all(core)
    return statistics.median(walls) * 1e3


#: (name, object path from the core, method) of the host phases of an engine step that
#: `PhaseTimers` times: the scheduler's plan and commit, the runner's launch (inputs packed
#: and uploaded, the graph launched) and its collect (waiting for the device, reading the
#: ids), and inside the launch the step's input packing and the sampler's row upload
HOST_PHASES = (("schedule", "scheduler", "schedule"), ("commit", "scheduler", "commit"),
               ("launch", "executor", "launch"), ("collect", "executor", "collect"),
               ("upload_inputs", "executor", "_upload_inputs"),
               ("sampler_prepare", "executor.sampler", "prepare"))


class PhaseTimers:
    """Wall time of each `HOST_PHASES` method call on one core's objects while installed
    (instance attributes shadowing the methods; `finish` removes them): where a
    verification step's host time on the critical path goes (issue 13 item 4)."""

    def __init__(self, core) -> None:
        self.times: dict[str, list[float]] = {name: [] for name, _, _ in HOST_PHASES}
        self._installed: list[tuple[object, str]] = []
        for name, path, method in HOST_PHASES:
            obj = core
            for part in path.split("."):
                obj = getattr(obj, part)
            self._wrap(obj, method, self.times[name])

    def _wrap(self, obj: object, method: str, sink: list[float]) -> None:
        inner = getattr(obj, method)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                sink.append(time.perf_counter() - t0)

        setattr(obj, method, timed)
        self._installed.append((obj, method))

    def finish(self) -> dict[str, list[float]]:
        """Remove the timers; the times per phase (seconds, one per call)."""
        for obj, method in self._installed:
            delattr(obj, method)
        return self.times


def step_wall_ms(runner, batch: int, context: int, prompts: list[list[int]],
                 async_scheduling: bool, tokens: int) -> float:
    """Median wall time of one decode `EngineCore.step` at `batch` sequences (each may
    generate `tokens`: `step_tokens`)."""
    return median_step_ms(start_decoding(runner, batch, context, tokens,
                                         np.random.default_rng(0), prompts=prompts,
                                         async_scheduling=async_scheduling))


def verify_wall_ms(runner, batch: int, context: int, prompts: list[list[int]], k: int,
                   tokens: int, phases: dict[str, list[float]] | None = None) -> float:
    """Median wall time of one `EngineCore.step` verifying K drafts per sequence, every one
    rejected (so each step verifies K again): synchronous, as every verification step is
    (the next step's drafts follow the accepted tokens). `phases`: its host phases."""
    spec = Speculator(rejected_drafts(prompts, tokens, runner.vocab_size), k)
    return median_step_ms(start_decoding(runner, batch, context, tokens,
                                         np.random.default_rng(0), prompts=prompts,
                                         speculator=spec), phases)


def phase_medians_us(phases: dict[str, list[float]]) -> dict[str, float]:
    """Median us per call of each host phase (0 for a phase never called)."""
    return {name: 1e6 * statistics.median(t) if t else 0.0 for name, t in phases.items()}


if __name__ == "__main__":
    raise SystemExit(main())
