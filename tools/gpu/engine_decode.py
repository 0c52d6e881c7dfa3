"""Hold a batch of sequences in decode through the engine core, for the decode benchmarks.

The benchmarks time what serving runs: `EngineCore.step` (schedule, execute, commit) over a
ModelRunner, not hand-built runner steps. Prompts are random ids; sampling is greedy and no
token stops a sequence, so every step of a full batch generates `batch` tokens.
"""

from __future__ import annotations

import numpy as np

from atlas.core.sampling import GREEDY
from atlas.engine.core import EngineCore
from atlas.engine.request import EngineRequest, FinishReason
from atlas.model.runner import ModelRunner


def start_decoding(runner: ModelRunner, batch: int, prompt_len: int, max_tokens: int,
                   rng: np.random.Generator) -> EngineCore:
    """A core whose `batch` sequences have all finished prefill (each sampled >= 1 token)."""
    core = EngineCore.build(runner, max_prefill_tokens=runner.limits.max_prefill_tokens,
                            max_num_seqs=batch)
    for i in range(batch):
        ids = rng.integers(100, runner.vocab_size - 100, prompt_len).tolist()
        core.add(i, EngineRequest(ids, GREEDY, max_tokens))
    scheduler = core.scheduler
    while scheduler.waiting or any(not s.output_ids for s in scheduler.running):
        core.step()
    if len(scheduler.running) != batch:
        raise RuntimeError(f"only {len(scheduler.running)} of {batch} sequences are decoding "
                           "(KV pool or max_tokens too small for the benchmark)")
    return core


def stop_all(core: EngineCore) -> None:
    """End every sequence, freeing the runner's per-sequence state for the next batch."""
    for seq in list(core.scheduler.running) + list(core.scheduler.waiting):
        core.abort(seq.seq_id, FinishReason.ABORT)
