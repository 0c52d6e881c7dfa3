"""Async scheduling (the engine a step ahead of its commits) must not change a single token.

Host backend, the dense, MoE and hybrid tiny fixtures: the same requests through an engine
that commits every step before planning the next and through one that launches step N+1
(its decode tokens carried on the device from step N's sampler output) before it commits
step N. Greedy and seeded sampling with penalties, two samples of one prompt (n = 2), stop
tokens and stop checks (aborts) that end sequences mid-stream while a step that gave them a
row is in flight, different max_tokens, and preemption in a pool too small for the batch.
The host backend's reference kernels are batch-invariant, so any difference is the
engine's doing.
"""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.engine.core import EngineCore
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest, ThinkingBudget
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MODELS = ["tiny-qwen3", "tiny-qwen3-moe", "tiny-qwen3_5"]


def sampled(seed: int) -> SamplingParams:
    return SamplingParams(temperature=1.0, frequency_penalty=0.5, presence_penalty=-0.5,
                          seed=seed)


def requests(stop: frozenset[int] = frozenset()) -> list[EngineRequest]:
    prompt = [5, 9, 200, 17, 3, 8, 100, 7]
    return [EngineRequest(prompt, GREEDY, 9, stop_token_ids=stop),
            EngineRequest(prompt[:5], sampled(1), 12, stop_token_ids=stop),
            EngineRequest(prompt[:5], sampled(2), 12),            # n = 2 of the same prompt
            EngineRequest([40 + i for i in range(20)], GREEDY, 7),
            EngineRequest([11, 12], sampled(3), 10)]


def run(runner, reqs, async_scheduling, stop_after=None):
    """Generate `reqs`; `stop_after` {i: n}: a stop check ends request i after n tokens."""
    engine = LLMEngine(runner, max_prefill_tokens=32, async_scheduling=async_scheduling)
    assert engine.core.runs_ahead == async_scheduling
    check = None
    if stop_after:
        def check(i, tokens):
            return i in stop_after and len(tokens) >= stop_after[i]
    done = engine.generate(reqs, check)
    return [(c.token_ids, c.finish_reason) for c in done], engine


@pytest.fixture(scope="module", params=MODELS)
def runner(request):
    return load_runner(FIXTURES / request.param, backend="host", max_seq_len=64,
                       max_batch_size=4, max_prefill_tokens=32)


def test_async_steps_give_the_tokens_of_sync_steps(runner):
    sync, _ = run(runner, requests(), False)
    # a stop token that request 0 meets mid-stream, and aborts by a stop check
    stop = frozenset({sync[0][0][3]})
    want, _ = run(runner, requests(stop), False, stop_after={3: 4, 4: 1})
    got, engine = run(runner, requests(stop), True, stop_after={3: 4, 4: 1})
    assert got == want
    assert want[0] == (sync[0][0][:sync[0][0].index(sync[0][0][3]) + 1], "stop")
    assert len(want[3][0]) == 4 and len(want[4][0]) == 1
    assert [len(t) for t, _ in want[1:3]] != [0, 0]
    assert runner.state_slot_usage()[0] == 0  # every sequence's state was released
    assert not engine.core.has_work


def test_async_steps_survive_preemption():
    """Four sequences in a pool of 6 blocks (each needs 3): preempted while a step that
    gave them a row is in flight, they resume with the tokens they would have drawn."""
    runner = load_runner(FIXTURES / "tiny-qwen3", backend="host", max_seq_len=48,
                         max_batch_size=4, max_prefill_tokens=32, max_num_blocks=6)
    reqs = [EngineRequest([5 + i, 9, 200, 17, 3, 8, 100 + i, 7, 7, 1], sampled(10 + i), 30)
            for i in range(4)]
    want, _ = run(runner, reqs, False)
    got, engine = run(runner, reqs, True)
    assert engine.core.scheduler.num_preemptions > 0
    assert got == want


