"""Speculative decoding must not change a token (host backend, real models).

Verification runs a sequence's last token and its drafts as decode rows (each attending to
its own position) in the captured graph of their row count, and samples every position;
acceptance keeps drafts while they equal the samples. Greedy output is therefore the plain
output, and so is a seeded sampled one (each position draws at the RNG position plain
decoding would use).
"""

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.engine.speculative import NgramDrafter, OracleDrafter, Speculator
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"


def generate(runner, reqs, speculator=None):
    engine = LLMEngine(runner, max_prefill_tokens=64, speculator=speculator)
    out = [c.token_ids for c in engine.generate(reqs)]
    blocks = engine.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks
    return out


@pytest.fixture(scope="module")
def tiny():
    return load_runner(FIXTURE, backend="host", max_seq_len=96, max_batch_size=3,
                       max_prefill_tokens=64, num_draft_tokens=4)


@pytest.mark.parametrize("sampling", [GREEDY, SamplingParams(temperature=1.0, seed=11)])
def test_tiny_oracle_speculation_changes_no_token(tiny, sampling):
    reqs = [EngineRequest(p, sampling, 16) for p in
            ([5, 9, 200, 17, 5, 9, 200, 17], [44, 45, 46], [300, 2, 2, 2, 2, 2, 9])]
    plain = generate(tiny, reqs)
    spec = Speculator(OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)},
                                    0.7, tiny.vocab_size, seed=5), 3)
    assert generate(tiny, reqs, spec) == plain
    assert 0 < spec.accepted < spec.drafted


def test_verification_steps_replay_the_row_count_graphs(tiny, monkeypatch):
    """Three sequences with 3 drafts each are a 12-row decode step: a captured verification
    graph runs it, never the eager prefill path; every row count up to the row-invariant
    bound has a graph of its own (no padding into the batched routes)."""
    assert max(tiny.buckets) == 3 and max(tiny.verify_graphs) == 3 * (4 + 1)
    assert tiny.invariant_rows == 8 and set(range(2, 9)) <= set(tiny.verify_graphs)
    bucket_of = {id(g): rows for rows, g in tiny.verify_graphs.items()}
    replayed: list[int] = []
    launch = tiny.backend.launch_graph
    monkeypatch.setattr(tiny.backend, "launch_graph",
                        lambda g, s: (replayed.append(bucket_of.get(id(g), 0)), launch(g, s))[1])
    forward = tiny.model.forward
    eager: list[int] = []
    monkeypatch.setattr(tiny.model, "forward",
                        lambda s, b, n, plan, n_sample: (eager.append(n),
                                                         forward(s, b, n, plan, n_sample))[1])
    reqs = [EngineRequest(p, GREEDY, 12) for p in ([7, 8, 9], [10, 11], [12, 13, 14, 15])]
    plain = generate(tiny, reqs)
    spec = Speculator(OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)},
                                    1.0, tiny.vocab_size), 3)
    eager.clear()
    replayed.clear()
    assert generate(tiny, reqs, spec) == plain
    assert spec.accepted == spec.drafted > 0
    # one eager prefill step, then 11 tokens in 3 verifications (4 + 4 + 3) of 12 rows,
    # each in the 15-row graph (the bucket above the exact range 2..8)
    assert len(eager) == 1 and replayed == [15, 15, 15]


def test_verification_rows_equal_decode_steps_bit_for_bit(tiny):
    """Row i of a verification step (beside another sequence's decode row) yields exactly
    the logits of the plain decode step at its position: the row invariance that makes the
    oracle benchmark's acceptance exact (on the GPU the same holds up to
    runner.invariant_rows rows; tools/gpu/check_kernels.py asserts the kernels' part)."""
    prompt, other = [5, 9, 200, 17, 5], [44, 45, 46]
    first = tiny.execute([SeqChunk(1, prompt, 0, [0], GREEDY, history=PenaltyHistory(prompt))])
    tokens, plain_logits = [first[0]], []
    for i in range(3):   # plain decode steps at positions 5, 6, 7
        tokens.append(tiny.execute([SeqChunk(1, [tokens[-1]], 5 + i, [0], GREEDY,
                                             rng_position=i + 1)])[0])
        plain_logits.append(tiny.read_logits(1)[0])
    tiny.release(1)
    tiny.execute([SeqChunk(2, prompt, 0, [1], GREEDY, history=PenaltyHistory(prompt)),
                  SeqChunk(3, other, 0, [2], GREEDY, history=PenaltyHistory(other))])
    got = tiny.execute([SeqChunk(2, tokens[:3], 5, [1], GREEDY, rng_position=1, num_draft=2),
                        SeqChunk(3, [7], 3, [2], GREEDY, rng_position=1)])
    verified = tiny.read_logits(3)
    for rid in (2, 3):
        tiny.release(rid)
    assert got[0] == tuple(tokens[1:4])
    for row, want in zip(verified, plain_logits):
        assert np.array_equal(row.view(np.uint32), want.view(np.uint32))


