#!/usr/bin/env python3
"""Where time to first token goes (GPU machine): the same requests through the engine core
alone and through the real server, with a timeline of the server's side of each.

The ttft-warm gate's request (a ~2,000-token system prompt cached, a short question after
it) took 23-36 ms in the server on the H200 while one engine-core prefill of it took ~13 ms on
an H100 (profile_prefill --cached), and a 16-token prompt's first token took 23 ms: a fixed
cost no kernel table shows. This tool measures, per request kind (cold long prompt, warm
prompt past the cached prefix, short prompt):

* core: `EngineCore.step` driven on this thread (the server's limits, async scheduling), from
  `add` to the first output carrying a token; and a cProfile of the warm requests' steps;
* server: `serve()` in this process around the same runner, the requests sent over HTTP by a
  client in another process (so it takes no share of this one's GIL), with each request's
  server-side marks: submitted to the engine thread, each launch and collect (host time),
  outputs routed onto the event loop; the client's first content chunk.

Prints tables; writes JSON with --out. `--backend host` with a small model is a CPU smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import http.client
import io
import json
import pstats
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

WORDS = ("water", "stone", "river", "cloud", "field", "light", "paper", "music", "table",
         "garden", "winter", "signal", "orange", "market", "forest", "bridge")


class Timeline:
    """(start, end, label, detail) marks from any thread, on one perf_counter clock."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, float, str, str]] = []
        self._lock = threading.Lock()

    def add(self, start: float, end: float, label: str, detail: str = "") -> None:
        with self._lock:
            self.marks.append((start, end, label, detail))

    def wrap(self, obj: Any, name: str, label: str,
             detail: Callable[..., str] = lambda *a: "") -> None:
        """Replace obj.name (an instance attribute shadows the method) by a timed twin."""
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.add(start, time.perf_counter(), label, detail(*args))
        setattr(obj, name, timed)

    def between(self, start: float, end: float) -> list[tuple[float, float, str, str]]:
        with self._lock:
            return [m for m in self.marks if start <= m[0] <= end]


def chunk_detail(chunks: Any) -> str:
    chunks = list(chunks)
    tokens = sum(len(c.token_ids) for c in chunks)
    return f"{len(chunks)} chunk(s) {tokens} tok"


def prompt_words(n: int, salt: str) -> str:
    return f"Session {salt}. Notes: " + " ".join(WORDS[(i * 7 + len(salt)) % len(WORDS)]
                                                  for i in range(n))


# ---- the client (a separate process) -------------------------------------------------------

def client(url: str, model: str, bodies: list[dict]) -> list[dict]:
    """Each body streamed in turn; the ms from sending to the first content delta and to the
    end, with the send's perf_counter (the same clock as the server's on this machine)."""
    host, port = url.split("//")[1].split(":")
    out = []
    for body in bodies:
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        payload = json.dumps({**body, "model": model, "stream": True})
        sent = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", payload,
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        first = None
        for raw in resp:
            line = raw.decode().strip()
            if first is None and line.startswith("data: {") and '"content":"' in line \
                    and '"content":""' not in line:
                first = time.perf_counter()
        end = time.perf_counter()
        conn.close()
        out.append({"sent": sent, "first": first, "end": end})
    return out


# ---- the engine core alone -------------------------------------------------------------------

def core_phase(runner: Any, tok: Any, limits: Any, bodies: list[tuple[str, dict]],
               timeline: Timeline) -> list[dict]:
    from atlas.core.sampling import GREEDY
    from atlas.engine.core import EngineCore
    from atlas.engine.request import EngineRequest

    core = EngineCore.build(runner, max_prefill_tokens=limits.max_prefill_tokens,
                            max_mixed_step_tokens=limits.max_mixed_step_tokens,
                            max_num_seqs=limits.max_num_seqs, max_seq_len=limits.max_seq_len,
                            async_scheduling=True)
    rows = []
    profiler = cProfile.Profile()
    for seq_id, (kind, body) in enumerate(bodies, start=1):
        text = tok.chat_template(False).render(body["messages"], tools=None,
                                               add_generation_prompt=True,
                                               enable_thinking=False, extra=None)
        ids = tok.encode(text, add_special_tokens=False)
        profiling = kind == "profiled"  # warm requests kept out of the medians
        if profiling:
            profiler.enable()
        start = time.perf_counter()
        core.add(seq_id, EngineRequest(ids, GREEDY, body["max_tokens"]))
        first = None
        steps = 0
        while core.has_work:
            report = core.step()
            steps += 1
            if first is None and any(o.seq_id == seq_id and o.new_token_ids
                                     for o in report.outputs):
                first = time.perf_counter()
                steps_to_first = steps
        end = time.perf_counter()
        if profiling:
            profiler.disable()
        rows.append({"kind": kind, "prompt": len(ids), "ttft_ms": (first - start) * 1e3,
                     "steps_to_first": steps_to_first, "total_ms": (end - start) * 1e3,
                     "marks": rel_marks(timeline, start, first)})
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(22)
    print("\n== cProfile of two more warm requests through the core (by own time)")
    print("\n".join(line for line in stream.getvalue().splitlines()[6:] if line.strip()))
    return rows


def rel_marks(timeline: Timeline, start: float, end: float | None) -> list[str]:
    if end is None:
        return []
    return [f"{(s - start) * 1e3:7.2f} .. {(e - start) * 1e3:7.2f}  {label} {detail}"
            for s, e, label, detail in sorted(timeline.between(start, end))]


# ---- the real server -------------------------------------------------------------------------

