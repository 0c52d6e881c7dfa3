#!/usr/bin/env python3
"""Long contexts on one dense model (issue 15), as fractions of the roofline (GPU machine).

* Prefill: one sequence of `--prefill` tokens (default 32,000) in one engine step (the whole
  prompt one chunk, as bench_decode.py measures prefill): tok/s, and the fraction of the
  measured bf16 matmul peak that the step's FLOPs need: the projections (2 x their weights'
  elements per token) plus causal attention (QK^T and PV, 2 FLOPs each per query, key and
  head-dim element: about 2 T^2 D hq FLOPs per layer for a T-token prompt).
* Decode: `--batch` sequences (default 8) prefilled to each of `--contexts` (default 16,384
  and 32,768) tokens, then `--new` greedy steps through `EngineCore.step`: tok/s, and the
  fraction of the measured device-copy bandwidth that the step's bytes need: every weight
  plus the batch's K/V at the mean context (atlas.bench.decode_bytes).

Weights are generated on the device from a seed (`--config`, a tools/make_fixtures.py
config: only its config.json is written), so nothing is read from disk. One runner serves
every measurement (its max_seq_len fits the longest context), so decode attention takes the
engine's long-context path (ops/attention_long.py) for both contexts. Prints a table last and
writes JSON (`--out`). A benchmark, not a test: it asserts nothing about speed.

    python3 tools/gpu/bench_long_context.py [--config qwen3-8b] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_decode import copy_bandwidth_gbs  # noqa: E402
from bench_moe import synthetic_model_dir  # noqa: E402
from engine_decode import start_decoding, stop_all, write_json  # noqa: E402

from atlas.bench.decode_bytes import BF16, decode_bytes_per_step  # noqa: E402
from atlas.core.config import ModelConfig  # noqa: E402
from atlas.core.sampling import GREEDY  # noqa: E402
from atlas.engine.core import EngineCore  # noqa: E402
from atlas.engine.request import EngineRequest  # noqa: E402


#: H200 dense bf16 tensor-core peak from the data sheet (989.4 TFLOP/s at 1,830 MHz boost);
#: the measured torch.matmul ceiling (~790-800) is the other denominator printed
NOMINAL_PEAK_TFLOPS = 989.0


def matmul_peak_tflops() -> float:
    """bf16 torch.matmul of 8192^3, median of 20 (the kernel table's ceiling)."""
    import torch

    n = 8192
    a = torch.randn((n, n), dtype=torch.bfloat16, device="cuda")
    b = torch.randn((n, n), dtype=torch.bfloat16, device="cuda")
    times = []
    for _ in range(24):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return 2 * n ** 3 / statistics.median(times[4:]) / 1e12


def prefill_flops(cfg: ModelConfig, tokens: int) -> dict[str, float]:
    """FLOPs of a `tokens`-token prefill from position 0: the projections (2 x weight
    elements per token; the LM head runs for the one sampled row) and causal attention."""
    if cfg.moe is not None or cfg.is_hybrid:
        raise ValueError("bench_long_context counts dense full-attention models only")
    weights = decode_bytes_per_step(cfg, 0, 1)
    per_token = 2 * (weights["attention"] + weights["dense_mlp"]) / BF16
    lm_head = 2 * weights["lm_head"] / BF16
    d, hq = cfg.head_dim, cfg.num_attention_heads
    # keys seen by query t: t + 1; QK^T and PV are each 2 FLOPs per (query, key, d)
    attention = 4.0 * d * hq * tokens * (tokens + 1) / 2 * cfg.num_hidden_layers
    return {"linear": per_token * tokens + lm_head, "attention": attention}


def bench_prefill(runner, tokens: int, repeats: int, rng: np.random.Generator) -> float:
    """tok/s of one `tokens`-token prompt in one step (median after a warm-up), committed
    by the same call (synchronous steps)."""
    core = EngineCore.build(runner, max_prefill_tokens=tokens, max_num_seqs=1,
                            async_scheduling=False)
    times = []
    for i in range(repeats + 1):
        ids = rng.integers(100, runner.vocab_size - 100, tokens).tolist()
        core.add(i, EngineRequest(ids, GREEDY, 1))
        t0 = time.perf_counter()
        core.step()
        times.append(time.perf_counter() - t0)
        if core.has_work:
            raise RuntimeError(f"a {tokens}-token prompt did not prefill in one step")
    return tokens / statistics.median(times[1:])


def bench_decode(runner, batch: int, context: int, new: int, rng: np.random.Generator) -> float:
    """tok/s of `batch` sequences decoding `new` tokens after `context`-token prompts."""
    core = start_decoding(runner, batch, context, new + 8, rng)
    core.step()  # warm
    generated = 0
    t0 = time.perf_counter()
    for _ in range(new - 1):
        generated += core.step().num_generated
    dt = time.perf_counter() - t0
    stop_all(core)
    return generated / dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="qwen3-8b", help="a tools/make_fixtures.py config")
    ap.add_argument("--prefill", type=int, default=32000, help="0: no prefill measurement")
    ap.add_argument("--prefill-repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--contexts", default="16384,32768")
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--backend", default="cuda",
                    help="cuda; host runs the flow on the numpy references (tiny configs)")
    a = ap.parse_args()
    contexts = [int(x) for x in a.contexts.split(",") if x]
    from atlas.model.load import load_runner

    result: dict = {"config": a.config, "date": time.strftime("%Y-%m-%d"),
                    "commit": os.environ.get("ATLAS_COMMIT", "unknown"), "seed": a.seed,
                    "batch": a.batch, "new": a.new, "prefill_tokens": a.prefill,
                    "env": {k: v for k, v in os.environ.items() if k.startswith("ATLAS_")}}
    cuda = a.backend == "cuda"
    result["copy_gbs"] = copy_bandwidth_gbs() if cuda else float("nan")
    result["peak_tflops"] = matmul_peak_tflops() if cuda else float("nan")
    rng = np.random.default_rng(a.seed)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = synthetic_model_dir(a.config, Path(tmp))
        cfg = ModelConfig.from_hf(model_dir)
        longest = max([a.prefill, *contexts])
        runner = load_runner(model_dir, backend=a.backend, max_seq_len=longest + a.new + 64,
                             max_batch_size=a.batch, max_prefill_tokens=max(a.prefill, 8192),
                             gpu_memory_utilization=0.9, fast_load=True, progress=None,
                             synthetic_seed=a.seed)
        if a.prefill > 0:
            tps = bench_prefill(runner, a.prefill, a.prefill_repeats, rng)
            flops = prefill_flops(cfg, a.prefill)
            achieved = sum(flops.values()) * tps / a.prefill / 1e12
            result["prefill"] = {"tok_s": tps, "flops": flops, "tflops": achieved,
                                 "peak_fraction": achieved / result["peak_tflops"],
                                 "nominal_peak_fraction": achieved / NOMINAL_PEAK_TFLOPS}
        result["decode"] = {}
        for context in contexts:
            tps = bench_decode(runner, a.batch, context, a.new, rng)
            step_bytes = sum(decode_bytes_per_step(cfg, context + a.new // 2, a.batch).values())
            gbs = step_bytes * tps / a.batch / 1e9
            result["decode"][context] = {"tok_s": tps, "bytes_per_step": step_bytes,
                                         "gb_s": gbs, "bw_fraction": gbs / result["copy_gbs"]}
        if cuda:
            runner.backend.close()

    print(f"\n== {a.config} (synthetic weights): copy {result['copy_gbs']:.0f} GB/s, bf16 "
          f"matmul {result['peak_tflops']:.0f} TFLOP/s")
    p = result.get("prefill")
    if p:
        f = p["flops"]
        print(f"prefill {a.prefill} tok: FLOPs linear 2 x params x T = {f['linear']:.3e}, "
              f"attention 4 L hq D T^2 / 2 = {f['attention']:.3e} "
              f"({100 * f['attention'] / sum(f.values()):.0f}%)")
        print(f"prefill {a.prefill} tok: {p['tok_s']:.0f} tok/s, {p['tflops']:.0f} TFLOP/s = "
              f"{100 * p['peak_fraction']:.1f}% of the measured matmul peak, "
              f"{100 * p['nominal_peak_fraction']:.1f}% of {NOMINAL_PEAK_TFLOPS:.0f} TFLOP/s "
              f"(target >= 55%)")
    print(f"{'context':>8} {'batch':>5} {'tok/s':>8} {'GB/step':>8} {'GB/s':>7} {'% BW':>6}")
    for context, d in result["decode"].items():
        print(f"{context:>8} {a.batch:>5} {d['tok_s']:>8.1f} {d['bytes_per_step'] / 1e9:>8.2f} "
              f"{d['gb_s']:>7.0f} {100 * d['bw_fraction']:>5.1f}%  (target >= 75%)")
    write_json(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