def test_moe_verification_in_row_count_graphs_changes_no_token():
    """A mixture-of-experts model's verification rows route through the expert kernels
    at the graph's row count (12 rows for 3 sequences x 4), not the decode batch's."""
    moe = load_runner(FIXTURE.parent / "tiny-qwen3-moe", backend="host", max_seq_len=64,
                      max_batch_size=3, max_prefill_tokens=64, num_draft_tokens=3)
    reqs = [EngineRequest(p, GREEDY, 10) for p in ([7, 8, 9], [10, 11], [12, 13, 14, 15])]
    plain = generate(moe, reqs)
    spec = Speculator(OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)},
                                    0.6, moe.vocab_size, seed=2), 3)
    assert generate(moe, reqs, spec) == plain
    assert 0 < spec.accepted < spec.drafted and max(moe.verify_graphs) == 12
    assert moe.invariant_rows == 0   # expert kernels route by row count: no exactness claim


def test_tiny_ngram_speculation_changes_no_token(tiny):
    reqs = [EngineRequest([5, 9, 200, 17, 5, 9, 200, 17, 5, 9], GREEDY, 20),
            EngineRequest([44, 45, 46], GREEDY, 20)]   # both outputs fall into loops
    spec = Speculator(NgramDrafter(), 4)
    assert generate(tiny, reqs, spec) == generate(tiny, reqs)
    assert spec.accepted > 0


def test_default_model_ngram_greedy_is_unchanged(default_model_dir):
    from atlas.server.app_assets import load_assets

    tok = load_assets(default_model_dir).tokenizer
    text = tok.chat_template(False).render([{"role": "user", "content": (
        "Repeat this list exactly: red, green, blue, red, green, blue, red, green, blue.")}])
    reqs = [EngineRequest(tok.encode(text), GREEDY, 20)]
    # the verify forward rounds differently from decode steps: these sizes give a greedy
    # run with no exact bf16 tie (max_seq_len=96 meets one at token 3: 18.5 vs 18.5)
    runner = load_runner(default_model_dir, backend="host", max_seq_len=160,
                         max_batch_size=1, max_prefill_tokens=64, num_draft_tokens=3)
    spec = Speculator(NgramDrafter(), 3)
    assert generate(runner, reqs, spec) == generate(runner, reqs)
    assert spec.accepted > 0


@pytest.mark.parametrize("name", ["tiny-mistral-swa", "tiny-gemma3", "tiny-phi3-d96"])
def test_ngram_speculation_past_the_window_keeps_transformers_tokens(name):
    """A model whose windows bind (or whose heads are padded: tiny-phi3-d96 both) verifies
    drafts as one-row-a-sequence decode rows on the long kernel (no verification kernel, no
    row-invariant bound): n-gram drafts past the window, accepted or not, leave transformers'
    16 greedy tokens as they are."""
    model = FIXTURE.parent / name
    golden = dict(np.load(model / "golden.npz"))
    runner = load_runner(model, backend="host", max_seq_len=96, max_batch_size=2,
                         max_prefill_tokens=64, num_draft_tokens=3)
    assert runner.invariant_rows == 0 and not runner.verify_kernel
    want = golden["greedy"].tolist()
    prompt = golden["input_ids"].tolist()
    spec = Speculator(NgramDrafter(), 3)
    (got,) = generate(runner, [EngineRequest(prompt, GREEDY, len(want))], spec)
    assert got == want and spec.drafted > 0
