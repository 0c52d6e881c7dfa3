"""Speculative decoding in the engine: drafters, acceptance, and verification steps driven
against the fake paged-KV executor (which samples each verified position from the history
it reads back through the block tables, so a wrong rollback changes the output)."""

from __future__ import annotations

import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.engine.core import EngineCore
from atlas.engine.request import EngineRequest, FinishReason
from atlas.engine.speculative import (NgramDrafter, OracleDrafter, Speculator, best_num_drafts,
                                      expected_tokens, make_drafter, step_cost_table)
from atlas.model.batch import accept
from tests.server.fakes import FakeBlockPool, FakeExecutor

VOCAB = list(range(10, 60))
COPY_TRIGGER = 99


def executor(num_blocks=64, **kw):
    return FakeExecutor(vocab_ids=VOCAB, vocab_size=128, eos_id=2, block_size=4,
                        num_kv_blocks=num_blocks, **kw)


def generate(requests, speculator=None, num_blocks=64, max_prefill=16, recurrent=False, **kw):
    ex = executor(num_blocks, **kw)
    ex.has_recurrent_state = recurrent   # a hybrid model's executor: verify_apart
    core = EngineCore.build(ex, max_prefill_tokens=max_prefill, pool_factory=FakeBlockPool,
                            speculator=speculator)
    for i, r in enumerate(requests):
        core.add(i, r)
    out: dict[int, list[int]] = {i: [] for i in range(len(requests))}
    reasons = {}
    while core.has_work:
        report = core.step()
        assert report.error is None and report.num_chunks
        for o in report.outputs:
            out[o.seq_id] += o.new_token_ids
            if o.finish_reason is not None:
                reasons[o.seq_id] = o.finish_reason
    blocks = core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks   # nothing held, no leak
    return [out[i] for i in range(len(requests))], reasons, ex, core


def prompt(i, n):
    return [10 + (i * 7 + j) % 50 for j in range(n)]


def test_ngram_drafter_proposes_what_followed_the_longest_recent_match():
    seq = _seq([5, 1, 2, 9, 4, 7, 2, 8, 6, 1, 2])
    assert NgramDrafter(max_n=3).propose(seq, 3) == [9, 4, 7]   # "1 2" beats "2"
    assert NgramDrafter(max_n=1).propose(seq, 2) == [8, 6]      # latest "2"
    assert NgramDrafter().propose(_seq([3, 4, 5]), 4) == []
    seq.output_ids += [9, 4]   # the index grows with the sequence
    assert NgramDrafter(max_n=3).propose(seq, 2) == [7, 2]
    with pytest.raises(ValueError):
        make_drafter("medusa")


def test_mtp_drafter_proposes_the_executor_s_drafts_for_the_sequence():
    seq = _seq([5, 1, 2])
    asked = []
    drafter = make_drafter("mtp", source=lambda seq_id: asked.append(seq_id) or [7, 8, 9])
    assert drafter.propose(seq, 2) == [7, 8] and asked == [seq.seq_id]


def test_accept_keeps_agreeing_drafts_then_the_target_token():
    assert accept([5, 6, 7], [5, 6, 7, 8]) == [5, 6, 7, 8]
    assert accept([5, 6, 7], [5, 9, 7, 8]) == [5, 9]
    assert accept([5], [4, 4]) == [4]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_oracle_speculation_emits_exactly_the_plain_greedy_tokens(k):
    reqs = [EngineRequest(prompt(i, 3 + (i * 5) % 17), GREEDY, 14) for i in range(6)]
    plain, plain_reasons, _, _ = generate(reqs)
    oracle = OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)},
                           accept_rate=0.7, vocab_size=128, seed=k)
    spec = Speculator(oracle, k)
    got, reasons, ex, core = generate(reqs, spec, num_blocks=24, max_prefill=8)
    assert got == plain and reasons == plain_reasons
    assert all(len(t) == 14 for t in got)
    verify = [c for step in ex.steps for c in step if c.num_draft]
    assert verify and max(c.num_draft for c in verify) == k
    assert 0 < spec.accepted < spec.drafted and spec.verify_steps == len(verify)
    counters = core.counters()
    assert counters["spec_mean_accepted_length"] == spec.accepted / spec.verify_steps
    # fewer steps than one per token
    assert len(ex.steps) < sum(len(t) for t in got)


