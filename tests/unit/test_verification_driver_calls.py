"""The driver calls a step's launch and collect make (each costs microseconds of host time
on the CUDA backend). A verification step is synchronous, so all of them sit between two
device steps: with ATLAS_VERIFY_GRAPH_COPIES=1 its graph uploads the inputs and copies the
sampled ids back itself (by default, copies around the graph, as before), and the sampler's
row records ride in the step inputs' one upload. A regression here shows as a count."""

from collections import Counter
from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.gpu import GpuError
from atlas.runtime.mock import MockGpuBackend

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
PROMPT = [5, 9, 200, 17, 5]


def mock_runner():
    return load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=2,
                       max_prefill_tokens=32, num_draft_tokens=3, progress=None)


def driver_calls(runner, chunks) -> Counter:
    """The backend calls one execute (launch + collect) of `chunks` makes."""
    dev = runner.backend
    before = Counter(dev.op_counts)
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute(chunks)
    calls = Counter(dev.op_counts) - before
    calls["launch_graph"] = len(dev.graph_launches)
    assert dev.drain_launches() == []  # everything inside the graph
    return +calls


def verification(seq_id: int = 1) -> SeqChunk:
    return SeqChunk(seq_id, [6, 7, 8, 9], len(PROMPT), [seq_id], GREEDY, num_draft=3)


def prime(runner, seq_id: int = 1) -> None:
    runner.execute([SeqChunk(seq_id, PROMPT, 0, [seq_id], GREEDY,
                             history=PenaltyHistory(PROMPT))])
    runner.execute([verification(seq_id)])   # its rows' block tables uploaded once


@pytest.fixture
def graph_copies(monkeypatch):
    """The opt-in: the verification graphs hold their copies (off by default until the
    H200 has run them)."""
    monkeypatch.setenv("ATLAS_VERIFY_GRAPH_COPIES", "1")


def test_a_verification_launch_is_the_graph_and_one_event(graph_copies):
    runner = mock_runner()
    assert runner.verify_graph_copies
    prime(runner)
    assert driver_calls(runner, [verification()]) == Counter(
        launch_graph=1, record_event=1, event_synchronize=1)
    # a plain decode step after it: one upload (inputs and sampler rows), one readback
    plain = SeqChunk(1, [6], len(PROMPT), [1], GREEDY)
    assert driver_calls(runner, [plain]) == Counter(
        copy_h2d=1, launch_graph=1, copy_d2h=1, record_event=2, event_synchronize=1)


def test_copies_around_the_verification_graph_by_default():
    runner = mock_runner()
    assert not runner.verify_graph_copies
    prime(runner)
    assert driver_calls(runner, [verification()]) == Counter(
        copy_h2d=1, launch_graph=1, copy_d2h=1, record_event=2, event_synchronize=1)


def test_verification_graphs_copy_around_them_where_capture_refuses_copies(monkeypatch,
                                                                          graph_copies):
    """A driver that refused the copies inside a captured graph costs the speed-up, not
    the runner: the graphs are captured without them and the copies go around."""
    plain_copy = MockGpuBackend.copy_h2d

    def refusing(self, dst, src, stream=None):
        if stream is not None and self._captures.get(stream) is not None:
            raise GpuError("cuMemcpyHtoDAsync: operation not permitted when stream is capturing")
        plain_copy(self, dst, src, stream)

    monkeypatch.setattr(MockGpuBackend, "copy_h2d", refusing)
    runner = mock_runner()
    assert not runner.verify_graph_copies and 4 in runner.verify_graphs
    prime(runner)
    assert driver_calls(runner, [verification()]) == Counter(
        copy_h2d=1, launch_graph=1, copy_d2h=1, record_event=2, event_synchronize=1)


def test_a_verification_cannot_carry_a_token_into_its_graph(graph_copies):
    runner = mock_runner()
    prime(runner)
    carried = SeqChunk(2, [3], 0, [2], GREEDY, carried=True, history=PenaltyHistory([3]))
    with pytest.raises(RuntimeError, match="never runs ahead of a verification"):
        runner.launch([verification(), carried])


@pytest.fixture(scope="module")
def host_runner():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATLAS_VERIFY_GRAPH_COPIES", "1")
        return load_runner(FIXTURE, backend="host", max_seq_len=32, max_batch_size=2,
                           max_prefill_tokens=16, num_draft_tokens=3, progress=None)


def test_a_verification_given_up_still_reads_its_own_tokens(host_runner):
    """Launched and not collected before the next launch (the engine gave it up), a
    verification still returns its own samples: its graph wrote the ids buffer the next
    verification's graph rewrites, so the next launch keeps a copy for it."""
    runner = host_runner
    for seq_id, prompt in ((1, PROMPT), (2, [300, 2, 2, 9, 44])):
        runner.execute([SeqChunk(seq_id, prompt, 0, [seq_id], GREEDY,
                                 history=PenaltyHistory(prompt))])
    alone = [runner.execute([verification(s)])[0] for s in (1, 2)]
    assert alone[0] != alone[1]
    first = runner.launch([verification(1)])
    second = runner.launch([verification(2)])
    assert [runner.collect(first)[0], runner.collect(second)[0]] == alone
    for seq_id in (1, 2):
        runner.release(seq_id)
