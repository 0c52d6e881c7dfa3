#!/usr/bin/env python3
"""The throughput suite's 64-stream level through the real Scheduler and a cost model of the
GPU steps (CPU only, seconds): what a step budget or a faster kernel buys in wall time,
prompt+completion tok/s, inter-token latency and time to first token.

Every request arrives at t = 0 with its own random prompt (no prefix-cache hits); each step
the scheduler plans is charged, from H200 measurements of Qwen3-8B bf16 (defaults,
2026-12-01, gpu12 / gpu12b):

* a decode-only step: `--decode-fixed-ms` (GEMMs, norms, sampling: 13.5 ms at 64 rows and
  1,536-token contexts minus attention) + attention, `--attn-ms` scaled by the step's keys
  over 64 x 1,536;
* a step with prompt tokens: its tokens at `--prefill-tok-s` + its decode rows' attention x
  `--mixed-attn-factor` (2: on the prefill kernel, as before the decode rows got the decode
  kernel) + `--mixed-overhead-ms`.

`--profile` takes both decode costs from a tools/gpu/profile_decode.py JSON instead (the
suite's `thru_b64` stage writes them): its GPU ms per step, split into the attention kernels'
time (rows whose kernel name holds "attn"; exact from a PDL-off profile, whose rows add up)
scaled to 64 x 1,536 keys, and the rest.

At the defaults with --max-mixed-step-tokens 0 (one 2,048-token budget) and factor 2 it
reproduces the measured level: 15.8 s vs 15.9 s, 8,279 vs 8,264 tok/s, inter-token p99 65
vs 69.4 ms. A model, not a measurement: tools/gpu/bench_mixed_step.py and the `throughput`
suite stage measure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "py"))

from atlas.core.sampling import GREEDY  # noqa: E402
from atlas.engine.block_manager import BlockManager  # noqa: E402
from atlas.engine.request import EngineRequest  # noqa: E402
from atlas.engine.scheduler import DEFAULT_MIXED_STEP_TOKENS, Scheduler  # noqa: E402
from atlas.engine.scheduling_policy import FifoPolicy  # noqa: E402
from atlas.runtime.kv_cache import BlockAllocator  # noqa: E402

#: the contexts `--attn-ms` was measured at: 64 rows of 1,536 keys
ATTN_REFERENCE_KEYS = 64 * 1536


def simulate(a: argparse.Namespace) -> dict[str, float]:
    """Step the scheduler over `a.streams` requests; return wall, tok/s, ITL and TTFT."""
    block = 16
    blocks = a.streams * -(-(a.prompt + a.new) // block) + a.streams
    sched = Scheduler(BlockManager(BlockAllocator(blocks), blocks, block), FifoPolicy(),
                      max_num_seqs=a.streams, max_seq_len=a.prompt + a.new + 1,
                      max_prefill_tokens=a.max_prefill_tokens,
                      max_mixed_step_tokens=a.max_mixed_step_tokens or None)
    for i in range(a.streams):   # distinct prompts: nothing for the prefix cache
        ids = [100 + (i * 7919 + j) % 100_000 for j in range(a.prompt)]
        sched.add(i, EngineRequest(ids, GREEDY, a.new), 0.0)
    now, last, itl, ttft = 0.0, {}, [], []
    while sched.has_work:
        plan = sched.schedule(now)
        ones = [c for c in plan.chunks if len(c.token_ids) == 1]
        prompt_tokens = sum(len(c.token_ids) for c in plan.chunks) - len(ones)
        attn = a.attn_ms * sum(c.start_pos + 1 for c in ones) / ATTN_REFERENCE_KEYS
        if prompt_tokens:
            ms = ((prompt_tokens + len(ones)) / a.prefill_tok_s * 1e3
                  + attn * a.mixed_attn_factor + a.mixed_overhead_ms)
        else:
            ms = a.decode_fixed_ms + attn
        now += ms / 1e3
        for out in sched.commit(plan, [7 if c.sample else None for c in plan.chunks], now):
            (itl if out.seq_id in last else ttft).append(
                (now - last.get(out.seq_id, 0.0)) * 1e3)
            last[out.seq_id] = now
    itl.sort()
    ttft.sort()
    return {"wall_s": now, "tok_s": a.streams * (a.prompt + a.new) / now,
            "itl_p50_ms": itl[len(itl) // 2], "itl_p99_ms": itl[int(len(itl) * 0.99)],
            "itl_max_ms": itl[-1], "ttft_p50_ms": ttft[len(ttft) // 2],
            "ttft_p99_ms": ttft[int(len(ttft) * 0.99)]}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=1024)
    ap.add_argument("--new", type=int, default=1024)
    ap.add_argument("--max-prefill-tokens", type=int, default=2048)
    ap.add_argument("--max-mixed-step-tokens", type=int, default=DEFAULT_MIXED_STEP_TOKENS,
                    help="0: none (the prefill budget for every step)")
    ap.add_argument("--decode-fixed-ms", type=float, default=5.7)
    ap.add_argument("--attn-ms", type=float, default=7.8)
    ap.add_argument("--prefill-tok-s", type=float, default=35_000)
    ap.add_argument("--mixed-attn-factor", type=float, default=1.0)
    ap.add_argument("--mixed-overhead-ms", type=float, default=1.0)
    ap.add_argument("--profile", type=Path,
                    help="profile_decode.py JSON: sets --decode-fixed-ms and --attn-ms")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args(argv)
    if a.profile is not None:
        a.decode_fixed_ms, a.attn_ms = decode_costs(json.loads(a.profile.read_text()))
    return a


def decode_costs(profile: dict) -> tuple[float, float]:
    """(fixed ms, attention ms at 64 x 1,536 keys) of a decode step from a profile_decode.py
    record: the attention kernels' us per step (name holds "attn"), scaled from the record's
    batch x context keys, and the rest of its GPU ms per step."""
    attn_ms = sum(r["us_per_step"] for r in profile["kernels"] if "attn" in r["kernel"]) / 1e3
    keys = profile["batch"] * profile["context"]
    return profile["gpu_ms"] - attn_ms, attn_ms * ATTN_REFERENCE_KEYS / keys


def main() -> int:
    a = parse_args()
    result = simulate(a)
    if a.json:
        print(json.dumps(result))
    else:
        print("  ".join(f"{k} {v:,.1f}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