def test_ngram_speculation_accepts_copied_text_and_changes_nothing():
    body = prompt(3, 20)
    reqs = [EngineRequest([COPY_TRIGGER] + body, GREEDY, 20, stop_token_ids=frozenset({2})),
            EngineRequest(prompt(5, 9), GREEDY, 10, stop_token_ids=frozenset({2}))]
    script = [([COPY_TRIGGER], body[:15] + [2])]   # copies the prompt, then eos
    plain, plain_reasons, _, _ = generate(reqs, scripts=script)
    spec = Speculator(NgramDrafter(), 4)
    got, reasons, ex, _ = generate(reqs, spec, scripts=script)
    assert got == plain and reasons == plain_reasons
    assert reasons[0] == FinishReason.STOP and got[0][-1] == 2
    assert spec.accepted >= 10   # the copied run is drafted and accepted


def test_penalized_and_budgeted_requests_are_not_speculated():
    penalized = SamplingParams(temperature=1.0, frequency_penalty=0.5, seed=3)
    reqs = [EngineRequest(prompt(1, 6), penalized, 8)]
    plain, _, _, _ = generate(reqs)
    oracle = OracleDrafter({tuple(reqs[0].prompt_ids): plain[0]}, 1.0, 128)
    spec = Speculator(oracle, 3)
    got, _, ex, _ = generate(reqs, spec)
    assert got == plain and spec.drafted == 0
    assert not any(c.num_draft for step in ex.steps for c in step)


def _seq(tokens):
    from atlas.engine.sequence import SamplingState, Sequence
    return Sequence(0, EngineRequest(list(tokens), GREEDY, 8), 0, 100,
                    SamplingState(GREEDY))


def test_a_constrained_sequence_does_not_draft():
    """Drafts would need one grammar mask per verified position: a sequence under a
    grammar decodes one token per step, with its mask, beside drafting neighbours."""
    from atlas.engine.grammar_state import GrammarRequest
    from atlas.grammar import GrammarCompiler, Vocabulary
    # the fake emits ids 10..59: here the letters "A".."r", which the grammar allows
    vocab = Vocabulary.from_pieces([None] * 10 + [chr(c) for c in range(65, 65 + 118)], "raw",
                                   eos_token_ids=[2])
    anything = GrammarCompiler(vocab).compile_regex("[A-r]*")
    reqs = [EngineRequest(prompt(i, 12), GREEDY, 14) for i in range(2)]
    oracle_plain, _, _, _ = generate(reqs)
    oracle = OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, oracle_plain)},
                           accept_rate=1.0, vocab_size=128, seed=0)
    reqs[1] = EngineRequest(reqs[1].prompt_ids, GREEDY, 14,
                            grammar=GrammarRequest(anything))
    got, reasons, ex, _ = generate(reqs, Speculator(oracle, 3))
    assert got == oracle_plain and reasons == {0: FinishReason.LENGTH, 1: FinishReason.LENGTH}
    chunks = [c for step in ex.steps for c in step]
    assert any(c.num_draft for c in chunks if c.seq_id == 0)
    masked = [c for c in chunks if c.seq_id == 1 and c.sample]
    assert masked and all(c.num_draft == 0 and c.token_mask is not None for c in masked)


#: the H200 step-cost table of Qwen3-8B (bench/results/2026-12-01-gpu8): batch -> K = 1..4
H200_8B = {1: [1.05, 1.15, 1.20, 1.15], 8: [1.22, 1.47, 1.48, 1.65],
           32: [1.17, 1.49, 1.69, 2.10]}


