"""Preemption must not change what a sequence samples (host backend, tiny qwen3 fixture).

Three seeded requests at temperature 1 with frequency and presence penalties share a KV pool
of 4 blocks (one sequence needs 3), so the engine preempts and recomputes. Each must produce
exactly the tokens it produces alone: the seed, the RNG position and the penalty counts live
on the sequence and are restored when it resumes. Before the engine core kept them, the
runner restarted a resumed sequence's RNG counter and counts from zero.

The random-weight model's logits are nearly flat, so positive penalties rarely change a draw
(a repeat is unlikely anyway): that case tests the RNG position. Negative ones make repeats
likely, so the draws depend on the restored counts. Recompute runs prompt + output through
the prefill path, whose bf16 rounding moves logits by up to ~0.03 against the decode path;
these draws have no near-tie that close (the penalties and seeds are chosen so; a change to
the reference kernels may need new ones, never a looser assertion).
"""

from pathlib import Path

import pytest

from atlas.core.sampling import SamplingParams
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.model.load import load_runner

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"


@pytest.fixture(scope="module")
def runner():
    return load_runner(FIXTURE, backend="host", max_seq_len=48, max_batch_size=3,
                       max_prefill_tokens=32, max_num_blocks=4)


def requests(frequency: float, presence: float, repetition: float) -> list[EngineRequest]:
    return [EngineRequest([5 + i, 9, 200, 17, 3, 8, 100 + i, 7, 7, 1], SamplingParams(
        temperature=1.0, frequency_penalty=frequency, presence_penalty=presence,
        repetition_penalty=repetition, seed=100 + i), 30) for i in range(3)]


@pytest.mark.parametrize("frequency, presence, repetition", [(1.5, 1.0, 1.3),
                                                             (-1.5, -1.0, 1.0)])
def test_preempted_sequences_sample_what_they_sample_alone(runner, frequency, presence,
                                                            repetition):
    engine = LLMEngine(runner, max_prefill_tokens=32)
    together = [c.token_ids for c in engine.generate(requests(frequency, presence, repetition))]
    assert engine.core.scheduler.num_preemptions > 0   # the pool really was too small
    alone = [engine.generate([r])[0].token_ids
             for r in requests(frequency, presence, repetition)]
    assert together == alone
    if frequency < 0:
        assert min(len(set(t)) for t in alone) < 10   # the counts really steer the draws



def test_a_seed_drawn_for_an_unseeded_request_survives_preemption(runner):
    """Requests without a seed get one at admission (from the engine's seed): the same
    engine seed gives the same tokens whether or not the pool forced preemption."""
    roomy = load_runner(FIXTURE, backend="host", max_seq_len=48, max_batch_size=3,
                        max_prefill_tokens=32)
    unseeded = [EngineRequest(r.prompt_ids, SamplingParams(temperature=1.0), 30)
                for r in requests(0.0, 0.0, 1.0)]
    tight = LLMEngine(runner, max_prefill_tokens=32, seed=7)
    preempted = [c.token_ids for c in tight.generate(unseeded)]
    assert tight.core.scheduler.num_preemptions > 0
    free = LLMEngine(roomy, max_prefill_tokens=32, seed=7)
    assert [c.token_ids for c in free.generate(unseeded)] == preempted
    assert free.core.scheduler.num_preemptions == 0
