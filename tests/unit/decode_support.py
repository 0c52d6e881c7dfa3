"""Greedy decode on the host backend with every decode launch's kernel name recorded: the
A/B of a kernel-path switch at model level (the same tokens and logits either way, and which
kernels ran)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def decode_recorded(model: str, monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                    prompts: list[list[int]], steps: int
                    ) -> tuple[list[np.ndarray], list, list[str]]:
    """With `env` set, prefill `prompts` (one sequence each, one step) and decode them
    greedily `steps` times; each step's logits, the sampled tokens and the kernels the decode
    steps launched, in order."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runner = load_runner(FIXTURES / model, backend="host", max_seq_len=64,
                         max_batch_size=len(prompts), use_graphs=False)
    backend = runner.model.kc.backend
    launched: list[str] = []
    launch = backend.launch

    def spy(handle, *args):  # the real launch, its kernel's name recorded
        launched.append(handle.func)
        return launch(handle, *args)

    blocks = {i: [2 * i, 2 * i + 1] for i in range(len(prompts))}
    toks = [runner.execute([SeqChunk(i, p, 0, blocks[i], GREEDY, history=PenaltyHistory(p))
                            for i, p in enumerate(prompts)])]
    logits = [runner.read_logits(len(prompts)).copy()]
    monkeypatch.setattr(backend, "launch", spy)
    for n in range(steps):
        toks.append(runner.execute([SeqChunk(i, [toks[-1][i]], len(p) + n, blocks[i], GREEDY,
                                             rng_position=n + 1)
                                    for i, p in enumerate(prompts)]))
        logits.append(runner.read_logits(len(prompts)).copy())
    return logits, toks, launched
