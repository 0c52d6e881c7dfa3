"""The continuous-batching scheduler (and the engine core stepping it) driven against the
fake paged-KV executor."""

from __future__ import annotations

import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.block_manager import BlockManager
from atlas.engine.core import EngineCore
from atlas.engine.request import EngineRequest, FinishReason
from atlas.engine.scheduler import Scheduler
from atlas.engine.scheduling_policy import FifoPolicy, SlaiPolicy, make_policy
from tests.server.fakes import FakeBlockPool, FakeExecutor

VOCAB = list(range(10, 60))
EOS = 2


def make(num_blocks=64, block_size=4, max_num_seqs=8, max_prefill=16, policy=None, mixed=None,
         **kw):
    pool = FakeBlockPool(num_blocks)
    ex = FakeExecutor(vocab_ids=VOCAB, vocab_size=64, eos_id=EOS, block_size=block_size,
                      num_kv_blocks=num_blocks, **kw)
    sched = Scheduler(BlockManager(pool, num_blocks, block_size), policy or FifoPolicy(),
                      max_num_seqs=max_num_seqs, max_seq_len=512,
                      max_prefill_tokens=max_prefill, max_mixed_step_tokens=mixed)
    return pool, ex, sched


def run(sched, ex, max_steps=10_000):
    """Step an engine core to completion (the clock reads 1.0, 2.0, ... at each step); return
    {seq_id: (tokens, finish_reason)}."""
    now = [0.0]
    core = EngineCore(sched, ex, clock=lambda: now[0])
    results: dict[int, list] = {}
    for _ in range(max_steps):
        if not core.has_work:
            break
        now[0] += 1.0
        report = core.step()
        assert report.error is None
        chunks = ex.steps[-1] if report.num_chunks else []
        assert sum(len(c.token_ids) for c in chunks) <= sched.step_token_budget
        assert len(chunks) <= sched.max_num_seqs
        for o in report.outputs:
            toks, _ = results.get(o.seq_id, ([], None))
            results[o.seq_id] = (toks + list(o.new_token_ids), o.finish_reason)
    assert not core.has_work
    return results


def prompt(i, n):
    return [10 + (i * 7 + j) % 50 for j in range(n)]


def solo(p, max_tokens):
    _, ex, sched = make()
    sched.add(0, EngineRequest(p, GREEDY, max_tokens), 0.0)
    return run(sched, ex)[0][0]


@pytest.mark.parametrize("num_blocks,max_prefill", [(256, 64), (24, 5), (12, 3)])
def test_concurrent_equals_solo_with_chunking_and_preemption(num_blocks, max_prefill):
    pool, ex, sched = make(num_blocks=num_blocks, max_prefill=max_prefill)
    prompts = {i: prompt(i, 3 + (i * 5) % 17) for i in range(12)}
    for i, p in prompts.items():
        sched.add(i, EngineRequest(p, GREEDY, 9), 0.0)
    results = run(sched, ex)
    for i, p in prompts.items():
        assert results[i] == (solo(p, 9), FinishReason.LENGTH), i
    assert sched.blocks.num_available == num_blocks  # cached, none held
    if num_blocks == 12:
        assert sched.num_preemptions > 0


def test_chunked_prefill_interleaves_with_decode():
    _, ex, sched = make(max_prefill=5, max_num_seqs=2)
    sched.add(0, EngineRequest(prompt(0, 3), GREEDY, 20), 0.0)
    run_steps = 0
    now = 0.0
    while run_steps < 3:  # get seq 0 decoding
        now += 1
        plan = sched.schedule(now)
        sched.commit(plan, ex.execute(plan.chunks), now)
        run_steps += 1
    sched.add(1, EngineRequest(prompt(1, 12), GREEDY, 5), now)
    chunks = []
    for _ in range(3):
        now += 1
        plan = sched.schedule(now)
        by_id = {st.seq_id: st for st in plan.chunks}
        assert len(by_id[0].token_ids) == 1  # decode continues every step
        chunks.append((by_id[1].start_pos, len(by_id[1].token_ids), by_id[1].sample))
        sched.commit(plan, ex.execute(plan.chunks), now)
    # the decode token is reserved first: 4 of the 5-token budget are left for the prompt
    assert chunks == [(0, 4, False), (4, 4, False), (8, 4, True)]


