"""The engine core's contract with the executor (fake paged-KV executor, no numerics): what a
resumed sequence's first chunk carries, thinking-budget tokens that bypass the sampler, seeds
fixed at admission, and the offline `LLMEngine` loop."""

from __future__ import annotations

from collections import Counter

import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.engine.core import EngineCore
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest, FinishReason, ThinkingBudget
from tests.server.fakes import FakeBlockPool, FakeExecutor

VOCAB = list(range(10, 60))
EOS = 2
PENALIZED = SamplingParams(temperature=1.0, frequency_penalty=0.5, seed=3)


def executor(num_blocks=64, **kw) -> FakeExecutor:
    return FakeExecutor(vocab_ids=VOCAB, vocab_size=64, eos_id=EOS, block_size=4,
                        num_kv_blocks=num_blocks, **kw)


def prompt(i, n):
    return [10 + (i * 7 + j) % 50 for j in range(n)]


def test_a_resumed_sequence_carries_its_sampling_history():
    ex = executor(num_blocks=6)
    core = EngineCore.build(ex, max_prefill_tokens=16, pool_factory=FakeBlockPool)
    for i in range(3):
        core.add(i, EngineRequest(prompt(i, 5), PENALIZED, 12))
    outputs: dict[int, list[int]] = {i: [] for i in range(3)}
    while core.has_work:
        for out in core.step().outputs:
            outputs[out.seq_id] += out.new_token_ids
    assert core.scheduler.num_preemptions > 0
    first_chunks = [c for step in ex.steps for c in step if c.history is not None]
    resumed = [c for c in first_chunks if c.rng_position > 0]
    assert resumed, "no sequence resumed after preemption"
    for c in first_chunks:
        generated = outputs[c.seq_id][:c.rng_position]
        assert list(c.history.prompt_ids) == prompt(c.seq_id, 5)
        assert dict(c.history.drawn_counts) == dict(Counter(generated))
        # a resumed sequence recomputes prompt + output in order, after its cached blocks
        start = c.start_pos
        assert c.token_ids == (prompt(c.seq_id, 5) + generated)[start:start + len(c.token_ids)]
    assert any(c.start_pos > 0 for c in resumed), "no resumed sequence hit the prefix cache"
    for step in ex.steps:  # every sampling chunk draws at the sequence's output position
        for c in step:
            if c.sample:
                assert c.start_pos + len(c.token_ids) == 5 + c.rng_position
    assert sorted(set(ex.released)) == [0, 1, 2]


def test_thinking_budget_tokens_are_forced_without_a_draw():
    ex = executor(scripts=[([99], [40, 41, 42, 43, 44, 45])])
    core = EngineCore.build(ex, max_prefill_tokens=16, pool_factory=FakeBlockPool)
    budget = ThinkingBudget(open_id=None, close_ids=(7, 8), budget=2, starts_inside=True)
    core.add(0, EngineRequest([99, 5], PENALIZED, 6, thinking=budget))
    tokens = []
    while core.has_work:
        tokens += [t for o in core.step().outputs for t in o.new_token_ids]
    assert tokens == [40, 41, 7, 8, 44, 45]
    samples = [c.sample for step in ex.steps for c in step]
    assert samples == [True, True, False, False, True, True]


def test_thinking_budget_state_survives_preemption():
    budget = ThinkingBudget(open_id=None, close_ids=(7, 8), budget=3, starts_inside=True)
    script = [([99], list(range(40, 60)))]
    reqs = [EngineRequest([99, i], GREEDY, 12, thinking=budget) for i in range(3)]
    tight = LLMEngine(executor(num_blocks=6, scripts=script), max_prefill_tokens=16)
    together = [c.token_ids for c in tight.generate(reqs)]
    assert tight.core.scheduler.num_preemptions > 0
    alone = [LLMEngine(executor(scripts=script), max_prefill_tokens=16).generate([r])[0]
             .token_ids for r in reqs]
    assert together == alone == [[40, 41, 42, 7, 8] + list(range(45, 52))] * 3


def test_unseeded_requests_get_a_seed_from_the_engine_seed():
    def seeds(engine_seed):
        ex = executor()
        core = EngineCore.build(ex, max_prefill_tokens=16, seed=engine_seed)
        core.add(0, EngineRequest(prompt(0, 3), SamplingParams(temperature=0.8), 2))
        core.add(1, EngineRequest(prompt(1, 3), SamplingParams(temperature=0.8, seed=5), 2))
        core.add(2, EngineRequest(prompt(2, 3), GREEDY, 2))
        core.step()
        return [c.sampling.seed for c in ex.steps[0]]

    first = seeds(11)
    assert first[0] is not None and first[1] == 5 and first[2] is None
    assert seeds(11) == first and seeds(12)[0] != first[0]


def test_llm_engine_preempts_instead_of_running_out_of_blocks():
    ex = executor(num_blocks=6)
    engine = LLMEngine(ex, max_prefill_tokens=16)
    reqs = [EngineRequest(prompt(i, 5), GREEDY, 12) for i in range(3)]
    together = engine.generate(reqs)
    assert engine.core.scheduler.num_preemptions > 0
    alone = [LLMEngine(executor(), max_prefill_tokens=16).generate([r])[0] for r in reqs]
    assert together == alone
    assert all(c.finish_reason == FinishReason.LENGTH and len(c.token_ids) == 12
               for c in together)
    blocks = engine.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks


def test_llm_engine_stop_check_ends_one_request_and_keeps_the_others():
    engine = LLMEngine(executor(), max_prefill_tokens=16)
    reqs = [EngineRequest(prompt(i, 4), GREEDY, 10) for i in range(2)]
    results = engine.generate(reqs, stop_check=lambda i, out: i == 0 and len(out) == 3)
    assert [(len(r.token_ids), r.finish_reason) for r in results] == [
        (3, FinishReason.STOP), (10, FinishReason.LENGTH)]
    assert not engine.core.has_work


def test_llm_engine_refuses_a_bad_request_before_any_work():
    ex = executor(num_blocks=4)  # 16 tokens of KV: a 16-token prompt leaves no room
    engine = LLMEngine(ex, max_prefill_tokens=16)
    with pytest.raises(ValueError, match="no room"):
        engine.generate([EngineRequest(prompt(0, 3), GREEDY, 4),
                         EngineRequest(prompt(1, 16), GREEDY, 4)])
    assert ex.steps == [] and not engine.core.has_work


def test_llm_engine_reraises_an_executor_failure_and_frees_everything():
    ex = executor(fail_on=[13, 14])
    engine = LLMEngine(ex, max_prefill_tokens=16)
    with pytest.raises(RuntimeError, match="scripted model failure"):
        engine.generate([EngineRequest([12, 13, 14], GREEDY, 4),
                         EngineRequest(prompt(1, 3), GREEDY, 4)])
    blocks = engine.core.scheduler.blocks
    assert not engine.core.has_work and blocks.num_available == blocks.num_blocks
