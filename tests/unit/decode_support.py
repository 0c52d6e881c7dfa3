"""Greedy decode on the host backend with every decode launch's kernel name recorded: the
A/B of a kernel-path switch at model level (the same tokens and logits either way, and which
kernels ran); and the launches of one decode graph (batch 1, or a few rows) on the mock
backend."""

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


def batch1_decode_graph(model: Path) -> list:
    """The launch records of the decode graph one sequence replays on the mock backend,
    after a 5-token prefill (a hybrid model's recurrent state starts at position 0)."""
    return decode_graph(model, 1)


def decode_graph(model: Path, rows: int) -> list:
    """The launch records of the decode graph `rows` sequences (at most 4) replay on the mock
    backend, after a 5-token prefill each."""
    runner = load_runner(model, backend="mock", max_seq_len=64, max_batch_size=4,
                         max_prefill_tokens=32)
    dev = runner.backend
    prompt = [1, 2, 3, 4, 5]
    runner.execute([SeqChunk(7 + i, prompt, 0, [i], GREEDY, history=PenaltyHistory(prompt))
                    for i in range(rows)])
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7 + i, [3], 5, [i], GREEDY) for i in range(rows)])
    assert dev.drain_launches() == []  # nothing outside the graph: no host sync on routing
    (replay,) = dev.graph_launches
    return list(replay.graph)
