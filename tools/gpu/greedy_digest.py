#!/usr/bin/env python3
"""The greedy tokens of a batch of random prompts through the engine, as one digest: an A/B
of a host-path change (the same kernels either way) must print the same digest.

Runs `LLMEngine.generate` (async scheduling on: carried tokens, graph steps) over `--batch`
random prompts of `--prompt` tokens with `--tokens` new tokens each, greedy, no stop token,
on synthetic weights (seed 0) or a checkpoint; prints the sha256 of every sequence's tokens
in order and the first sequence's first tokens. Sequences start together, so the batch's
decode steps take the graph bucket of `--batch` rows.

Usage: greedy_digest.py --model DIR [--synthetic-seed 0] [--batch 8] [--tokens 48]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from atlas.core.sampling import GREEDY  # noqa: E402
from atlas.engine.llm_engine import LLMEngine  # noqa: E402
from atlas.engine.request import EngineRequest  # noqa: E402
from engine_decode import random_prompts  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--synthetic-seed", type=int)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=40)
    ap.add_argument("--tokens", type=int, default=48)
    a = ap.parse_args()

    from atlas.model.load import load_runner

    runner = load_runner(a.model, backend=a.backend, max_seq_len=a.prompt + a.tokens + 16,
                         max_batch_size=a.batch, max_prefill_tokens=a.batch * a.prompt,
                         synthetic_seed=a.synthetic_seed)
    prompts = random_prompts(runner, a.batch, a.prompt, np.random.default_rng(0))
    engine = LLMEngine(runner, max_prefill_tokens=a.batch * a.prompt)
    outs = engine.generate([EngineRequest(p, GREEDY, a.tokens) for p in prompts])
    tokens = [o.token_ids for o in outs]
    if any(len(t) != a.tokens for t in tokens):
        raise SystemExit(f"a sequence ended early: {[len(t) for t in tokens]}")
    digest = hashlib.sha256(np.asarray(tokens, dtype=np.int64).tobytes()).hexdigest()[:16]
    print(f"greedy digest {digest} ({a.batch} x {a.tokens} tokens); first: {tokens[0][:8]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