def test_the_draft_policy_maximizes_expected_tokens_per_step_time():
    assert expected_tokens(3, 0.7) == pytest.approx(2.533)
    assert expected_tokens(0, 0.7) == 1.0
    assert best_num_drafts(H200_8B, 1, 4, 0.7) == 4      # 2.77 / 1.15
    assert best_num_drafts(H200_8B, 1, 3, 0.7) == 3
    assert best_num_drafts(H200_8B, 32, 4, 0.7) == 3     # 2.53 / 1.69 beats 2.77 / 2.10
    assert best_num_drafts(H200_8B, 20, 4, 0.2) == 1     # batch 20 takes batch 32's row
    assert best_num_drafts(H200_8B, 64, 4, 0.1) == 0     # 1.1 / 1.17 < 1: plain decoding
    assert best_num_drafts({}, 8, 3, 0.0) == 3           # no table: always K
    with pytest.raises(ValueError):
        Speculator(NgramDrafter(), 2, step_cost={8: [0.0, 1.2]})


def test_token_acceptance_is_the_per_token_rate_with_a_prior():
    spec = Speculator(NgramDrafter(), 3, prior_acceptance=0.7)
    assert spec.token_acceptance == pytest.approx(0.7)
    for _ in range(300):   # every step: 2 of 3 accepted, then a rejection: p = 2/3
        spec.record(3, 2)
    assert spec.token_acceptance == pytest.approx(2 / 3, abs=0.001)
    spec.record(3, 3)   # all accepted: no rejection observed
    assert spec.rejections == 300 and spec.verify_steps == 301


def test_a_step_cost_table_turns_drafting_off_where_it_cannot_pay():
    """Verification at batch >= 2 costs 5x a plain step in this table: no drafting while
    several sequences decode; the last one left drafts 2 per step. Output is unchanged."""
    reqs = [EngineRequest(prompt(i, 4 + i), GREEDY, 6 + 10 * i) for i in range(2)]
    plain, _, _, _ = generate(reqs)
    oracle = OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)}, 1.0, 128)
    spec = Speculator(oracle, 3, step_cost={1: [1.0, 1.0, 2.0], 2: [5.0, 5.0, 5.0]})
    got, _, ex, _ = generate(reqs, spec)
    assert got == plain
    alone = []
    for step in ex.steps:
        decoding = [c for c in step if len(c.token_ids) == c.num_draft + 1 and c.sample]
        if len(decoding) > 1:
            assert {c.num_draft for c in decoding} == {0}
        elif decoding:
            alone.append(decoding[0].num_draft)
    # 2 drafts a step, fewer only where max_tokens leaves less room
    assert alone[:-1] == [2] * (len(alone) - 1) and alone[-1] <= 2
    assert spec.drafted > 0 and spec.accepted == spec.drafted


def test_step_cost_table_reads_bench_spec_records():
    measured = {"1": {"plain_ms": 4.86, "k1_ms": 5.1, "k1_ratio": 1.05, "k2_ratio": 1.15},
                "32": {"plain_ms": 8.7, "k1_ratio": 1.17}}
    assert step_cost_table(measured) == {1: [1.05, 1.15], 32: [1.17]}
    for bad in ({}, {"x": {"k1_ratio": 1.0}}, {"8": {"plain_ms": 6.0}},
                {"8": {"k1_ratio": -1.0}}):
        with pytest.raises(ValueError):
            step_cost_table(bad)


def test_a_hybrid_verifies_only_in_steps_without_prefill():
    """An executor with recurrent state (verify_apart): no step both verifies drafts and
    prefills; the sequences still speculate once nothing waits, and emit the plain tokens."""
    reqs = [EngineRequest(prompt(i, 3 + (i * 5) % 17), GREEDY, 14) for i in range(6)]
    plain, _, _, _ = generate(reqs, max_batch_size=3)
    oracle = OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)},
                           accept_rate=0.7, vocab_size=128, seed=1)
    spec = Speculator(oracle, 3)
    got, _, ex, core = generate(reqs, spec, max_prefill=8, recurrent=True, max_batch_size=3)
    assert core.scheduler.verify_apart and got == plain and spec.accepted > 0
    for step in ex.steps:
        assert not (any(c.num_draft for c in step)
                    and any(len(c.token_ids) > c.num_draft + 1 for c in step))
