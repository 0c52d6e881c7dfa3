"""The opt-in decode MoE paths change launches, never values: with ATLAS_MOE_ROUTER_CLUSTER=1
(the router as one thread-block cluster) and ATLAS_MOE_DOWN_SHORT=2 (the down GEMV in short
blocks) the host backend decodes the tiny MoE checkpoints to the same greedy tokens and the
same logits bit for bit, and the mock backend's decode graph holds the clustered router."""

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SWITCHES = {"ATLAS_MOE_ROUTER_CLUSTER": "1", "ATLAS_MOE_DOWN_SHORT": "2"}


def _runner(name: str, backend: str, monkeypatch, on: bool):
    for key, value in SWITCHES.items():
        monkeypatch.setenv(key, value if on else "0")
    return load_runner(FIXTURES / name, backend=backend, max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32)


def _decode(runner, prompt: list[int], steps: int) -> tuple[list[int], np.ndarray]:
    """Greedy tokens and f32 logits of `steps` batch-1 decode steps after the prompt."""
    out = runner.execute([SeqChunk(1, list(prompt), 0, [0, 1], GREEDY,
                                   history=PenaltyHistory(list(prompt)))])
    tokens, logits = [out[0]], []
    for i in range(steps):
        out = runner.execute([SeqChunk(1, [tokens[-1]], len(prompt) + i, [0, 1], GREEDY,
                                       rng_position=i + 1)])
        logits.append(runner.read_logits(1)[0].copy())
        tokens.append(out[0])
    runner.release(1)
    return tokens, np.stack(logits)


@pytest.mark.parametrize("name", ["tiny-qwen3-moe", "tiny-qwen2-moe"])
def test_switches_give_the_same_tokens_and_logits(name: str, monkeypatch) -> None:
    prompt = [5, 9, 200, 17, 3, 3, 8, 41, 7, 12]
    want_tokens, want = _decode(_runner(name, "host", monkeypatch, False), prompt, 5)
    got_tokens, got = _decode(_runner(name, "host", monkeypatch, True), prompt, 5)
    assert got_tokens == want_tokens
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got[0], got[-1])  # the steps differ: the check has teeth


@pytest.mark.parametrize("on,router", [(False, "moe_gate_topk_softmax_bf16"),
                                       (True, "moe_gate_topk_cluster_softmax_bf16")])
def test_decode_graph_takes_the_clustered_router_when_switched_on(on: bool, router: str,
                                                                 monkeypatch) -> None:
    runner = _runner("tiny-qwen3-moe", "mock", monkeypatch, on)
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    (replay,) = dev.graph_launches
    names = [r.func for r in replay.graph]
    routers = [n for n in names if n.startswith("moe_gate_topk")]
    assert routers and set(routers) == {router}
