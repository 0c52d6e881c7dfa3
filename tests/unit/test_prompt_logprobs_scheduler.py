"""Prompt logprobs in the scheduler, against the fake paged-KV executor: every prompt token
from the second on is scored exactly once, at its own position (the fake scores the history
it reads back through the block tables), within the step's logits rows, with no prefix-cache
reuse while rows remain to score, and across preemption."""

from __future__ import annotations

import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.block_manager import BlockManager
from atlas.engine.core import EngineCore
from atlas.engine.request import EngineOutput, EngineRequest
from atlas.engine.scheduler import Scheduler
from atlas.engine.scheduling_policy import FifoPolicy
from tests.server.fakes import FakeBlockPool, FakeExecutor, fake_logprob

VOCAB = list(range(10, 60))


def make(num_blocks=64, max_num_seqs=2, max_prefill=16, max_logit_rows=3):
    ex = FakeExecutor(vocab_ids=VOCAB, vocab_size=64, eos_id=2, block_size=4,
                      num_kv_blocks=num_blocks)
    sched = Scheduler(BlockManager(FakeBlockPool(num_blocks), num_blocks, 4), FifoPolicy(),
                      max_num_seqs=max_num_seqs, max_seq_len=512, max_prefill_tokens=max_prefill,
                      max_logit_rows=max_logit_rows)
    return sched, ex


def run(sched: Scheduler, ex: FakeExecutor, requests: list[EngineRequest]
        ) -> tuple[dict[int, list[EngineOutput]], int]:
    """Step every request to completion; (outputs per request, the most logits rows a step
    used: sampled rows plus scoring rows)."""
    now = [0.0]
    core = EngineCore(sched, ex, clock=lambda: now[0])
    for i, r in enumerate(requests):
        core.add(i, r)
    outs: dict[int, list[EngineOutput]] = {i: [] for i in range(len(requests))}
    most_rows = 0
    while core.has_work:
        now[0] += 1.0
        report = core.step()
        assert report.error is None
        if report.num_chunks:
            chunks = ex.steps[-1]
            most_rows = max(most_rows, sum(c.sample + c.num_draft for c in chunks) + sum(
                len(c.prompt_logprobs.targets) for c in chunks if c.prompt_logprobs))
        for o in report.outputs:
            outs[o.seq_id].append(o)
    return outs, most_rows


def prompt(i: int, n: int) -> list[int]:
    return [10 + (i * 7 + j * 3) % 50 for j in range(n)]


def check_prompt_logprobs(outs: list[EngineOutput], ids: list[int], top_n: int) -> None:
    """Delivered once, with the first tokens, and equal to the fake's score of each prompt
    token after the tokens before it."""
    given = [o.prompt_logprobs for o in outs if o.prompt_logprobs is not None]
    assert len(given) == 1 and outs[0].prompt_logprobs is not None and outs[0].new_token_ids
    got = given[0]
    assert [t.token for t in got] == ids[1:]
    assert [t.logprob for t in got] == [fake_logprob(ids[:p], ids[p]) for p in range(1, len(ids))]
    assert all(len(t.top) == top_n for t in got)


def tokens(outs: list[EngineOutput]) -> list[int]:
    return [t for o in outs for t in o.new_token_ids]


def test_every_prompt_token_is_scored_once_within_the_logits_rows():
    """A decoding stream, two scoring prompts longer than a step's rows (one waits for a
    batch slot): each step fits 3 logits rows, the prompts' logprobs are complete, and the
    generated tokens are what each request gives alone without prompt logprobs."""
    reqs = [EngineRequest(prompt(0, 5), GREEDY, 30),
            EngineRequest(prompt(1, 40), GREEDY, 3, prompt_logprobs=2),
            EngineRequest(prompt(2, 23), GREEDY, 4, prompt_logprobs=0)]
    outs, most_rows = run(*make(), reqs)
    assert most_rows == 3
    check_prompt_logprobs(outs[1], reqs[1].prompt_ids, 2)
    check_prompt_logprobs(outs[2], reqs[2].prompt_ids, 0)
    assert all(o.prompt_logprobs is None for o in outs[0])
    for i, r in enumerate(reqs):
        alone, _ = run(*make(), [EngineRequest(r.prompt_ids, GREEDY, r.max_tokens)])
        assert tokens(outs[i]) == tokens(alone[0])


def test_a_scoring_request_does_not_reuse_the_prefix_cache():
    """The prompt's blocks are cached by an earlier request: a request for its logprobs
    computes every position anyway; the same request without them starts after the hit."""
    sched, ex = make()
    ids = prompt(3, 33)
    run(sched, ex, [EngineRequest(ids, GREEDY, 2)])
    core_outs, _ = run(sched, ex, [EngineRequest(ids, GREEDY, 2, prompt_logprobs=1),
                                   EngineRequest(ids, GREEDY, 2)])
    scored, plain = core_outs[0], core_outs[1]
    assert scored[-1].num_cached_tokens == 0
    check_prompt_logprobs(scored, ids, 1)
    assert plain[-1].num_cached_tokens == 32


@pytest.mark.parametrize("max_prefill", [5, 16])
def test_preempted_scoring_sequences_score_each_position_once(max_prefill):
    """A KV pool too small for both sequences: they are preempted (mid-prompt too) and
    recomputed, and still report each prompt position once."""
    sched, ex = make(num_blocks=14, max_prefill=max_prefill, max_logit_rows=4)
    reqs = [EngineRequest(prompt(4, 30), GREEDY, 12, prompt_logprobs=3),
            EngineRequest(prompt(5, 27), GREEDY, 12, prompt_logprobs=1)]
    outs, most_rows = run(sched, ex, reqs)
    assert sched.num_preemptions > 0 and most_rows <= 4
    check_prompt_logprobs(outs[0], reqs[0].prompt_ids, 3)
    check_prompt_logprobs(outs[1], reqs[1].prompt_ids, 1)


@pytest.mark.parametrize("top_n", [-1, 21])
def test_prompt_logprobs_outside_the_cap_are_refused(top_n):
    sched, _ = make()
    with pytest.raises(ValueError, match="prompt_logprobs"):
        sched.check(EngineRequest([1, 2, 3], GREEDY, 2, prompt_logprobs=top_n))


def test_logit_rows_must_hold_a_row_per_sequence():
    with pytest.raises(ValueError, match="max_logit_rows"):
        make(max_num_seqs=4, max_logit_rows=3)
