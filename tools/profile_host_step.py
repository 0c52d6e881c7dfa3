#!/usr/bin/env python3
"""Host time per engine step, by phase, with no GPU: what the Python side costs per step.

Runs `EngineCore.step` over a ModelRunner on the mock backend (launches are recorded, not
run, so every microsecond measured is host work) at each batch size, in decode steady
state, and splits the step's time into phases by timing the methods the step calls (in
thread CPU time: the host work itself, unaffected by other processes on a shared machine):

* schedule  `Scheduler.schedule` (policy order, block reservation, chunk building)
* pack      `pack_step` (the int32 step inputs)
* upload    block-table rows, the packed inputs, sampler rows, carried token ids
* launch    graph replay / eager forward launches
* readback  device-to-host copy of the sampled ids and the wait for them
* commit    `Scheduler.commit` (tokens appended, stops, outputs)
* other     the rest of `EngineCore.step` (releases, result lists, bookkeeping)

`--prefill N` measures instead an eager prefill step of N tokens (past `--cached` tokens
a first request put in the prefix cache, as the ttft-warm gate's request is), one request
at a time. `--sm90-modules` has the mock report every kernel module loaded, so the launch
builders take the routes an sm_90a set takes (the wgmma attention, the decode GEMMs);
`--synthetic` for a model directory holding only config.json.

plus, outside the engine thread, `detok`: one `IncrementalDetokenizer.feed` per output with
the Qwen3 tokenizer (when --tokenizer names a tokenizer.json), what the server's streams do
with each step's outputs. With --async-scheduling both modes are measured; on the mock
backend the device takes no time, so the modes cost the same host work per step: the gain
of running ahead shows only on a GPU (tools/gpu/profile_decode.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "py"))

from atlas.core.sampling import GREEDY  # noqa: E402
from atlas.engine.core import EngineCore  # noqa: E402
from atlas.engine.request import EngineRequest  # noqa: E402
from atlas.model import runner as runner_module  # noqa: E402
from atlas.model.load import load_runner  # noqa: E402

PHASES = ("schedule", "pack", "upload", "launch", "readback", "commit")
DEFAULT_TOKENIZER = Path.home() / ".atlas/cache/tokenizers/qwen3/tokenizer.json"


class PhaseClock:
    """Accumulates wall time per phase of the wrapped callables (outermost call only, so a
    phase that calls another phase's method is not counted twice)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self._depth = 0

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.totals[phase] += time.thread_time() - t0
                self._depth -= 1
        return timed

    def instrument(self, obj: Any, phase: str, *names: str) -> None:
        for name in names:
            if hasattr(obj, name):
                setattr(obj, name, self.wrap(phase, getattr(obj, name)))


def measure(model: Path, batch: int, steps: int, run_ahead: bool,
            detok: Callable[[list], None] | None) -> dict[str, float]:
    """Microseconds per step of each phase at `batch` sequences in decode."""
    runner = load_runner(model, backend="mock", max_seq_len=steps + 48, max_batch_size=batch,
                         max_prefill_tokens=max(64, batch), progress=None)
    core = EngineCore.build(runner, max_prefill_tokens=max(64, batch), max_num_seqs=batch,
                            async_scheduling=run_ahead)
    for i in range(batch):
        core.add(i, EngineRequest([5 + i % 50] * 16, GREEDY, steps + 16))
    scheduler = core.scheduler
    while scheduler.waiting or any(len(s.output_ids) < 2 for s in scheduler.running):
        core.step()  # prefill and the first decode steps, untimed
    clock = instrumented(core, runner)
    dev = runner.backend
    original_pack = runner_module.pack_step
    runner_module.pack_step = clock.wrap("pack", original_pack)
    walls, detoks = [], []
    try:
        for _ in range(steps):
            t0 = time.thread_time()
            report = core.step()
            walls.append(time.thread_time() - t0)
            dev.graph_launches.clear()
            dev.drain_launches()
            if detok is not None:
                t0 = time.thread_time()
                detok(report.outputs)
                detoks.append(time.thread_time() - t0)
    finally:
        runner_module.pack_step = original_pack
    return per_step(clock, walls, detoks)


def instrumented(core: EngineCore, runner: Any) -> PhaseClock:
    """A PhaseClock around the step's phases (pack_step, a module function, aside)."""
    clock = PhaseClock()
    dev = runner.backend
    clock.instrument(core.scheduler, "schedule", "schedule")
    clock.instrument(core.scheduler, "commit", "commit")
    clock.instrument(runner, "upload", "_upload_inputs", "_carry_tokens")
    clock.instrument(runner.sampler, "upload", "prepare")
    clock.instrument(dev, "launch", "launch_graph")
    clock.instrument(runner.model, "launch", "forward")
    clock.instrument(dev, "readback", "copy_d2h", "synchronize", "event_synchronize")
    return clock


def per_step(clock: PhaseClock, walls: list[float], detoks: list[float]) -> dict[str, float]:
    """Microseconds a step of each phase, the total, the rest ("other") and detok."""
    us = {p: 1e6 * clock.totals[p] / len(walls) for p in PHASES}
    us["total"] = 1e6 * statistics.fmean(walls)
    us["other"] = us["total"] - sum(us[p] for p in PHASES)
    us["detok"] = 1e6 * statistics.fmean(detoks) if detoks else float("nan")
    return us


def measure_prefill(model: Path, tokens: int, cached: int, steps: int,
                    synthetic: bool) -> dict[str, float]:
    """Microseconds per prefill step of each phase: `steps` requests of `tokens` tokens
    after the same `cached` ones (prefilled once first), each one step (max_tokens 1)."""
    longest = cached + tokens
    runner = load_runner(model, backend="mock", max_seq_len=longest + 16, max_batch_size=256,
                         max_prefill_tokens=max(2048, longest), progress=None,
                         synthetic_seed=0 if synthetic else None)
    core = EngineCore.build(runner, max_prefill_tokens=max(2048, longest), max_num_seqs=256,
                            async_scheduling=False)
    prefix = [7 + i % 500 for i in range(cached)]
    dev = runner.backend

    def one(i: int) -> float:
        core.add(i, EngineRequest(prefix + [900 + i % 50] * tokens, GREEDY, 1))
        t0 = time.thread_time()
        while core.has_work:
            core.step()
        wall = time.thread_time() - t0
        dev.graph_launches.clear()
        dev.drain_launches()
        return wall

    one(0)  # the prefix into the cache, kernels resolved
    clock = instrumented(core, runner)
    return per_step(clock, [one(i) for i in range(1, steps + 1)], [])


def detokenizer(path: Path | None) -> Callable[[list], None] | None:
    """Feeds each output's tokens to a per-sequence IncrementalDetokenizer (None: skipped)."""
    if path is None or not path.is_file():
        return None
    from atlas.server.detokenize import IncrementalDetokenizer
    from atlas.server.tokenizer import TextTokenizer

    tok = TextTokenizer(path.read_text(encoding="utf-8"))
    streams: dict[int, IncrementalDetokenizer] = {}

    def feed(outputs: list) -> None:
        for out in outputs:
            d = streams.get(out.seq_id)
            if d is None:
                d = streams[out.seq_id] = IncrementalDetokenizer(tok.decode)
            # the mock device samples token 0: shift into ordinary text tokens
            d.feed([1000 + out.num_output_tokens % 5000])
    return feed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=ROOT / "tests/fixtures/tiny-qwen3")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER)
    ap.add_argument("--modes", default="sync,async", help="comma list: sync, async")
    ap.add_argument("--prefill", type=int, default=0, help="tokens of a prefill step instead")
    ap.add_argument("--cached", type=int, default=0)
    ap.add_argument("--sm90-modules", action="store_true")
    ap.add_argument("--synthetic", action="store_true")
    a = ap.parse_args()
    cols = ("total", *PHASES, "other", "detok")
    if a.sm90_modules:
        from atlas.runtime import kernel_abi, mock
        from atlas.runtime.gpu import KernelSig
        names = sorted({v.module for v in vars(kernel_abi).values() if isinstance(v, KernelSig)})
        mock.MockGpuBackend.module_names = property(lambda self: names)  # type: ignore
    if a.prefill:
        us = measure_prefill(a.model, a.prefill, a.cached, a.steps, a.synthetic)
        print(f"host us per prefill step of {a.prefill} tokens past {a.cached} cached, mock "
              f"backend, {a.model.name}, {a.steps} steps")
        print(" ".join(f"{c:>9}" for c in cols))
        print(" ".join(f"{us[c]:>9.1f}" for c in cols))
        return 0
    print(f"host us per decode step, mock backend, {a.model.name}, {a.steps} steps")
    print(f"{'mode':<6} {'batch':>5} " + " ".join(f"{c:>9}" for c in cols))
    for mode in a.modes.split(","):
        for b in (int(x) for x in a.batches.split(",")):
            us = measure(a.model, b, a.steps, mode == "async", detokenizer(a.tokenizer))
            print(f"{mode:<6} {b:>5} " + " ".join(f"{us[c]:>9.1f}" for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