def server_phase(model_dir: Path, runner: Any, limits: Any, bodies: list[tuple[str, dict]],
                 timeline: Timeline, port: int, switch_interval: float | None = None
                 ) -> list[dict]:
    """The requests through `serve()` as `atlas serve` runs it (its interpreter settings:
    app_serve.tune_serving_process), with the GIL switch interval then set to
    `switch_interval` where given."""
    from atlas.server.app_assets import load_assets
    from atlas.server.app_serve import serve, shutdown
    from atlas.server.context import ServerContext, ServerOptions
    from atlas.server.metrics import ServerMetrics

    assets = load_assets(model_dir)
    ctx = ServerContext(ServerOptions(model_name="m"), assets.tokenizer, ServerMetrics("m"))
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        holder["runner"] = loop.run_until_complete(serve(ctx, "127.0.0.1", port, lambda: runner,
                                                         limits, ready.set, serving_process=True))
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(600):
        raise RuntimeError("the server did not start")
    if switch_interval is not None:
        sys.setswitchinterval(switch_interval)
    engine = ctx.engine
    timeline.wrap(engine.thread, "submit", "submit")
    timeline.wrap(engine, "_route", "outputs routed on the loop")
    timeline.wrap(engine.thread.core.scheduler, "schedule", "schedule")
    payload = json.dumps([b for _, b in bodies])
    proc = subprocess.run([sys.executable, __file__, "--client", f"http://127.0.0.1:{port}"],
                          input=payload, capture_output=True, text=True, check=True)
    got = json.loads(proc.stdout)
    rows = []
    for (kind, _), g in zip(bodies, got):
        first = g["first"]
        rows.append({"kind": kind, "ttft_ms": (first - g["sent"]) * 1e3 if first else None,
                     "total_ms": (g["end"] - g["sent"]) * 1e3,
                     "marks": rel_marks(timeline, g["sent"], first)})
    asyncio.run_coroutine_threadsafe(shutdown(ctx, holder["runner"]), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    return rows


def summarize(title: str, rows: list[dict]) -> None:
    print(f"\n== {title}: ms from sending (server) / add (core) to the first token")
    for kind in ("cold", "warm", "short"):
        got = [r["ttft_ms"] for r in rows if r["kind"] == kind and r["ttft_ms"] is not None]
        if got:
            print(f"{kind:6s} n={len(got)}  median {statistics.median(got):7.2f}  "
                  f"min {min(got):7.2f}  max {max(got):7.2f}  all "
                  + " ".join(f"{x:.1f}" for x in got))
    for kind in ("warm", "short"):
        picked = [r for r in rows if r["kind"] == kind and r["marks"]]
        if picked:
            last = picked[-1]
            print(f"-- the last {kind} request's marks (ms after its start; TTFT "
                  f"{last['ttft_ms']:.2f})")
            print("\n".join("   " + m for m in last["marks"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--synthetic-seed", type=int)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--words", type=int, default=2000, help="the system prompt's words")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warm", type=int, default=4, help="warm requests a round")
    ap.add_argument("--short", type=int, default=4, help="16-word prompts, no system prompt")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--max-batch-size", type=int, default=256)
    ap.add_argument("--port", type=int, default=8911)
    ap.add_argument("--switch-intervals", default="",
                    help="comma-separated GIL switch intervals (seconds): the server phase again "
                         "under each, set after serve()'s own (0.005: Python's default)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.client:
        print(json.dumps(client(a.client, "m", json.loads(sys.stdin.read()))))
        return 0

    from atlas.engine.scheduler import DEFAULT_MIXED_STEP_TOKENS
    from atlas.model.load import load_runner
    from atlas.server.app_assets import load_assets
    from atlas.server.app_serve import EngineLimits

    limits = EngineLimits(max_num_seqs=a.max_batch_size, max_seq_len=4096,
                          max_prefill_tokens=2048,
                          max_mixed_step_tokens=DEFAULT_MIXED_STEP_TOKENS)
    runner = load_runner(a.model, backend=a.backend, max_seq_len=4096,
                         max_batch_size=a.max_batch_size, max_prefill_tokens=2048,
                         gpu_memory_utilization=0.9, synthetic_seed=a.synthetic_seed)
    timeline = Timeline()
    for name in ("launch", "collect", "execute"):
        if hasattr(runner, name):
            timeline.wrap(runner, name, name, chunk_detail if name != "collect" else
                          lambda launched: f"{len(launched.steps)} chunk(s)")
    tok = load_assets(a.model).tokenizer

    def bodies(salt: str) -> list[tuple[str, dict]]:
        """Rounds of one cold long prompt then warm ones past it, then short prompts."""
        out = []
        for r in range(a.rounds):
            system = prompt_words(a.words, f"{salt}-{r}")
            for i in range(1 + a.warm):
                out.append(("cold" if i == 0 else "warm", {
                    "messages": [{"role": "system", "content": system},
                                 {"role": "user", "content": f"Question {i} about the notes?"}],
                    "max_tokens": a.max_tokens, "temperature": 0}))
        for i in range(a.short):
            out.append(("short", {"messages": [{"role": "user", "content": prompt_words(
                12, f"{salt}-s{i}")}], "max_tokens": a.max_tokens, "temperature": 0}))
        last_warm = out[a.rounds * (1 + a.warm) - 1][1]
        return out + [("profiled", last_warm)] * 2

    core_rows = core_phase(runner, tok, limits, bodies("core"), timeline)
    summarize("engine core alone", core_rows)
    server_rows = server_phase(a.model, runner, limits, bodies("server"), timeline, a.port)
    summarize("server (HTTP from another process)", server_rows)
    for i, interval in enumerate(float(x) for x in a.switch_intervals.split(",") if x):
        rows = server_phase(a.model, runner, limits, bodies(f"si{i}"), timeline, a.port + 1 + i,
                            interval)
        summarize(f"server, GIL switch interval {interval * 1e3:g} ms", rows)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"core": core_rows, "server": server_rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
