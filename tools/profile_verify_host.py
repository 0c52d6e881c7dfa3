#!/usr/bin/env python3
"""Host time and driver calls of a verification step and of a plain decode step, no GPU.

A verification step is synchronous (the host needs the accepted tokens to propose the next
drafts), so all its host work sits between two device steps: on the H200, Qwen3-8B batch 1
K = 3 spent 0.47 ms of a 7.05 ms step there (issue 13). This measures that work on the
mock backend with every device call replaced by a counter that does nothing (so every
microsecond timed is the engine's own Python, and the counts are the cuda-bindings calls a
CudaBackend would make, each costing microseconds there):

* schedule / commit   `Scheduler.schedule` / `Scheduler.commit` (drafting included)
* launch              `ModelRunner.launch` (inputs packed and uploaded, graph launched, the
                      sampled ids' copy queued), with inside it pack (`pack_step`),
                      upload (`_upload_inputs`) and prepare (`Sampler.prepare`)
* collect             `ModelRunner.collect` (the wait, the ids read back)

Verification steps carry K drafts for every sequence, all rejected (each step verifies K
again: tools/gpu/engine_decode.rejected_drafts); plain steps run ahead (async scheduling)
as the server runs them. Times are medians of per-call thread CPU times (the host work
itself, less disturbed by other processes on a shared machine) over
--steps steps; the numbers move with the machine's load: compare runs made back to back.
Asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "py"))
sys.path.insert(0, str(ROOT / "tools" / "gpu"))

from atlas.engine.core import EngineCore  # noqa: E402
from atlas.engine.speculative import Speculator  # noqa: E402
from atlas.model import runner as runner_module  # noqa: E402
from atlas.model.load import load_runner  # noqa: E402
from atlas.model.runner import ModelRunner  # noqa: E402
from engine_decode import (random_prompts, rejected_drafts, start_decoding,  # noqa: E402
                           stop_all)

#: the backend methods that are one driver call each on the CUDA backend (a copy without a
#: stream is two: cuCtxSynchronize first)
DRIVER_CALLS = ("copy_h2d", "copy_d2h", "copy_d2d", "memset", "launch", "launch_graph",
                "record_event", "stream_wait_event", "event_synchronize", "synchronize")
#: (phase, object path from the core, method): the phases timed, outermost first
PHASES = (("schedule", "scheduler", "schedule"), ("commit", "scheduler", "commit"),
          ("launch", "executor", "launch"), ("collect", "executor", "collect"),
          ("upload", "executor", "_upload_inputs"), ("prepare", "executor.sampler", "prepare"))
#: the phases whose driver calls are counted (every call falls inside one of them)
COUNTED = ("launch", "collect")


class StepMeter:
    """Per-call wall times of the PHASES methods and the driver calls made inside each
    COUNTED phase, installed as instance attributes shadowing the methods."""

    def __init__(self, core: EngineCore) -> None:
        self.times: dict[str, list[float]] = collections.defaultdict(list)
        self.calls: dict[str, collections.Counter[str]] = {
            p: collections.Counter() for p in COUNTED}
        self._phase: str | None = None
        runner = core.executor
        assert isinstance(runner, ModelRunner)
        for name in DRIVER_CALLS:
            setattr(runner.backend, name, self._counter(name))
        for phase, path, method in PHASES:
            obj: Any = core
            for part in path.split("."):
                obj = getattr(obj, part)
            setattr(obj, method, self._timed(phase, getattr(obj, method)))
        self._pack = runner_module.pack_step
        runner_module.pack_step = self._timed("pack", self._pack)

    def _counter(self, name: str) -> Callable[..., None]:
        def call(*args: Any, **kwargs: Any) -> None:
            if self._phase is not None:
                self.calls[self._phase][name] += 1
        return call

    def _timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            outer = phase in COUNTED and self._phase is None
            if outer:
                self._phase = phase
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.times[phase].append(time.thread_time() - t0)
                if outer:
                    self._phase = None
        return timed

    def reset(self) -> None:
        self.times.clear()
        for c in self.calls.values():
            c.clear()

    def close(self) -> None:
        runner_module.pack_step = self._pack


def measure(runner: ModelRunner, k: int, batch: int, context: int, steps: int
            ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Median us per call of each phase, and driver calls per step of each counted phase,
    over `steps` engine steps (verifying `k` drafts a sequence, or plain decode at k=0)."""
    tokens = steps + 16
    rng = np.random.default_rng(0)
    prompts = random_prompts(runner, batch, context, rng)
    spec = Speculator(rejected_drafts(prompts, tokens, runner.vocab_size), k) if k else None
    core = start_decoding(runner, batch, context, tokens, rng, prompts=prompts,
                          speculator=spec, async_scheduling=True)
    meter = StepMeter(core)
    try:
        for _ in range(5):
            core.step()
        meter.reset()
        for _ in range(steps):
            core.step()
    finally:
        meter.close()
        stop_all(core)
    us = {p: 1e6 * statistics.median(t) for p, t in meter.times.items()}
    n = len(meter.times["launch"])
    per_step = {p: {c: v / n for c, v in meter.calls[p].items()} for p in COUNTED}
    return us, per_step


def model_dir(args: argparse.Namespace, tmp: Path) -> tuple[Path, int | None]:
    """The model to build: --model, or --config written to `tmp` (synthetic weights)."""
    if args.config is None:
        return args.model, None
    sys.path.insert(0, str(ROOT / "tools"))
    from make_fixtures import write_config

    return write_config(args.config, tmp / args.config).parent, 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=ROOT / "tests/fixtures/tiny-qwen3")
    ap.add_argument("--config", help="a tools/make_fixtures.py config (synthetic weights on "
                    "the mock backend), e.g. qwen3-8b, instead of --model")
    ap.add_argument("--k", type=int, default=3, help="drafts a verification step carries")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--steps", type=int, default=150,
                    help="timed steps (the context plus these fit the fixture's 256 positions)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path, seed = model_dir(a, Path(tmp))
        runner = load_runner(path, backend="mock", max_seq_len=a.context + a.steps + 24 + a.k,
                             max_batch_size=a.batch, max_prefill_tokens=max(a.context, 64),
                             num_draft_tokens=a.k, synthetic_seed=seed, progress=None)
    cols = ("schedule", "launch", "pack", "upload", "prepare", "collect", "commit")
    print(f"host us per call (median), {path.name} on the mock backend with free device "
          f"calls, batch {a.batch}, {a.steps} steps")
    print(f"{'step':<14} " + " ".join(f"{c:>9}" for c in cols) + "   driver calls")
    for label, k in ((f"verify K={a.k}", a.k), ("plain async", 0)):
        us, calls = measure(runner, k, a.batch, a.context, a.steps)
        counted = " | ".join(
            f"{p} {sum(calls[p].values()):.2f}: " + ", ".join(
                f"{name} {n:.2f}" for name, n in sorted(calls[p].items())) for p in COUNTED)
        print(f"{label:<14} " + " ".join(f"{us.get(c, 0.0):>9.1f}" for c in cols)
              + f"   {counted}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
