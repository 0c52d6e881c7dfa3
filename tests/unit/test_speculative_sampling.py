"""Rejection sampling of one-hot (n-gram, oracle) drafts keeps the target distribution.

The real Sampler (host backend) draws every verified position of many verifications on a
4-token vocabulary and `speculative.accept` keeps or rejects the draft. Against the exact
softmax: the emitted token must follow p (whatever was drafted), the draft must be accepted
with probability p(draft), a rejection must emit p without the draft renormalised, and the
token after an accepted draft must follow the next position's p. Chi-square at p = 0.001
with fixed seeds: deterministic, and far from the bound unless the rule is wrong.
"""

from __future__ import annotations

import numpy as np

from atlas.core.sampling import SamplingParams
from atlas.model.batch import accept
from atlas.runtime.host import HostBackend
from atlas.runtime.ops import KernelCache
from atlas.runtime.sampler import Sampler

VOCAB = 4
ROWS = 128   # 64 verifications of one draft per launch
CHI2_DF3_P001 = 16.27
CHI2_DF2_P001 = 13.82


def chi2(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = counts.sum() * probs
    return float(((counts - expected) ** 2 / expected).sum())


def test_one_hot_draft_rejection_sampling_preserves_the_distribution():
    backend = HostBackend()
    sampler = Sampler(backend, KernelCache(backend), ROWS, 1, VOCAB)
    params = SamplingParams(temperature=1.0, seed=1234)
    sampler.assign(0, [], params)
    logits = np.array([[0.3, 1.1, -0.4, 0.6], [1.0, -0.5, 0.2, 0.1]], np.float32)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    draft = 1   # the most likely token: acceptance about 0.42
    buf = backend.alloc(4 * ROWS * VOCAB)
    first = np.zeros(VOCAB)
    residual = np.zeros(VOCAB)
    after_accept = np.zeros(VOCAB)
    accepted = trials = 0
    for launch in range(48):
        steps = [2 * (launch * ROWS // 2 + t) + i for t in range(ROWS // 2) for i in (0, 1)]
        sampler.prepare([0] * ROWS, [params] * ROWS, steps)
        backend.copy_h2d(buf, np.tile(logits, (ROWS // 2, 1)))   # penalties edit in place
        sampler.enqueue(0, buf, ROWS)
        out = backend.download(sampler.out_ids, np.int32, ROWS).reshape(-1, 2)
        for pair in out:
            emitted = accept([draft], [int(pair[0]), int(pair[1])])
            trials += 1
            first[emitted[0]] += 1
            if len(emitted) == 2:
                accepted += 1
                after_accept[emitted[1]] += 1
            else:
                residual[emitted[0]] += 1
    assert chi2(first, p[0]) < CHI2_DF3_P001
    rate, sd = accepted / trials, np.sqrt(p[0, draft] * (1 - p[0, draft]) / trials)
    assert abs(rate - p[0, draft]) < 4 * sd
    rest = np.delete(p[0], draft) / (1 - p[0, draft])
    assert residual[draft] == 0 and chi2(np.delete(residual, draft), rest) < CHI2_DF2_P001
    assert chi2(after_accept, p[1]) < CHI2_DF3_P001