@pytest.mark.parametrize("mixed", [128, None])
def test_mixed_step_budget_bounds_every_step_a_stream_waits_on(mixed):
    """The contest's throughput shape scaled down 8x (32 streams of 128 prompt + 16 new
    tokens, all arriving at once): with a mixed-step budget every step that carries a decode
    token (so delays a stream's next token) holds at most that many tokens, and exactly that
    many while prompt tokens are left (full prefill GEMM tiles); only steps nobody decodes
    in use the larger prefill budget. Without one, decoding streams wait on full
    prefill-budget steps (the inter-token p99 of 69 ms at 2,048 tokens on the H200)."""
    streams, prompt_len, new = 32, 128, 16
    _, ex, sched = make(num_blocks=512, block_size=16, max_num_seqs=streams, max_prefill=256,
                        mixed=mixed, max_batch_size=streams)
    for i in range(streams):
        sched.add(i, EngineRequest(prompt(i, prompt_len), GREEDY, new), 0.0)
    core = EngineCore(sched, ex, clock=lambda: 0.0)
    waits: list[int] = []     # tokens of the step each stream's second.. tokens came from
    started: set[int] = set()
    idle_steps, prompt_left = [], streams * prompt_len
    got = {i: 0 for i in range(streams)}
    while core.has_work:
        report = core.step()
        chunks = ex.steps[-1]
        size = sum(len(c.token_ids) for c in chunks)
        decoding = [c for c in chunks if c.start_pos >= prompt_len]
        ones = [len(c.token_ids) == 1 for c in chunks]
        assert ones == sorted(ones, reverse=True)   # one-token chunks first (decode attention)
        prompt_left -= size - len(decoding)
        if decoding and prompt_left > 0 and mixed is not None:
            assert size == mixed          # a full tile of prompt chunks beside the decodes
        if not decoding:
            idle_steps.append(size)
        for o in report.outputs:
            got[o.seq_id] += len(o.new_token_ids)
            if o.seq_id in started:
                waits.append(size)
            started.add(o.seq_id)
    assert got == {i: new for i in range(streams)}
    assert idle_steps[0] == 256 and max(idle_steps) == 256
    assert len(waits) == streams * (new - 1)
    assert max(waits) == (mixed or 256)


def test_mixed_step_budget_is_clamped_to_the_buffers_and_the_batch():
    assert make(max_prefill=64, mixed=32)[2].mixed_step_budget == 32
    assert make(max_prefill=64, mixed=None)[2].mixed_step_budget == 64
    assert make(max_prefill=64, mixed=4096)[2].mixed_step_budget == 64   # buffers' bound
    assert make(max_prefill=64, max_num_seqs=16, mixed=8)[2].mixed_step_budget == 16
    with pytest.raises(ValueError):
        make(mixed=0)


def test_stop_token_and_max_tokens_finish_reasons():
    _, ex, sched = make(scripts=[([99], [11, 12, EOS, 13])])
    sched.add(0, EngineRequest([5, 99, 6], GREEDY, 10, stop_token_ids=frozenset({EOS})), 0.0)
    sched.add(1, EngineRequest([5, 6, 7], GREEDY, 4, stop_token_ids=frozenset({EOS})), 0.0)
    results = run(sched, ex)
    assert results[0] == ([11, 12, EOS], FinishReason.STOP)
    assert len(results[1][0]) == 4 and results[1][1] == FinishReason.LENGTH


def test_abort_frees_blocks_and_releases_executor_state():
    pool, ex, sched = make()
    sched.add(0, EngineRequest(prompt(0, 10), GREEDY, 100), 0.0)
    plan = sched.schedule(1.0)
    sched.commit(plan, ex.execute(plan.chunks), 1.0)
    assert pool.num_free < 64
    out = sched.abort(0)
    assert out is not None and out.finish_reason == FinishReason.ABORT
    assert sched.blocks.num_available == 64 and sched.take_released() == [0]
    assert sched.abort(0) is None and not sched.has_work


def test_request_timeout_finishes_waiting_and_running():
    _, ex, sched = make(max_num_seqs=1)
    sched.add(0, EngineRequest(prompt(0, 4), GREEDY, 100, deadline=5.0), 0.0)
    sched.add(1, EngineRequest(prompt(1, 4), GREEDY, 100, deadline=3.0), 0.0)
    results = run(sched, ex)
    assert results[1] == ([], FinishReason.TIMEOUT)   # never admitted: the batch was full
    assert results[0][1] == FinishReason.TIMEOUT and len(results[0][0]) == 4


def test_prompt_that_cannot_fit_is_rejected():
    _, _, sched = make(num_blocks=4, block_size=4)
    with pytest.raises(ValueError):
        sched.add(0, EngineRequest(list(range(16)), GREEDY, 1), 0.0)
    sched.add(1, EngineRequest(list(range(15)), GREEDY, 50), 0.0)  # capped to length instead


