"""The Sampler on the host backend: greedy and its limits, seeded determinism independent of
the batch, filters, penalties against an independent numpy computation, numeric guards, the
sampled distribution, and graph-capture hygiene."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import SAMPLE_ROW
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache
from atlas.runtime.sampler import Sampler

VOCAB = 64


class Harness:
    """A Sampler plus a logits buffer on a HostBackend."""

    def __init__(self, max_batch: int = 8, max_slots: int = 8, vocab: int = VOCAB) -> None:
        self.backend = HostBackend()
        self.vocab = vocab
        self.sampler = Sampler(self.backend, KernelCache(self.backend), max_batch, max_slots,
                               vocab, seed=7)
        self.logits = self.backend.alloc(4 * max_batch * vocab)

    def step(self, logits: np.ndarray, slots: list[int], params: list[SamplingParams],
             steps: list[int]) -> list[int]:
        rows = len(slots)
        self.backend.copy_h2d(self.logits, np.ascontiguousarray(logits, dtype=np.float32))
        self.sampler.prepare(slots, params, steps)
        self.sampler.enqueue(0, self.logits, rows)
        return self.backend.download(self.sampler.out_ids, np.int32, rows).tolist()

    def penalized(self, rows: int) -> np.ndarray:
        return self.backend.download(self.logits, np.float32, (rows, self.vocab))


def _logits(rows: int, seed: int = 0, vocab: int = VOCAB) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((rows, vocab)) * 3).astype(np.float32)


def test_greedy_top_k_1_and_tiny_top_p_all_pick_the_argmax() -> None:
    h = Harness()
    logits = _logits(6)
    for s in range(6):
        h.sampler.assign(s, [], SamplingParams(seed=s))
    params = [GREEDY, SamplingParams(temperature=1.5, top_k=1),
              SamplingParams(temperature=1.0, top_p=1e-6), GREEDY,
              SamplingParams(temperature=0.3, top_k=1, top_p=0.5),
              SamplingParams(temperature=2.0, top_p=1e-4)]
    assert h.step(logits, list(range(6)), params, [3] * 6) == logits.argmax(axis=1).tolist()


def test_seeded_draws_do_not_depend_on_batch_composition() -> None:
    h = Harness()
    logits = _logits(1, seed=3)[0]
    noise = _logits(4, seed=4)
    p = SamplingParams(temperature=3.0, seed=1234)
    h.sampler.assign(2, [], p)
    h.sampler.assign(5, [], SamplingParams(temperature=1.0, seed=99))
    alone = [h.step(logits[None], [2], [p], [k])[0] for k in range(12)]
    crowded = []
    for k in range(12):
        batch = np.stack([noise[0], noise[1], logits, noise[2]])
        crowded.append(h.step(batch, [5, 5, 2, 5], [GREEDY, p, p, GREEDY], [k, 0, k, 1])[2])
    assert alone == crowded
    assert len(set(alone)) > 3  # the step counter really advances the stream


def test_same_seed_in_another_slot_draws_the_same_tokens() -> None:
    h = Harness()
    logits = _logits(1, seed=5)
    p = SamplingParams(temperature=0.9, top_p=0.95, seed=42)
    h.sampler.assign(0, [], p)
    h.sampler.assign(3, [], p)
    for k in range(5):
        assert h.step(logits, [0], [p], [k]) == h.step(logits, [3], [p], [k])


def test_top_k_and_min_p_only_ever_draw_allowed_tokens() -> None:
    h = Harness(max_batch=64)
    logits = np.full(VOCAB, -5.0, dtype=np.float32)
    logits[[4, 9, 17, 30]] = [2.0, 1.5, 1.0, -1.0]  # p relative to max: 1, .61, .37, .05
    top_k = SamplingParams(temperature=1.0, top_k=2, seed=1)
    min_p = SamplingParams(temperature=1.0, min_p=0.3, seed=2)
    h.sampler.assign(0, [], top_k)
    h.sampler.assign(1, [], min_p)
    rows = np.tile(logits, (64, 1))
    got_k = h.step(rows, [0] * 64, [top_k] * 64, list(range(64)))
    got_p = h.step(rows, [1] * 64, [min_p] * 64, list(range(64)))
    assert set(got_k) == {4, 9}
    assert set(got_p) == {4, 9, 17}


def _chi_square(draws: list[int], probs: np.ndarray) -> float:
    observed = np.bincount(draws, minlength=probs.size).astype(np.float64)
    expected = probs * len(draws)
    support = expected > 0
    assert observed[~support].sum() == 0, "drew a token of zero probability"
    return float(((observed[support] - expected[support]) ** 2 / expected[support]).sum())


@pytest.mark.parametrize("params, keep", [
    (SamplingParams(temperature=1.0, seed=11), 8),
    (SamplingParams(temperature=0.7, top_k=5, seed=12), 5),
    (SamplingParams(temperature=1.0, top_p=0.8, seed=13), None),
])
def test_draws_follow_the_renormalized_softmax(params: SamplingParams, keep: int | None) -> None:
    vocab, rows, rounds = 8, 256, 8
    h = Harness(max_batch=rows, max_slots=1, vocab=vocab)
    logits = np.array([2.0, 1.0, 0.5, 0.0, -0.3, -1.0, -1.5, -2.5], dtype=np.float32)
    p = np.exp((logits - logits.max()) / params.temperature)
    p /= p.sum()
    if keep is None:  # nucleus: smallest prefix reaching top_p (probabilities are sorted)
        keep = int(np.argmax(np.cumsum(p) >= params.top_p)) + 1
    p[keep:] = 0.0
    p /= p.sum()
    h.sampler.assign(0, [], params)
    draws: list[int] = []
    for r in range(rounds):
        draws += h.step(np.tile(logits, (rows, 1)), [0] * rows, [params] * rows,
                        list(range(r * rows, (r + 1) * rows)))
    # 0.1% critical value of chi-square with <= 7 degrees of freedom is 24.3
    assert _chi_square(draws, p) < 24.3


def test_penalties_match_an_independent_computation() -> None:
    h = Harness()
    vocab = VOCAB
    prompt = [3, 5, 5, 40]
    p = SamplingParams(temperature=0.0, repetition_penalty=1.5, presence_penalty=0.4,
                       frequency_penalty=0.3)
    h.sampler.assign(1, prompt, p)
    generated = [7, 7, 3, 50]
    for k, tok in enumerate(generated):  # force each token with a one-hot logit row
        forced = np.full((1, vocab), -10.0, dtype=np.float32)
        forced[0, tok] = 10.0
        assert h.step(forced, [1], [p], [k]) == [tok]
    logits = _logits(1, seed=9)
    h.step(logits, [1], [p], [len(generated)])
    want = logits[0].astype(np.float64)
    counts = np.bincount(generated, minlength=vocab)
    seen = np.zeros(vocab, bool)
    seen[prompt + generated] = True
    want = np.where(seen & (want > 0), want / 1.5, np.where(seen, want * 1.5, want))
    want -= 0.4 * (counts > 0) + 0.3 * counts
    np.testing.assert_allclose(h.penalized(1)[0], want, rtol=1e-6, atol=1e-6)


def test_reassigning_a_slot_forgets_the_previous_sequence() -> None:
    h = Harness()
    p = SamplingParams(temperature=0.0, presence_penalty=2.0)
    h.sampler.assign(0, [], p)
    forced = np.zeros((1, VOCAB), dtype=np.float32)
    forced[0, 9] = 1.0
    h.step(forced, [0], [p], [0])
    h.step(forced, [0], [p], [1])
    assert h.penalized(1)[0, 9] == pytest.approx(-1.0)  # penalized once
    h.sampler.assign(0, [], p)
    h.step(forced, [0], [p], [0])
    assert h.penalized(1)[0, 9] == pytest.approx(1.0)  # fresh counts


def test_restored_counts_penalize_like_the_counts_they_restore() -> None:
    """A sequence back from preemption gets its counts from the engine (`drawn_counts`):
    the slot must penalize exactly as the slot that counted the draws on the device."""
    h = Harness()
    p = SamplingParams(temperature=0.0, repetition_penalty=1.2, presence_penalty=0.5,
                       frequency_penalty=0.7)
    prompt = [4, 8]
    h.sampler.assign(0, prompt, p)
    drawn = [11, 12, 11, 30, 11]
    for k, tok in enumerate(drawn):
        forced = np.full((1, VOCAB), -10.0, dtype=np.float32)
        forced[0, tok] = 10.0
        h.step(forced, [0], [p], [k])
    h.sampler.assign(3, prompt, p, drawn_counts={11: 3, 12: 1, 30: 1})
    logits = _logits(1, seed=4)
    h.step(logits, [0], [p], [5])
    counted = h.penalized(1)[0].copy()
    h.step(logits, [3], [p], [5])
    np.testing.assert_array_equal(h.penalized(1)[0], counted)
    assert counted[11] != logits[0, 11]  # the counts really penalize
    h.sampler.assign(1, prompt, GREEDY, drawn_counts={11: 3})  # no penalties: counts unused
    with pytest.raises(ValueError, match="vocabulary"):
        h.sampler.assign(2, prompt, p, drawn_counts={VOCAB: 1})


def test_guards_produce_tokens_never_nan() -> None:
    h = Harness()
    for s in range(4):
        h.sampler.assign(s, [1, 2], SamplingParams(seed=s))
    logits = _logits(4, seed=2)
    logits[1, :] = 0.25                    # all equal
    logits[2, :] = -np.inf
    logits[2, [10, 20]] = [0.0, 1.0]       # only two finite
    logits[3, :] = -np.inf                 # nothing finite
    params = [SamplingParams(temperature=0.0, repetition_penalty=0.0),
              SamplingParams(temperature=1.0, top_p=0.5, top_k=3),
              SamplingParams(temperature=1e-30),
              SamplingParams(temperature=1.0, min_p=0.5)]
    got = h.step(logits, [0, 1, 2, 3], params, [0] * 4)
    assert not np.isnan(h.penalized(4)).any()
    assert got[0] == int(logits[0].argmax())
    assert 0 <= got[1] < VOCAB
    assert got[2] == 20
    assert got[3] == 0


def test_enqueue_is_two_fixed_launches_and_capturable() -> None:
    """Penalties, then sampling whose finishing blocks count the tokens (and copy them to
    the host buffer the caller names: none here, no host copy)."""
    mock = MockGpuBackend()
    s = Sampler(mock, KernelCache(mock), 4, 5, 1000)
    mock.drain_launches()
    s.enqueue(0, 1 << 30, 3)
    recs = mock.drain_launches()
    assert [r.func for r in recs] == ["apply_penalties_f32", "sample_f32"]
    assert recs[1].args["out"] == s.out_ids
    assert recs[1].args["counts"] == s.counts == recs[0].args["counts"]
    assert recs[1].args["host_ids"] == 0
    # the multi-block workspace is the sampler's own, allocated once (graph-stable addresses)
    assert (recs[1].args["scratch"], recs[1].args["counters"]) == (s.scratch, s.counters)
    assert recs[1].grid == (1, 3, 1)  # 1000 logits: one 4096-logit block per row
    assert all(r.args["rows"] == 3 and r.args["vocab"] == 1000 for r in recs)

    h = Harness()
    p = SamplingParams(temperature=1.0, seed=3)
    h.sampler.assign(0, [], p)
    logits = _logits(1, seed=8)
    h.backend.copy_h2d(h.logits, logits)
    h.backend.begin_capture(0)
    h.sampler.enqueue(0, h.logits, 1)  # HostBackend raises on allocation inside capture
    graph = h.backend.end_capture(0)
    replayed = []
    for k in range(4):  # per-step inputs change behind the graph's fixed addresses
        h.backend.copy_h2d(h.logits, logits)
        h.sampler.prepare([0], [p], [k])
        h.backend.launch_graph(graph, 0)
        replayed.append(int(h.backend.download(h.sampler.out_ids, np.int32, 1)[0]))
    h.sampler.assign(0, [], p)
    assert replayed == [h.step(logits, [0], [p], [k])[0] for k in range(4)]


def test_prepare_and_assign_reject_bad_inputs() -> None:
    h = Harness(max_batch=2, max_slots=2)
    with pytest.raises(ValueError, match="slot"):
        h.sampler.assign(2, [], GREEDY)
    with pytest.raises(ValueError, match="max_batch"):
        h.sampler.prepare([0, 0, 0], [GREEDY] * 3, [0] * 3)
    with pytest.raises(ValueError, match="top_p"):
        h.sampler.assign(0, [], SamplingParams(top_p=0.0))
    mock = MockGpuBackend()
    with pytest.raises(ValueError, match="exceeds"):  # sample_f32 handles 128 blocks a row
        Sampler(mock, KernelCache(mock), 1, 1, 128 * 4096 + 1)


def test_staged_rows_live_in_the_callers_inputs_and_follow_every_change() -> None:
    """`stage_rows`: prepare writes the row records into the caller's pinned words (the
    runner's step inputs, uploaded in one copy) and copies nothing itself; a step of the
    same slots rewrites only the step words, and a slot's new record (a new sequence's seed
    and params) still reaches its row. close() leaves the caller's buffer alone."""
    mock = MockGpuBackend()
    s = Sampler(mock, KernelCache(mock), 4, 2, 1000)
    words = SAMPLE_ROW.itemsize // 4
    with pytest.raises(ValueError, match="stage_rows"):
        s.stage_rows(mock.alloc(4 * words), np.zeros(words, np.int32))
    device = mock.alloc(4 * 4 * words)
    host = mock.alloc_host_pinned(4 * 4 * words).view(np.int32)
    s.stage_rows(device, host)
    rows = host.view(SAMPLE_ROW)
    hot, cool = SamplingParams(temperature=0.5, seed=3), SamplingParams(temperature=0.25, seed=9)
    s.assign(0, [1], GREEDY)
    s.assign(1, [1], hot)
    copies = mock.op_counts["copy_h2d"]
    s.prepare([0, 1, 1], [GREEDY, hot, hot], [5, 9, 10])
    assert rows["slot"][:3].tolist() == [0, 1, 1] and rows["step"][:3].tolist() == [5, 9, 10]
    s.prepare([0, 1, 1], [GREEDY, hot, hot], [6, 10, 11])
    assert rows["step"][:3].tolist() == [6, 10, 11] and rows["temperature"][1] == 0.5
    s.assign(1, [1], cool)  # another sequence takes slot 1
    s.prepare([0, 1, 1], [GREEDY, cool, cool], [6, 0, 1])
    assert rows["temperature"][1:3].tolist() == [0.25, 0.25]
    assert rows["seed_lo"][1:3].tolist() == [9, 9] and rows["step"][:3].tolist() == [6, 0, 1]
    assert mock.op_counts["copy_h2d"] == copies and s.row_params == device
    s.close()
    assert device in mock.live_allocations