def test_a_step_is_committed_by_the_next_one_and_an_abort_in_flight_is_dropped():
    runner = load_runner(FIXTURES / "tiny-qwen3", backend="host", max_seq_len=64,
                         max_batch_size=4, max_prefill_tokens=32)
    core = EngineCore.build(runner, max_prefill_tokens=32)
    core.add(0, EngineRequest([5, 9, 200, 17], GREEDY, 20))
    core.add(1, EngineRequest([6, 9, 200, 17], GREEDY, 20))
    first = core.step()
    assert first.num_chunks == 2 and first.outputs == []   # launched, not committed yet
    second = core.step()
    assert second.num_committed == 2 and [len(o.new_token_ids) for o in second.outputs] == [1, 1]
    out = core.abort(0, "abort")   # step 2 (with a row for sequence 0) is in flight
    assert out is not None and out.finish_reason == "abort"
    tokens = [o.new_token_ids[0] for o in second.outputs if o.seq_id == 1]
    while core.has_work:
        report = core.step()
        assert all(o.seq_id == 1 for o in report.outputs)
        tokens += [t for o in report.outputs for t in o.new_token_ids]
    alone = LLMEngine(runner, max_prefill_tokens=32, async_scheduling=False).generate(
        [EngineRequest([6, 9, 200, 17], GREEDY, 20)])[0].token_ids
    assert tokens == alone


def test_sequences_that_need_their_last_token_on_the_host_step_synchronously():
    """Whether a thinking budget forces the next token (or what a grammar mask allows)
    depends on the last one: while such a sequence is in the engine, every step is
    committed before the next is planned."""
    runner = load_runner(FIXTURES / "tiny-qwen3", backend="host", max_seq_len=64,
                         max_batch_size=4, max_prefill_tokens=32)
    core = EngineCore.build(runner, max_prefill_tokens=32)
    assert core.runs_ahead
    core.add(0, EngineRequest([5, 9, 200], GREEDY, 4,
                              thinking=ThinkingBudget(open_id=7, close_ids=(8,), budget=1)))
    assert not core.runs_ahead
    report = core.step()
    assert report.num_chunks == 1 and len(report.outputs) == 1   # committed at once
    while core.has_work:
        core.step()
    assert core.runs_ahead


def test_logprobs_run_ahead_and_equal_sync_steps():
    """Logprobs are copied back with the step's tokens (into alternating pinned buffers):
    running ahead reports exactly what synchronous steps report."""
    runner = load_runner(FIXTURES / "tiny-qwen3", backend="host", max_seq_len=64,
                         max_batch_size=4, max_prefill_tokens=32)

    def outputs(async_scheduling):
        core = EngineCore.build(runner, max_prefill_tokens=32,
                                async_scheduling=async_scheduling)
        core.add(0, EngineRequest([5, 9, 200, 17], sampled(4), 6, logprobs=3))
        core.add(1, EngineRequest([6, 9, 200], GREEDY, 5))
        core.add(2, EngineRequest([7, 7], GREEDY, 7, logprobs=0))
        assert core.runs_ahead == async_scheduling
        got: dict[int, list] = {0: [], 1: [], 2: []}
        while core.has_work:
            for o in core.step().outputs:
                got[o.seq_id] += list(zip(o.new_token_ids, o.logprobs or [None] * 9))
        return got

    want = outputs(False)
    assert outputs(True) == want
    assert len(want[0]) == 6 and all(len(lp.top) == 3 for _, lp in want[0])
    assert all(lp.top == () and lp.token == t for t, lp in want[2])
    assert all(lp is None for _, lp in want[1])


def test_max_tokens_costs_no_wasted_row_and_a_stop_token_at_most_one():
    """Running ahead, the step after a sequence's last token by max_tokens is never given
    a row for it (known ahead); a stop token is found one step late, so one row is wasted."""
    runner = load_runner(FIXTURES / "tiny-qwen3", backend="host", max_seq_len=64,
                         max_batch_size=4, max_prefill_tokens=32)

    def chunks_run(request):
        core = EngineCore.build(runner, max_prefill_tokens=32)
        core.add(0, request)
        total, tokens = 0, []
        while core.has_work:
            report = core.step()
            total += report.num_chunks
            tokens += [t for o in report.outputs for t in o.new_token_ids]
        return total, tokens

    chunks, tokens = chunks_run(EngineRequest([5, 9, 200, 17], GREEDY, 3))
    assert (chunks, len(tokens)) == (3, 3)   # one prefill and two decode steps
    chunks, stopped = chunks_run(EngineRequest([5, 9, 200, 17], GREEDY, 3,
                                               stop_token_ids=frozenset({tokens[1]})))
    assert stopped == tokens[:2] and chunks == 3   # the step after the stop token ran