def test_context_limit_ends_with_length():
    pool, ex, sched = make(num_blocks=4, block_size=4)
    sched.add(0, EngineRequest(prompt(0, 10), GREEDY, 50), 0.0)
    tokens, reason = run(sched, ex)[0]
    assert reason == FinishReason.LENGTH and len(tokens) == 6
    assert sched.blocks.num_available == 4


def test_slai_orders_by_time_between_tokens_slack():
    _, ex, sched = make(policy=SlaiPolicy(0.1))
    for i in range(3):
        sched.add(i, EngineRequest(prompt(i, 3), GREEDY, 50), 0.0)
    plan = sched.schedule(0.0)
    sched.commit(plan, ex.execute(plan.chunks), 0.0)
    seqs = {s.seq_id: s for s in sched.running}
    seqs[0].last_emit_time, seqs[1].last_emit_time, seqs[2].last_emit_time = 0.5, 0.2, 0.9
    assert [s.seq_id for s in sched.policy.order(sched.running, 1.0)] == [1, 0, 2]
    assert [s.seq_id for s in FifoPolicy().order(sched.running, 1.0)] == [0, 1, 2]


def test_slai_preempts_the_sequence_with_most_slack():
    pool, ex, sched = make(num_blocks=3, block_size=4, policy=SlaiPolicy(1.0))
    sched.add(0, EngineRequest(prompt(0, 4), GREEDY, 8), 0.0)
    sched.add(1, EngineRequest(prompt(1, 4), GREEDY, 8), 0.0)
    plan = sched.schedule(0.0)
    sched.commit(plan, ex.execute(plan.chunks), 0.0)
    assert len(sched.running) == 2 and pool.num_free == 1
    sched.running[0].last_emit_time = 5.0   # seq 0 has the most slack
    plan = sched.schedule(5.5)
    assert [st.seq_id for st in plan.chunks] == [1]
    assert sched.waiting[0].seq_id == 0 and sched.take_released() == [0]


def test_priority_orders_admission_and_preemption():
    """Lower priority values are admitted first (then arrival), and under pressure the
    highest value running is preempted; other policies refuse a non-zero priority."""
    pool, ex, sched = make(num_blocks=4, block_size=4, max_num_seqs=2,
                           policy=make_policy("priority", 100))
    for i, prio in enumerate((5, 0, 5, -1)):
        sched.add(i, EngineRequest(prompt(i, 4), GREEDY, 8, priority=prio), 0.0)
    assert [s.seq_id for s in sched.waiting] == [3, 1, 0, 2]
    plan = sched.schedule(0.0)
    assert sorted(st.seq_id for st in plan.chunks) == [1, 3]
    sched.commit(plan, ex.execute(plan.chunks), 0.0)
    assert [s.seq_id for s in sched.policy.order(sched.running, 0.0)] == [3, 1]
    # seq 1 (priority 0) is the victim when the pool runs short, not seq 3 (-1)
    while not sched.num_preemptions:
        plan = sched.schedule(0.0)
        sched.commit(plan, ex.execute(plan.chunks), 0.0)
    assert sched.waiting[0].seq_id == 1 and 3 in {s.seq_id for s in sched.running}
    assert set(run(sched, ex)) >= {0, 1, 2}   # every one still waiting finishes after it
    assert sched.blocks.num_available == sched.blocks.num_blocks   # free or cached
    _, _, fifo = make()
    with pytest.raises(ValueError, match="priority scheduling"):
        fifo.add(0, EngineRequest(prompt(0, 4), GREEDY, 8, priority=1), 0.0)


def test_make_policy_rejects_unknown():
    assert make_policy("slai", 50).tbt_deadline_s == pytest.approx(0.05)
    with pytest.raises(ValueError):
        make_policy("lifo", 50)


def test_fail_all_ends_running_and_waiting_and_frees_blocks():
    pool, ex, sched = make(max_num_seqs=1)
    sched.add(0, EngineRequest(prompt(0, 6), GREEDY, 10), 0.0)
    sched.add(1, EngineRequest(prompt(1, 6), GREEDY, 10), 0.0)
    plan = sched.schedule(1.0)
    sched.commit(plan, ex.execute(plan.chunks), 1.0)
    outs = sched.fail_all()
    assert sorted((o.seq_id, o.finish_reason) for o in outs) == [
        (0, FinishReason.ERROR), (1, FinishReason.ERROR)]
    assert sched.blocks.num_available == 64 and not sched.has_work and sched.take_released() == [0]
