#!/usr/bin/env python3
"""KV cache formats on one dense model (issue 12 item 4), on the GPU machine.

For each `--dtypes` entry (bf16, fp8): load the `--config` model with synthetic weights
(nothing read from disk) and `--kv-cache-dtype` set, then report
* capacity: how many `--context`-token sequences the KV pool would hold at
  --gpu-memory-utilization 0.9 with no batch cap (KvCacheConfig.plan with a batch of 4096,
  from this load's weight, scratch and free-memory figures), and bytes per token;
* decode: `--batch` sequences prefilled to `--context` tokens, then `--new` greedy steps
  through EngineCore.step: tok/s (prefill time reported too: the fp8 prefill attention is the
  CUDA-core baseline of attention_kvq.cu).
A benchmark, not a test. Prints a table, writes JSON (`--out`).

    python3 tools/gpu/bench_kv_dtypes.py [--config qwen3-8b] [--context 8192] [--batch 64]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_long_context import bench_decode  # noqa: E402
from bench_moe import synthetic_model_dir  # noqa: E402
from engine_decode import write_json  # noqa: E402

from atlas.runtime.kv_cache import KvCacheConfig, parse_kv_dtype  # noqa: E402


def capacity(runner, context: int, utilization: float) -> int:
    """Sequences of `context` tokens an uncapped pool would hold on this device."""
    kv, dev = runner.kv, runner.backend
    cfg = KvCacheConfig.plan(
        num_layers=kv.cfg.num_layers, num_kv_heads=kv.cfg.num_kv_heads,
        head_dim=kv.cfg.head_dim, max_batch_size=4096, max_seq_len=context,
        total_memory=dev.total_memory(), weight_bytes=runner.info.weights_bytes,
        arena_bytes=runner.arena.nbytes, gpu_memory_utilization=utilization,
        free_memory=dev.free_memory() + kv.nbytes, block_size=kv.cfg.block_size,
        dtype=kv.cfg.dtype, high_precision_layers=kv.cfg.high_precision_layers)
    return cfg.num_blocks // cfg.max_blocks_per_seq


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="qwen3-8b", help="a tools/make_fixtures.py config")
    ap.add_argument("--dtypes", default="bf16,fp8")
    ap.add_argument("--context", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="cuda", help="host: the flow on tiny configs")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from atlas.model.load import load_runner

    result: dict = {"config": a.config, "date": time.strftime("%Y-%m-%d"),
                    "commit": os.environ.get("ATLAS_COMMIT", "unknown"), "context": a.context,
                    "batch": a.batch, "new": a.new, "rows": {}}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = synthetic_model_dir(a.config, Path(tmp))
        for label in a.dtypes.split(","):
            parse_kv_dtype(label)
            runner = load_runner(model_dir, backend=a.backend,
                                 max_seq_len=a.context + a.new + 64, max_batch_size=a.batch,
                                 max_prefill_tokens=8192, gpu_memory_utilization=0.9,
                                 progress=None, synthetic_seed=a.seed, kv_cache_dtype=label)
            row = {"pool": runner.kv.describe(),
                   "bytes_per_token": runner.kv.cfg.bytes_per_token,
                   "sequences_at_context": capacity(runner, a.context + a.new, 0.9)}
            t0 = time.perf_counter()
            row["decode_tok_s"] = bench_decode(runner, a.batch, a.context, a.new,
                                               np.random.default_rng(a.seed))
            row["prefill_and_decode_s"] = time.perf_counter() - t0
            result["rows"][label] = row
            print(label, row, flush=True)
            if a.backend == "cuda":
                runner.backend.close()
    print(f"\n== {a.config} KV formats at {a.context}-token contexts, batch {a.batch}")
    print(f"{'kv':>5} {'B/token':>8} {'seqs@ctx':>9} {'decode tok/s':>13} {'wall s':>7}")
    for label, r in result["rows"].items():
        print(f"{label:>5} {r['bytes_per_token']:>8.0f} {r['sequences_at_context']:>9} "
              f"{r['decode_tok_s']:>13.1f} {r['prefill_and_decode_s']:>7.1f}")
    write_json(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
