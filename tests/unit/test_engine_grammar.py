"""Structured output through the real engine loop: a random-weight model (tests/fixtures/
tiny-qwen3, whose unconstrained output is noise) on the host backend, sampling at
temperature 1 under grammar masks, emits JSON that `jsonschema` accepts; a grammar that
no token can continue ends the request with an error instead of hanging; the reasoning
block stays unconstrained."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from atlas.core.sampling import SamplingParams
from atlas.engine.grammar_state import GrammarRequest
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest, FinishReason
from atlas.grammar import GrammarCompiler, Vocabulary
from tests.unit.grammar_support import load_schema

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
EOS, THINK_OPEN, THINK_CLOSE = 0, 1, 2
PIECES = ['{"', '":', '", "', '"}', '": "', "true", "false", "null", '"', ", ", ": "]


def pieces(vocab_size: int) -> list[str | None]:
    """A 512-token text vocabulary for the fixture: printable ASCII, JSON-ish pieces, then
    two-letter pieces; 0 is EOS and 1/2 stand for the think markers."""
    out: list[str | None] = [None, None, None] + [chr(c) for c in range(32, 127)] + PIECES
    letters = "abcdefghijklmnopqrstuvwxyz"
    out += [a + b for a in letters for b in letters][:vocab_size - len(out)]
    return out


@pytest.fixture(scope="module")
def engine():
    from atlas.model.load import load_runner
    runner = load_runner(FIXTURE, backend="host", max_seq_len=256, max_batch_size=4,
                         max_prefill_tokens=64, use_graphs=False)
    return LLMEngine(runner, max_prefill_tokens=64)


@pytest.fixture(scope="module")
def compiler(engine):
    vocab = Vocabulary.from_pieces(pieces(engine.core.executor.vocab_size), "raw", [EOS],
                                   special_ids=[THINK_OPEN, THINK_CLOSE])
    return GrammarCompiler(vocab)


def text_of(compiler: GrammarCompiler, ids: list[int]) -> str:
    tb = compiler.vocab.token_bytes
    return b"".join(tb[t] for t in ids if t not in (EOS,)).decode()


def request(grammar, seed: int, prompt: tuple[int, ...] = (5, 6, 7, 8)) -> EngineRequest:
    return EngineRequest(list(prompt), SamplingParams(temperature=1.0, seed=seed), 160,
                         frozenset([EOS]), grammar=GrammarRequest(grammar))


def test_random_weights_follow_json_schemas_at_temperature_one(engine, compiler):
    names = ["weather_call", "sentiment", "geo_point"]
    reqs, schemas = [], []
    for i, name in enumerate(names):
        schema = load_schema(name)
        reqs += [request(compiler.compile_json_schema(schema), seed=10 * i + k)
                 for k in range(2)]
        schemas += [schema, schema]
    results = engine.generate(reqs)
    for res, schema in zip(results, schemas, strict=True):
        assert res.finish_reason == FinishReason.STOP, res
        assert res.token_ids[-1] == EOS
        jsonschema.validate(json.loads(text_of(compiler, res.token_ids)), schema)


def test_unconstrained_noise_is_not_json(engine, compiler):
    (res,) = engine.generate([EngineRequest([5, 6, 7, 8], SamplingParams(temperature=1.0,
                                                                         seed=3), 40)])
    with pytest.raises(ValueError):
        json.loads(text_of(compiler, res.token_ids))


def test_a_dead_end_ends_the_request_with_an_error(engine, compiler):
    grammar = compiler.compile_regex("ab\u00e9")   # no token spells the bytes of é
    (res,) = engine.generate([request(grammar, seed=1)])
    assert res.finish_reason == FinishReason.ERROR
    assert text_of(compiler, res.token_ids) in ("", "a", "ab")


def test_the_reasoning_block_is_unconstrained(engine, compiler):
    grammar = compiler.compile_regex("yes|no")
    (res,) = engine.generate([EngineRequest(
        [5, 6], SamplingParams(temperature=1.0, seed=4), 60, frozenset([EOS]),
        grammar=GrammarRequest(grammar, think_close_id=THINK_CLOSE, think_open_id=THINK_OPEN,
                               starts_inside_thinking=True))])
    ids = res.token_ids
    assert THINK_CLOSE in ids or res.finish_reason == FinishReason.LENGTH
    if THINK_CLOSE in ids:
        assert text_of(compiler, ids[ids.index(THINK_CLOSE) + 1:]) in ("yes", "no")
    # noise while thinking: not every thinking token is one the grammar allows first
    thinking = ids[:ids.index(THINK_CLOSE)] if THINK_CLOSE in ids else ids
    assert len(thinking) > 0 and not np.all([t in (121, 110) for t in thinking])


def test_the_model_may_open_its_reasoning_block_first(compiler):
    from atlas.engine.grammar_state import GrammarState
    state = GrammarState(GrammarRequest(compiler.compile_regex("yes|no"),
                                        think_close_id=THINK_CLOSE, think_open_id=THINK_OPEN))
    mask = np.zeros((1, state.request.grammar.num_words), dtype=np.uint32)

    def allowed() -> set[int]:
        state.fill_mask(mask, 0)
        bits = np.unpackbits(mask[0].view(np.uint8), bitorder="little")
        return set(np.flatnonzero(bits).tolist())

    yes_no = {i for i, b in enumerate(compiler.vocab.token_bytes)
              if b and (b"yes".startswith(b) or b"no".startswith(b))}
    assert allowed() == yes_no | {THINK_OPEN}
    state.observe(THINK_OPEN)
    assert not state.constrains_next
    state.observe(40)               # anything while thinking
    state.observe(THINK_CLOSE)
    assert state.constrains_next and allowed() == yes_no   # no second reasoning block
    state.observe(compiler.vocab.token_bytes.index(b"n"))
    state.observe(compiler.vocab.token_bytes.index(b"y"))   # "ny": not in the grammar
    assert state.error is not None and "does not continue the grammar" in state.error


def test_grammar_state_survives_preemption(engine, compiler):
    """Four constrained requests in a KV cache too small for them: preempted sequences
    are recomputed and continue exactly as when each ran alone."""
    from atlas.model.load import load_runner
    grammar = compiler.compile_json_schema(load_schema("geo_point"))
    reqs = [request(grammar, seed=s, prompt=tuple(range(5 + s, 45 + s))) for s in range(4)]
    alone = [engine.generate([r])[0].token_ids for r in reqs]
    runner = load_runner(FIXTURE, backend="host", max_seq_len=128, max_batch_size=4,
                         max_prefill_tokens=64, use_graphs=False, max_num_blocks=8)
    tight = LLMEngine(runner, max_prefill_tokens=64)
    results = tight.generate(reqs)
    assert tight.core.scheduler.num_preemptions > 0
    assert [r.token_ids for r in results] == alone
    for res in results:
        jsonschema.validate(json.loads(text_of(compiler, res.token_ids)),
                            load_schema("geo_point"))
