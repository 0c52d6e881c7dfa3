"""Logit biases in the sampler (host backend): a bias is added to its token's logit after the
penalties, flips or suppresses a greedy choice, moves the logprobs with it, stays per slot;
a slot's biases are fixed by `assign`; the launch takes the sampler's own tables."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.sampling import GREEDY, MAX_LOGIT_BIAS, SamplingParams
from atlas.runtime.host import HostBackend
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache
from atlas.runtime.sampler import Sampler

VOCAB = 3000  # three 1024-token spans, the last one ragged


class Harness:
    """A Sampler (with logprobs) plus a logits buffer on a HostBackend."""

    def __init__(self, rows: int = 4) -> None:
        self.backend = HostBackend()
        self.sampler = Sampler(self.backend, KernelCache(self.backend), rows, rows, VOCAB,
                               seed=3, max_logprobs=2)
        self.logits = self.backend.alloc(4 * rows * VOCAB)

    def step(self, logits: np.ndarray, params: list[SamplingParams],
             slots: list[int] | None = None) -> list[int]:
        rows = len(params)
        slots = list(range(rows)) if slots is None else slots
        self.backend.copy_h2d(self.logits, np.ascontiguousarray(logits, dtype=np.float32))
        self.sampler.prepare(slots, params, [0] * rows)
        self.sampler.prepare_logprobs([0] * rows)
        self.sampler.enqueue(0, self.logits, rows)
        return self.backend.download(self.sampler.out_ids, np.int32, rows).tolist()

    def biased(self, rows: int) -> np.ndarray:
        return self.backend.download(self.logits, np.float32, (rows, VOCAB))


def _logits(rows: int) -> np.ndarray:
    x = (np.random.default_rng(0).standard_normal((rows, VOCAB)) * 0.5).astype(np.float32)
    x[:, 2500] = 4.0   # every row's argmax, in the last span
    x[:, 700] = 3.0    # the runner-up, in the first
    return x


def test_a_bias_flips_or_suppresses_the_greedy_choice_and_only_its_slot() -> None:
    h = Harness()
    up = SamplingParams(temperature=0.0, logit_bias={700: 5.0, 2999: -2.5})
    down = SamplingParams(temperature=0.0, logit_bias={2500: -5.0})
    small = SamplingParams(temperature=0.0, logit_bias={700: 0.5})
    params = [up, down, GREEDY, small]
    for slot, p in enumerate(params):
        h.sampler.assign(slot, [], p)
    logits = _logits(4)
    assert h.step(logits, params) == [700, 700, 2500, 2500]
    want = logits.copy()
    want[0, [700, 2999]] += [5.0, -2.5]
    want[1, 2500] -= 5.0
    want[3, 700] += 0.5
    np.testing.assert_array_equal(h.biased(4), want)  # the bias is exactly added, once


def test_penalties_come_before_the_bias() -> None:
    """Token 5 is in the prompt and drawn once: repetition 2 halves its logit 2.0, presence
    0.5 subtracts, then the bias adds 3 (bias first would give (2 + 3) / 2 - 0.5 = 2.0)."""
    h = Harness(rows=2)
    p = SamplingParams(temperature=0.0, repetition_penalty=2.0, presence_penalty=0.5,
                       logit_bias={5: 3.0, 6: -1.0})
    h.sampler.assign(0, [5], p, drawn_counts={5: 1})
    h.sampler.assign(1, [5], p)  # the same biases, no draws: repetition alone on token 5
    logits = np.zeros((2, VOCAB), dtype=np.float32)
    logits[:, 5] = 2.0
    logits[:, 6] = -1.0
    h.step(logits, [p, p])
    got = h.biased(2)
    assert got[0, 5] == pytest.approx(2.0 / 2 - 0.5 + 3.0)
    assert got[1, 5] == pytest.approx(2.0 / 2 + 3.0)
    assert got[:, 6].tolist() == [-2.0, -2.0]  # not seen: bias only


def test_logprobs_come_from_the_biased_logits() -> None:
    h = Harness(rows=1)
    p = SamplingParams(temperature=0.0, logit_bias={700: 2.5})
    h.sampler.assign(0, [], p)
    logits = _logits(1)
    (token,) = h.step(logits, [p])
    sampled, _, _ = h.sampler.read_logprobs(1)
    biased = logits[0].astype(np.float64)
    biased[700] += 2.5
    reference = biased - biased.max() - np.log(np.exp(biased - biased.max()).sum())
    assert token == 700 and sampled[0] == pytest.approx(reference[700], abs=1e-5)


def test_a_slots_biases_are_fixed_by_assign() -> None:
    h = Harness(rows=2)
    first = SamplingParams(temperature=0.0, logit_bias={700: 5.0})
    h.sampler.assign(0, [], first)
    logits = _logits(1)
    assert h.step(logits, [first]) == [700]
    with pytest.raises(ValueError, match="logit_bias differs"):
        h.step(logits, [SamplingParams(temperature=0.0, logit_bias={700: 6.0})])
    with pytest.raises(ValueError, match="logit_bias differs"):
        h.step(logits, [GREEDY])
    h.sampler.assign(0, [], GREEDY)  # a new sequence without biases: none are applied
    assert h.step(logits, [GREEDY]) == [2500]
    np.testing.assert_array_equal(h.biased(1), logits)
    with pytest.raises(ValueError, match="vocabulary"):
        h.sampler.assign(1, [], SamplingParams(logit_bias={VOCAB: 1.0}))
    with pytest.raises(ValueError, match="logit_bias"):
        h.sampler.assign(1, [], SamplingParams(logit_bias={3: 150.0}))
    full = SamplingParams(temperature=0.0, logit_bias={t: -1.0 for t in range(MAX_LOGIT_BIAS)})
    h.sampler.assign(1, [], full)
    h.step(np.zeros((1, VOCAB), np.float32), [full], slots=[1])
    got = h.biased(1)[0]
    assert (got[:MAX_LOGIT_BIAS] == -1.0).all() and (got[MAX_LOGIT_BIAS:] == 0.0).all()


def test_the_launch_takes_the_samplers_tables_and_stays_capturable() -> None:
    mock = MockGpuBackend()
    s = Sampler(mock, KernelCache(mock), 4, 5, 1000)
    mock.drain_launches()
    s.enqueue(0, 1 << 30, 3)
    (rec,) = [r for r in mock.drain_launches() if r.func == "apply_penalties_f32"]
    assert (rec.args["bias_ids"], rec.args["bias_vals"]) == (s.bias_ids, s.bias_vals)
    assert rec.args["max_bias"] == MAX_LOGIT_BIAS

    h = Harness(rows=1)
    p = SamplingParams(temperature=0.7, seed=5, logit_bias={700: 1.5, 2500: -0.5})
    h.sampler.assign(0, [], p)
    logits = _logits(1)
    h.backend.copy_h2d(h.logits, logits)
    h.sampler.prepare([0], [p], [0])
    h.sampler.prepare_logprobs([0])
    h.backend.begin_capture(0)
    h.sampler.enqueue(0, h.logits, 1)  # HostBackend raises on allocation inside capture
    graph = h.backend.end_capture(0)
    replayed = []
    for k in range(6):
        h.backend.copy_h2d(h.logits, logits)
        h.sampler.prepare([0], [p], [k])
        h.backend.launch_graph(graph, 0)
        replayed.append(int(h.backend.download(h.sampler.out_ids, np.int32, 1)[0]))
    h.sampler.assign(0, [], p)
    assert replayed == [_eager(h, logits, p, k) for k in range(6)]
    assert len(set(replayed)) > 1  # the biases leave a real draw (not a forced token)


def _eager(h: Harness, logits: np.ndarray, p: SamplingParams, step: int) -> int:
    h.backend.copy_h2d(h.logits, logits)
    h.sampler.prepare([0], [p], [step])
    h.sampler.enqueue(0, h.logits, 1)
    return int(h.backend.download(h.sampler.out_ids, np.int32, 1)[0])
