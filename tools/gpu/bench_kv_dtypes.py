#!/usr/bin/env python3
"""KV cache formats on one dense model (issue 12 item 4), on the GPU machine.

For each `--dtypes` entry (bf16, fp8, nvfp4): load the `--config` model with synthetic
weights (nothing read from disk) and `--kv-cache-dtype` set, then report
* capacity: how many `--context`-token sequences the KV pool would hold at
  --gpu-memory-utilization 0.9 with no batch cap (KvCacheConfig.plan with a batch of 4096,
  from this load's weight, scratch and free-memory figures), and bytes per token;
* decode: `--batch` sequences at `--context` cached tokens each, `--new` greedy decode
  steps through the runner's captured graphs: tok/s and the KV bytes each step reads.
  The sequences are not prefilled: their cache rows keep what the pool holds (zeros; the
  scales are calibrated by one short prefill first, so quantized rows dequantize through
  real scales). Decode reads every cached row whatever its value, so this measures the
  same bytes and arithmetic as after a prefill, without the minutes a 64 x 8,192-token
  prefill costs through the CUDA-core quantized prefill attention.
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

from bench_moe import synthetic_model_dir  # noqa: E402
from engine_decode import write_json  # noqa: E402

from atlas.core.sampling import GREEDY  # noqa: E402
from atlas.model.batch import PenaltyHistory, SeqChunk  # noqa: E402
from atlas.runtime.kv_cache import KvCacheConfig, parse_kv_dtype  # noqa: E402

#: tokens of the prefill that calibrates the quantized formats' scales
CALIBRATION_PROMPT = 64


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


def decode_tok_s(runner, batch: int, context: int, steps: int,
                 rng: np.random.Generator) -> float:
    """tok/s of `batch` sequences decoding `steps` tokens at positions context, context + 1,
    ... (see the module doc: no prefill; the first step is a warm-up)."""
    vocab = runner.vocab_size
    per_seq = -(-(context + steps + 1) // runner.block_size)
    if batch * per_seq > runner.kv.num_blocks:
        raise RuntimeError(f"the pool holds {runner.kv.num_blocks} blocks, the benchmark "
                           f"needs {batch * per_seq}")
    tables = [list(range(i * per_seq, (i + 1) * per_seq)) for i in range(batch)]
    warm = [int(t) for t in rng.integers(3, vocab, CALIBRATION_PROMPT)]
    calib_id = batch    # a sequence id none of the decoding rows uses
    runner.execute([SeqChunk(calib_id, warm, 0, tables[0], GREEDY,
                             history=PenaltyHistory(warm))])
    runner.release(calib_id)
    tokens = [int(t) for t in rng.integers(3, vocab, batch)]
    runner.execute([SeqChunk(i, [tokens[i]], context, tables[i], GREEDY,
                             history=PenaltyHistory([tokens[i]])) for i in range(batch)])
    t0 = time.perf_counter()
    for k in range(1, steps):
        results = runner.execute([SeqChunk(i, [tokens[i]], context + k, tables[i], GREEDY,
                                           rng_position=k) for i in range(batch)])
        tokens = [int(r) for r in results]   # type: ignore[arg-type]  # greedy: token ids
    dt = time.perf_counter() - t0
    for i in range(batch):
        runner.release(i)
    return batch * (steps - 1) / dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="qwen3-8b", help="a tools/make_fixtures.py config")
    ap.add_argument("--dtypes", default="bf16,fp8,nvfp4")
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
            t0 = time.perf_counter()
            runner = load_runner(model_dir, backend=a.backend,
                                 max_seq_len=a.context + a.new + 16, max_batch_size=a.batch,
                                 max_prefill_tokens=2048, gpu_memory_utilization=0.9,
                                 progress=None, synthetic_seed=a.seed, kv_cache_dtype=label)
            kv = runner.kv.cfg
            row = {"pool": runner.kv.describe(), "bytes_per_token": kv.bytes_per_token,
                   "sequences_at_context": capacity(runner, a.context + a.new, 0.9),
                   "load_s": time.perf_counter() - t0}
            tps = decode_tok_s(runner, a.batch, a.context, a.new,
                               np.random.default_rng(a.seed))
            row["decode_tok_s"] = tps
            # every step reads each sequence's whole cache once (all layers, K and V)
            row["kv_gb_s"] = kv.bytes_per_token * (a.context + a.new / 2) * tps / 1e9
            row["wall_s"] = time.perf_counter() - t0
            result["rows"][label] = row
            print(label, row, flush=True)
            if a.backend == "cuda":
                runner.backend.close()
    print(f"\n== {a.config} KV formats at {a.context}-token contexts, batch {a.batch}")
    print(f"{'kv':>6} {'B/token':>8} {'seqs@ctx':>9} {'decode tok/s':>13} {'KV GB/s':>8} "
          f"{'wall s':>7}")
    for label, r in result["rows"].items():
        print(f"{label:>6} {r['bytes_per_token']:>8.0f} {r['sequences_at_context']:>9} "
              f"{r['decode_tok_s']:>13.1f} {r['kv_gb_s']:>8.1f} {r['wall_s']:>7.1f}")
    write_json(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
