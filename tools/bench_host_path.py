"""How much of the serving loop's host work lands on the GPU's critical path.

The real server (aiohttp, engine thread, scheduler, detokenization, SSE framing) around a
stand-in executor whose "device" takes a modelled time per step and costs no CPU: `launch`
queues the step on a virtual device timeline (it starts when the previous step ends, or
now if the device is idle), `collect` sleeps until that step's end. The real benchmark
client (`atlas benchmark run throughput`, closed loop) drives it. Whatever keeps the
virtual device idle is host work on the critical path: the table prints the device's busy
fraction over the measured window, the modelled step time against the measured time per
output token, and the client's tok/s.

Runs on any machine (no GPU). The step model is a line fitted to H200 profiles of Qwen3-8B
bf16 (`--step-us` + `--row-us` x decode rows + `--prefill-us` x prompt tokens; defaults:
4.6 ms + 78 us a decode row + 27 us a prompt token, i.e. 9.6 ms at 64 rows), so the
client sees roughly the real device's pacing.

    PYTHONPATH=py python3 tools/bench_host_path.py --tokenizer DIR --concurrency 64 \
        --input-tokens 1024 --max-tokens 1024
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from atlas.model.batch import SeqChunk, StepResult
from atlas.server.app_assets import load_assets
from atlas.server.app_serve import EngineLimits, serve, shutdown
from atlas.server.context import ServerContext, ServerOptions
from atlas.server.metrics import ServerMetrics


@dataclass(frozen=True)
class StepModel:
    """Modelled device time of a step, in seconds."""

    base_s: float
    row_s: float
    prefill_token_s: float

    def cost(self, chunks: Sequence[SeqChunk]) -> float:
        decode_rows = sum(1 for c in chunks if len(c.token_ids) == 1)
        prompt = sum(len(c.token_ids) for c in chunks if len(c.token_ids) > 1)
        return self.base_s + self.row_s * decode_rows + self.prefill_token_s * prompt


@dataclass
class _Launched:
    end: float
    results: list[StepResult]


class TimedExecutor:
    """A StepExecutor whose device is a timeline: no model, no CPU spent on the step.

    Tokens are drawn from `vocab_ids` by (sequence, position), never the end-of-sequence
    token, so every request runs to max_tokens."""

    block_size = 16
    max_num_draft_tokens = 0
    has_recurrent_state = False
    num_state_snapshots = 0
    can_run_ahead = True

    def __init__(self, model: StepModel, vocab_ids: Sequence[int], vocab_size: int,
                 max_batch_size: int = 256, max_seq_len: int = 4096,
                 num_kv_blocks: int = 65536) -> None:
        self.model = model
        self.vocab_ids = list(vocab_ids)
        self.vocab_size = vocab_size
        self.max_batch_size = max_batch_size
        self.max_seq_len = max_seq_len
        self.num_kv_blocks = num_kv_blocks
        self._free_at = 0.0
        self._lock = threading.Lock()
        #: (start, end, decode rows) of every step on the virtual device
        self.intervals: list[tuple[float, float, int]] = []

    def launch(self, chunks: Sequence[SeqChunk]) -> _Launched:
        cost = self.model.cost(chunks)
        rows = sum(1 for c in chunks if len(c.token_ids) == 1)
        with self._lock:
            start = max(time.perf_counter(), self._free_at)
            end = self._free_at = start + cost
            self.intervals.append((start, end, rows))
        n = len(self.vocab_ids)
        results: list[StepResult] = [
            self.vocab_ids[(c.seq_id * 7919 + c.start_pos + len(c.token_ids)) % n]
            if c.sample else None for c in chunks]
        return _Launched(end, results)

    def collect(self, launched: _Launched) -> list[StepResult]:
        wait = launched.end - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        return launched.results

    def execute(self, chunks: Sequence[SeqChunk]) -> list[StepResult]:
        return self.collect(self.launch(chunks))

    def release(self, seq_id: int) -> None:
        """No per-sequence device state."""

    def state_slot_usage(self) -> tuple[int, int]:
        return 0, 0

    def window(self, since: float) -> tuple[float, float, int, int]:
        """(span, busy seconds, steps, decode rows) of the steps launched after `since`:
        span runs from the first one's start to the last one's end."""
        with self._lock:
            steps = [iv for iv in self.intervals if iv[0] >= since]
        if not steps:
            return 0.0, 0.0, 0, 0
        return (steps[-1][1] - steps[0][0], sum(e - s for s, e, _ in steps), len(steps),
                sum(r for _, _, r in steps))


def ordinary_ids(tokenizer, limit: int = 4096) -> list[int]:
    """Ids that decode to plain printable ASCII words (no markers, no partial bytes)."""
    ids = []
    for tid in range(min(tokenizer.vocab_size, 60000)):
        text = tokenizer.decode([tid])
        if text and text.isascii() and text.strip().isalpha() and "<" not in text:
            ids.append(tid)
            if len(ids) >= limit:
                break
    return ids


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", type=Path, required=True,
                    help="a model directory with tokenizer.json (+ tokenizer_config.json)")
    ap.add_argument("--concurrency", type=int, action="append",
                    help="closed-loop levels (repeat; default 1 and 64)")
    ap.add_argument("--requests", type=int, default=0,
                    help="requests per level (default: the concurrency)")
    ap.add_argument("--input-tokens", type=int, default=1024)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--step-us", type=float, default=4600.0)
    ap.add_argument("--row-us", type=float, default=78.0)
    ap.add_argument("--prefill-us", type=float, default=27.0)
    ap.add_argument("--port", type=int, default=8931)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    levels = args.concurrency or [1, 64]

    assets = load_assets(args.tokenizer, behavior_lookup=lambda cfg: {})
    name = "host-path"
    ctx = ServerContext(ServerOptions(model_name=name), assets.tokenizer, ServerMetrics(name))
    model = StepModel(args.step_us * 1e-6, args.row_us * 1e-6, args.prefill_us * 1e-6)
    executor = TimedExecutor(model, ordinary_ids(assets.tokenizer), assets.tokenizer.vocab_size)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    def run_server() -> None:
        asyncio.set_event_loop(loop)
        holder["runner"] = loop.run_until_complete(serve(
            ctx, "127.0.0.1", args.port, lambda: executor,
            EngineLimits(max_seq_len=args.input_tokens + args.max_tokens + 64), ready.set))
        loop.run_forever()

    threading.Thread(target=run_server, daemon=True).start()
    if not ready.wait(60):
        raise SystemExit("server did not start")
    rows = []
    for conc in levels:
        since = time.perf_counter()
        cmd = [sys.executable, "-m", "atlas_cli.main", "benchmark", "run", "throughput",
               "--url", f"http://127.0.0.1:{args.port}", "--model", name,
               "--param", f"concurrencies={conc}", "--param", "weights=1",
               "--param", f"requests_per_level={args.requests or conc}",
               "--param", f"input_tokens={args.input_tokens}",
               "--param", f"max_tokens={args.max_tokens}", "--param", "warmup_requests=0",
               "--format", "json", "--no-fail-on-verdict"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"benchmark failed at c{conc}")
        metrics = json.loads(done.stdout)["metrics"]
        wall, busy, steps, decode_rows = executor.window(since)
        rows.append({"concurrency": conc, "wall_s": wall, "device_busy": busy / wall,
                     "steps": steps, "mean_step_ms": 1e3 * busy / max(steps, 1),
                     "decode_rows_per_step": decode_rows / max(steps, 1),
                     "tpot_ms": metrics[f"c{conc}.tpot_mean_ms"],
                     "ttft_p50_ms": metrics[f"c{conc}.ttft_p50_ms"],
                     "total_tok_s": metrics[f"c{conc}.aggregate_total_tok_s"]})
    asyncio.run_coroutine_threadsafe(shutdown(ctx, holder["runner"]), loop).result(30)
    print(f"{'conc':>5} {'wall s':>7} {'busy':>6} {'steps':>6} {'step ms':>8} {'rows/step':>9} "
          f"{'tpot ms':>8} {'ttft p50':>9} {'tok/s':>9}")
    for r in rows:
        print(f"{r['concurrency']:>5} {r['wall_s']:>7.2f} {r['device_busy']:>6.1%} "
              f"{r['steps']:>6} {r['mean_step_ms']:>8.3f} {r['decode_rows_per_step']:>9.1f} "
              f"{r['tpot_ms']:>8.3f} {r['ttft_p50_ms']:>9.1f} {r['total_tok_s']:>9.1f}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
