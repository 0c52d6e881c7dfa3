"""Logprobs in the sampler (host backend): the sampled token's log-probability and the top-n
alternatives equal a float64 log-softmax of the logits, per row as asked; grammar-masked
tokens get none of the mass; the launch order and the option's errors."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.runtime.host import HostBackend
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache
from atlas.runtime.sampler import Sampler

VOCAB = 300


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    shifted = x - x.max()
    return shifted - np.log(np.exp(shifted).sum())


def _run(sampler: Sampler, backend: HostBackend, logits: np.ndarray,
         params: list[SamplingParams], top_n: list[int]) -> list[int]:
    ptr = backend.upload(np.ascontiguousarray(logits, dtype=np.float32))
    sampler.prepare(list(range(len(params))), params, [0] * len(params))
    sampler.prepare_logprobs(top_n)
    sampler.enqueue(0, ptr, len(params))
    backend.free(ptr)
    return backend.download(sampler.out_ids, np.int32, len(params)).tolist()


def test_logprobs_equal_the_log_softmax_of_the_logits() -> None:
    backend = HostBackend()
    sampler = Sampler(backend, KernelCache(backend), 4, 4, VOCAB, max_logprobs=5)
    params = [SamplingParams(temperature=1.0, seed=1), GREEDY,
              SamplingParams(temperature=0.5, top_k=10, seed=2), SamplingParams(seed=3)]
    for slot, p in enumerate(params):
        sampler.assign(slot, [], p)
    logits = (np.random.default_rng(0).standard_normal((4, VOCAB)) * 3).astype(np.float32)
    tokens = _run(sampler, backend, logits, params, [5, 0, 3, -1])
    sampled, ids, lps = sampler.read_logprobs(4)
    for r, n in enumerate([5, 0, 3]):
        reference = _log_softmax(logits[r])
        assert sampled[r] == pytest.approx(reference[tokens[r]], abs=1e-5)
        best = np.argsort(-reference, kind="stable")[:n]
        assert ids[r, :n].tolist() == best.tolist()
        np.testing.assert_allclose(lps[r, :n], reference[best], atol=1e-5)
    assert tokens[1] == int(logits[1].argmax()) and sampled[1] == pytest.approx(
        _log_softmax(logits[1]).max(), abs=1e-5)


def test_masked_tokens_carry_no_probability() -> None:
    backend = HostBackend()
    sampler = Sampler(backend, KernelCache(backend), 1, 1, 64, token_masks=True,
                      max_logprobs=4)
    sampler.assign(0, [], SamplingParams(seed=9))
    allowed = [2, 30, 31]
    bits = np.zeros(sampler.mask_words * 32, dtype=bool)
    bits[allowed] = True
    sampler.host_bitmask[0] = np.packbits(bits, bitorder="little").view(np.uint32)
    sampler.upload_token_masks([True])
    logits = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    (token,) = _run(sampler, backend, logits, [SamplingParams(seed=9)], [4])
    sampled, ids, lps = sampler.read_logprobs(1)
    reference = _log_softmax(logits[0, allowed])
    assert token in allowed
    assert sampled[0] == pytest.approx(reference[allowed.index(token)], abs=1e-5)
    order = np.argsort(-reference, kind="stable")
    assert ids[0, :3].tolist() == [allowed[i] for i in order]
    np.testing.assert_allclose(lps[0, :3], reference[order], atol=1e-5)
    assert lps[0, 3] == -np.inf                       # a fourth: only masked tokens remain


def test_logprobs_come_from_the_sampling_launch_and_the_option_is_checked() -> None:
    mock = MockGpuBackend()
    sampler = Sampler(mock, KernelCache(mock), 4, 5, 1000, max_logprobs=3)
    mock.drain_launches()
    sampler.enqueue(0, 1 << 30, 2)
    recs = mock.drain_launches()
    # the sampling launch's finishing blocks report them: no launch of their own
    assert [r.func for r in recs] == ["apply_penalties_f32", "sample_f32"]
    assert recs[1].args["top_n"] == sampler.top_n and recs[1].args["max_top"] == 3
    assert recs[1].args["out_logprob"] == sampler.out_logprob
    plain = Sampler(mock, KernelCache(mock), 4, 5, 1000)
    mock.drain_launches()
    plain.enqueue(0, 1 << 30, 2)
    assert mock.drain_launches()[1].args["top_n"] == 0  # no logprobs: none asked of it
    with pytest.raises(ValueError, match="max_logprobs=3"):
        sampler.prepare_logprobs([4])
    with pytest.raises(ValueError, match="max_logprobs=K"):
        Sampler(mock, KernelCache(mock), 1, 1, 10).prepare_logprobs([1])
