"""The driver calls a step's launch and collect make (each costs microseconds of host time
on the CUDA backend). A verification step is synchronous, so all of them sit between two
device steps: one upload before its graph (the sampler's row records ride in the step
inputs' one upload) and one readback after it. A regression here shows as a count."""

from collections import Counter
from pathlib import Path

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

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


def test_a_verification_is_one_upload_the_graph_and_one_readback():
    runner = mock_runner()
    prime(runner)
    assert driver_calls(runner, [verification()]) == Counter(
        copy_h2d=1, launch_graph=1, copy_d2h=1, record_event=2, event_synchronize=1)
    # a plain decode step after it: the same calls
    plain = SeqChunk(1, [6], len(PROMPT), [1], GREEDY)
    assert driver_calls(runner, [plain]) == Counter(
        copy_h2d=1, launch_graph=1, copy_d2h=1, record_event=2, event_synchronize=1)
