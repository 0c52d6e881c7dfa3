"""What scoring a prompt costs on the device, recorded by MockGpuBackend: the scoring rows get
LM-head rows after the sampled one and a `logprobs_f32` launch over them, with their
tokens uploaded; a step that scores nothing launches and copies exactly what it did before."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, PromptScoring, SeqChunk, WithPromptLogprobs
from atlas.model.load import load_runner

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"


@pytest.fixture(scope="module")
def runner():
    return load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=16,
                       max_prefill_tokens=32)


def _prefill(runner, seq_id: int, scoring: PromptScoring | None):
    """Run a 12-token prompt chunk that samples; (launches, h2d copies, its result)."""
    dev = runner.backend
    dev.drain_launches()
    copies = dev.op_counts["copy_h2d"]
    ids = list(range(1, 13))
    (got,) = runner.execute([SeqChunk(seq_id, ids, 0, [1], GREEDY, history=PenaltyHistory(ids),
                                      prompt_logprobs=scoring)])
    runner.release(seq_id)
    return dev.drain_launches(), dev.op_counts["copy_h2d"] - copies, got


def test_scoring_rows_add_a_logprobs_launch_and_one_upload(runner):
    plain, plain_copies, plain_got = _prefill(runner, 30, None)
    scoring = PromptScoring(first=2, targets=tuple(range(4, 13)), top_n=3)
    scored, scored_copies, got = _prefill(runner, 31, scoring)
    # the plain step: the sampling launch reports its row's logprobs, no launch of their own
    assert [r.func for r in plain if r.func == "logprobs_f32"] == []
    assert [r.args["top_n"] for r in plain if r.func == "sample_f32"] == [runner.sampler.top_n]
    assert isinstance(plain_got, int)
    # rows 2..10 score tokens 4..12: the LM head covers them after the sampled row, the
    # sampler's launches still cover the one sampled row, and one launch scores the rest
    lm_head = [r for r in scored if "bf16_f32" in r.func and "m" in r.args
               and r.func.startswith(("gemv", "gemm"))]
    assert [r.args["m"] for r in lm_head] == [1 + 9]
    logprobs = [r for r in scored if r.func == "logprobs_f32"]
    assert [r.args["rows"] for r in logprobs] == [9]
    sampler, vocab = runner.sampler, runner.vocab_size
    assert logprobs[0].args["logits"] == runner.bufs.logits + 4 * vocab
    assert logprobs[0].args["tokens"] == sampler.scored_tokens
    assert logprobs[0].args["top_n"] == sampler.top_n + 4
    assert [r.args["rows"] for r in scored if r.func == "sample_f32"] == [1]
    # the top-n rows and the scored tokens, beside the step's one input upload
    assert scored_copies == plain_copies + 2
    assert isinstance(got, WithPromptLogprobs) and isinstance(got.result, int)
    assert [t.token for t in got.prompt] == list(range(4, 13))
    assert all(len(t.top) == 3 for t in got.prompt)


def test_a_chunk_that_does_not_sample_may_still_score(runner):
    ids = list(range(1, 9))
    dev = runner.backend
    dev.drain_launches()
    (got,) = runner.execute([SeqChunk(32, ids, 0, [1], GREEDY, sample=False,
                                      history=PenaltyHistory(ids),
                                      prompt_logprobs=PromptScoring(0, tuple(range(2, 10)), 0))])
    runner.release(32)
    launches = dev.drain_launches()
    assert [r.args["rows"] for r in launches if r.func == "logprobs_f32"] == [8]
    assert not [r for r in launches if r.func == "sample_f32"]
    assert isinstance(got, WithPromptLogprobs) and got.result is None
    assert len(got.prompt) == 8
