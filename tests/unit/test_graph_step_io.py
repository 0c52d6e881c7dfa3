"""A captured decode step's own input and output copies (ops/step_io.py, the default;
ATLAS_GRAPH_STEP_IO=0 the copies on the stream), recorded by MockGpuBackend with the step_io
module "loaded": the graph stages the inputs first and publishes the sampled ids last; a plain
decode step then puts nothing on the stream but its graph and its event, a carried token
travels as -1 - its sampled row, the host rewrites the inputs after the staging kernel's echo
(or the step's event); with the route switched off or on a backend that maps no host memory
the copies stay."""

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.mock import MockGpuBackend

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
PROMPT = [5, 9, 200, 17, 5]


@pytest.fixture
def step_io_loaded(monkeypatch):
    monkeypatch.setattr(MockGpuBackend, "module_names", property(lambda self: ["step_io"]))
    monkeypatch.setenv("ATLAS_GRAPH_STEP_IO", "1")


def mock_runner():
    return load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32, progress=None)


def calls_of(runner, launch) -> Counter:
    """The backend calls `launch()` makes (graph launches counted), with no eager kernel."""
    dev = runner.backend
    before = Counter(dev.op_counts)
    dev.drain_launches()
    dev.graph_launches.clear()
    launch()
    calls = Counter(dev.op_counts) - before
    calls["launch_graph"] = len(dev.graph_launches)
    assert dev.drain_launches() == []
    return +calls


def decode(seq_id: int, pos: int, carried: bool = False) -> SeqChunk:
    return SeqChunk(seq_id, [6], pos, [seq_id], GREEDY, carried=carried)


def test_the_graph_stages_its_inputs_and_publishes_its_ids(step_io_loaded):
    runner = mock_runner()
    assert runner._graph_io is not None
    graph = runner.graphs[1].native
    first, last = graph[0], graph[-1]
    lay = runner.layout
    assert first.func == "stage_step_inputs_i32"
    assert (first.args["tokens"], first.args["tok_stride"], first.args["tail_at"]) == (
        1, lay.max_tokens, lay.cu_q)
    assert first.args["tail_words"] == lay.sample_params - lay.cu_q + lay.record_words
    assert first.args["sampled"] == runner.sampler.out_ids
    (sample,) = [r for r in graph if r.func == "sample_f32"]  # it publishes the ids
    assert (sample.args["rows"], sample.args["pitch"]) == (1, runner.limits.max_sample_rows)
    assert sample.args["host_ids"] == runner._graph_io[1]
    assert sample.args["parity"] == runner.bufs.ids + 4 * lay.io_parity
    assert last is sample  # the graph's last launch: its logprobs are in it too
    assert (first.args["ack"], first.args["seq_word"]) == (runner._graph_io[2], lay.io_seq)
    # the verification-free 4-row bucket too
    assert runner.graphs[4].native[0].args["tokens"] == 4


def test_a_plain_decode_step_puts_only_its_graph_and_event_on_the_stream(step_io_loaded):
    runner = mock_runner()
    runner.execute([SeqChunk(1, PROMPT, 0, [1], GREEDY, history=PenaltyHistory(PROMPT))])
    runner.execute([decode(1, len(PROMPT))])  # its row's block table uploaded once
    assert calls_of(runner, lambda: runner.execute([decode(1, len(PROMPT) + 1)])) == Counter(
        launch_graph=1, record_event=1, event_synchronize=1)


def test_a_carried_token_is_staged_as_its_sampled_row(step_io_loaded):
    runner = mock_runner()
    for seq in (1, 2):
        runner.execute([SeqChunk(seq, PROMPT, 0, [seq], GREEDY,
                                 history=PenaltyHistory(PROMPT))])
    first = runner.launch([decode(1, len(PROMPT)), decode(2, len(PROMPT))])
    parity = runner.host_i32[runner.layout.io_parity]
    # the next step carries both tokens, sequence 2 first: rows 1 and 0 of the last sample
    second = runner.launch([decode(2, len(PROMPT) + 1, carried=True),
                            decode(1, len(PROMPT) + 1, carried=True)])
    assert runner.host_i32[runner.layout.ids:runner.layout.ids + 2].tolist() == [-2, -1]
    assert runner.host_i32[runner.layout.io_parity] == 1 - parity
    assert first.host_ids.ctypes.data != second.host_ids.ctypes.data
    for launched in (first, second):
        runner.collect(launched)


@pytest.mark.parametrize("routed", [False, True])
def test_without_the_route_or_mapped_memory_the_copies_stay(step_io_loaded, monkeypatch,
                                                            routed):
    if routed:
        monkeypatch.setattr(MockGpuBackend, "mapped_host_ptr", lambda self, host: None)
    else:
        monkeypatch.setenv("ATLAS_GRAPH_STEP_IO", "0")
    runner = mock_runner()
    assert runner._graph_io is None
    assert runner.graphs[1].native[0].func != "stage_step_inputs_i32"
    runner.execute([SeqChunk(1, PROMPT, 0, [1], GREEDY, history=PenaltyHistory(PROMPT))])
    runner.execute([decode(1, len(PROMPT))])
    assert calls_of(runner, lambda: runner.execute([decode(1, len(PROMPT) + 1)])) == Counter(
        copy_h2d=1, launch_graph=1, copy_d2h=1, record_event=2, event_synchronize=1)
    assert np.all(runner.host_i32[runner.layout.ids:runner.layout.ids + 1] >= 0)


@pytest.mark.parametrize("echoed", [True, False])
def test_the_next_launch_waits_for_the_echo_or_the_step(step_io_loaded, echoed):
    """The host rewrites the inputs once the last staging kernel echoed its launch number
    (no driver call), or, without the echo, after that step's event."""
    runner = mock_runner()
    runner.execute([SeqChunk(1, PROMPT, 0, [1], GREEDY, history=PenaltyHistory(PROMPT))])
    first = runner.launch([decode(1, len(PROMPT))])
    assert runner.host_i32[runner.layout.io_seq] == first.number
    if echoed:
        runner._ack[0] = first.number
    waits = runner.backend.op_counts["event_synchronize"]
    second = runner.launch([decode(1, len(PROMPT) + 1, carried=True)])
    assert runner.backend.op_counts["event_synchronize"] - waits == (0 if echoed else 1)
    for launched in (first, second):
        runner.collect(launched)
