"""Hold a batch of sequences in decode through the engine core, for the decode benchmarks.

The benchmarks time what serving runs: `EngineCore.step` (schedule, execute, commit) over a
ModelRunner, not hand-built runner steps. Prompts are random ids; sampling is greedy and no
token stops a sequence, so every step of a full batch generates `batch` tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from atlas.core.sampling import GREEDY
from atlas.engine.core import EngineCore
from atlas.engine.grammar_state import GrammarRequest
from atlas.engine.request import EngineRequest, FinishReason
from atlas.engine.speculative import OracleDrafter, Speculator
from atlas.model.runner import ModelRunner


def random_prompts(runner: ModelRunner, batch: int, prompt_len: int,
                   rng: np.random.Generator) -> list[list[int]]:
    return [rng.integers(100, runner.vocab_size - 100, prompt_len).tolist()
            for _ in range(batch)]


def rejected_drafts(prompts: list[list[int]], n: int, vocab_size: int) -> OracleDrafter:
    """An oracle whose every draft is wrong (a corrupted run of zeros): each verification
    step carries K drafts and emits the target's own token only, so every step verifies the
    same number of rows (the step-cost measurements)."""
    return OracleDrafter({tuple(p): [0] * n for p in prompts}, 0.0, vocab_size)


def start_decoding(runner: ModelRunner, batch: int, prompt_len: int, max_tokens: int,
                   rng: np.random.Generator, prompts: list[list[int]] | None = None,
                   speculator: Speculator | None = None,
                   grammar: GrammarRequest | None = None,
                   async_scheduling: bool = True,
                   max_num_seqs: int | None = None) -> EngineCore:
    """A core whose `batch` sequences have all finished prefill (each sampled >= 1 token).
    `prompts` (default: random ids) and `speculator` serve the speculative benchmark,
    `grammar` (every sequence follows it) the structured-output one; `async_scheduling`
    as the server's (off: every step committed before the next is planned); `max_num_seqs`
    (default `batch`) leaves room for sequences a benchmark adds later. The speculator
    joins once every sequence decodes: the prefill phase (whose mixed steps run eagerly) is
    then the same with and without it, so runs of the same prompts start from the same
    tokens."""
    core = EngineCore.build(runner, max_prefill_tokens=runner.limits.max_prefill_tokens,
                            max_num_seqs=max_num_seqs or batch, speculator=speculator,
                            async_scheduling=async_scheduling)
    for i, ids in enumerate(prompts or random_prompts(runner, batch, prompt_len, rng)):
        core.add(i, EngineRequest(ids, GREEDY, max_tokens, grammar=grammar))
    scheduler = core.scheduler
    scheduler.speculator = None
    while scheduler.waiting or any(not s.output_ids for s in scheduler.running):
        core.step()
    scheduler.speculator = speculator
    if len(scheduler.running) != batch:
        raise RuntimeError(f"only {len(scheduler.running)} of {batch} sequences are decoding "
                           "(KV pool or max_tokens too small for the benchmark)")
    return core


def write_json(path: Path | None, result: dict) -> None:
    """The benchmark's JSON record, when an output path was given."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2, default=str))


def stop_all(core: EngineCore) -> None:
    """End every sequence, freeing the runner's per-sequence state for the next batch, and
    let a step still in flight finish."""
    for seq in list(core.scheduler.running) + list(core.scheduler.waiting):
        core.abort(seq.seq_id, FinishReason.ABORT)
    while core.has_work:
        core.step()
