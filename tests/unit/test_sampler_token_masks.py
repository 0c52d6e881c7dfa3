"""Grammar masks in the sampler (host backend): masked tokens are never drawn, whatever the
filters and penalties; unconstrained rows are untouched; the mask launch comes first and is
capturable; and a grammar matcher writing its masks straight into the sampler's pinned rows
drives random-logit sampling at temperature 1 to valid JSON."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.grammar import GrammarMatcher
from atlas.runtime.host import HostBackend
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, sampling
from atlas.runtime.sampler import Sampler
from tests.unit.grammar_support import load_schema, smollm2_compiler

VOCAB = 100


def _mask_row(allowed: list[int], words: int) -> np.ndarray:
    bits = np.zeros(words * 32, dtype=bool)
    bits[allowed] = True
    return np.packbits(bits, bitorder="little").view(np.uint32)


def _sample(sampler: Sampler, backend: HostBackend, logits: np.ndarray,
            params: list[SamplingParams], step: int) -> list[int]:
    ptr = backend.upload(np.ascontiguousarray(logits, dtype=np.float32))
    sampler.prepare(list(range(len(params))), params, [step] * len(params))
    sampler.enqueue(0, ptr, len(params))
    out = backend.download(sampler.out_ids, np.int32, len(params)).tolist()
    backend.free(ptr)
    return out


def test_masked_tokens_are_never_sampled() -> None:
    backend = HostBackend()
    sampler = Sampler(backend, KernelCache(backend), 4, 4, VOCAB, seed=1, token_masks=True)
    allowed = {0: [3, 17, 64], 2: [99], 3: list(range(50, 60))}
    params = [SamplingParams(temperature=1.5, seed=1),
              SamplingParams(temperature=1.0, seed=2),
              SamplingParams(temperature=0.7, top_k=5, top_p=0.9, seed=3),
              SamplingParams(temperature=1.0, repetition_penalty=0.5, presence_penalty=-2.0,
                             seed=4)]
    for slot, p in enumerate(params):
        sampler.assign(slot, list(range(VOCAB)), p)          # penalties reach every token
    for row, ids in allowed.items():
        sampler.host_bitmask[row] = _mask_row(ids, sampler.mask_words)
    sampler.upload_token_masks([True, False, True, True])
    rng = np.random.default_rng(0)
    seen_free = set()
    for step in range(40):
        logits = (rng.standard_normal((4, VOCAB)) * 4).astype(np.float32)
        logits[3, 0] = 50.0                                   # the favourite is masked
        got = _sample(sampler, backend, logits, params, step)
        for row, ids in allowed.items():
            assert got[row] in ids
        seen_free.add(got[1])
    assert len(seen_free) > 10                                # the free row is not masked


def test_greedy_takes_the_best_allowed_token() -> None:
    backend = HostBackend()
    sampler = Sampler(backend, KernelCache(backend), 2, 2, VOCAB, token_masks=True)
    logits = np.arange(2 * VOCAB, dtype=np.float32).reshape(2, VOCAB)
    sampler.host_bitmask[0] = _mask_row([5, 40, 7], sampler.mask_words)
    sampler.upload_token_masks([True])
    assert _sample(sampler, backend, logits, [GREEDY, GREEDY], 0) == [40, VOCAB - 1]
    sampler.upload_token_masks([])                            # no masks this step
    assert _sample(sampler, backend, logits, [GREEDY, GREEDY], 1) == [VOCAB - 1, VOCAB - 1]


def test_mask_launch_comes_first_and_masks_need_the_option() -> None:
    mock = MockGpuBackend()
    sampler = Sampler(mock, KernelCache(mock), 4, 5, 1000, token_masks=True)
    mock.drain_launches()
    sampler.enqueue(0, 1 << 30, 3)
    recs = mock.drain_launches()
    assert [r.func for r in recs] == ["apply_token_bitmask_f32", "apply_penalties_f32",
                                      "sample_f32"]
    assert recs[0].args["bitmask"] == sampler.token_bitmask
    assert recs[0].args["mask_rows"] == sampler.mask_rows
    assert (recs[0].args["words"], recs[0].grid) == (32, (1, 3, 1))
    # launches the caller knows to be unmasked (the runner's full decode graphs) leave it out
    sampler.enqueue(0, 1 << 30, 3, masked=False)
    assert [r.func for r in mock.drain_launches()] == ["apply_penalties_f32", "sample_f32"]
    # a block covers 8,192 tokens of a row: an unmasked row (the common case, and the decode
    # graph runs the launch every step) costs 19 blocks at Qwen3's vocabulary, not 594
    sampling.apply_token_bitmask(KernelCache(mock), 0, 1 << 30, 1 << 29, 1 << 28, 64, 151936,
                                 sampling.bitmask_words(151936))
    (rec,) = mock.drain_launches()
    assert rec.grid == (19, 64, 1) and rec.block == (256, 1, 1)
    plain = Sampler(mock, KernelCache(mock), 1, 1, 1000)
    with pytest.raises(ValueError, match="token_masks=True"):
        plain.upload_token_masks([True])
    with pytest.raises(ValueError, match="max_batch"):
        sampler.upload_token_masks([True] * 5)


def test_grammar_masks_drive_random_logits_to_valid_json() -> None:
    """The whole path on the CPU: matcher -> pinned mask row -> mask kernel -> sampler at
    temperature 1 over random logits (garbage without the grammar)."""
    grammar = smollm2_compiler().compile_json_schema(load_schema("weather_call"))
    vocab = grammar.vocab.size
    backend = HostBackend()
    sampler = Sampler(backend, KernelCache(backend), 1, 1, vocab, token_masks=True)
    schema = load_schema("weather_call")
    rng = np.random.default_rng(5)
    quote = grammar.vocab.token_bytes.index(b'"')
    for seed in range(2):
        params = SamplingParams(temperature=1.0, seed=seed)
        sampler.assign(0, [], params)
        matcher = GrammarMatcher(grammar)
        out = []
        for step in range(400):
            if matcher.is_terminated():
                break
            matcher.fill_next_token_bitmask(sampler.host_bitmask, 0)
            sampler.upload_token_masks([True])
            logits = (rng.standard_normal((1, vocab)) * 2).astype(np.float32)
            for eos in grammar.vocab.eos_token_ids:      # make ending likely once allowed
                logits[0, eos] = 30.0
            logits[0, quote] = 9.0                         # and strings short
            (token,) = _sample(sampler, backend, logits, [params], step)
            assert matcher.accept_token(token)
            if token not in grammar.vocab.eos_token_ids:
                out.append(grammar.vocab.token_bytes[token])
        assert matcher.is_terminated()
        jsonschema.validate(json.loads(b"".join(out)), schema)
