"""Finishing within a token budget (atlas.grammar.completion): completion distances are
the shortest complete outputs, and a sampler that picks *uniformly random* allowed tokens
(it never tries to finish) still ends every fixture schema with a valid, complete JSON
document when the mask is told how many tokens are left."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

from atlas.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
from atlas.grammar.completion import FINISH_SLACK
from tests.unit.grammar_support import allowed_ids, load_schema, schema_names

EOS = 0
JSON_PIECES = [b'{"', b'":', b'", "', b'"}', b'": "', b"true", b"false", b"null", b", ",
               b'":{"', b'"],"', b"[[", b"]]", b"\\n", b"\xc3\xa9"]


@pytest.fixture(scope="module")
def compiler() -> GrammarCompiler:
    """Every single byte, JSON-ish pieces and two-letter pieces; 0 is EOS."""
    letters = b"abcdefghijklmnopqrstuvwxyz"
    tokens: list[bytes | None] = [None] + [bytes([b]) for b in range(256)] + JSON_PIECES
    tokens += [bytes([a, b]) for a in letters for b in letters]
    return GrammarCompiler(Vocabulary(tuple(tokens), frozenset([EOS])))


def test_distance_is_the_shortest_complete_output(compiler):
    grammar = compiler.compile_json_schema({
        "type": "object", "properties": {"a": {"type": "integer"},
                                         "b": {"type": "string", "minLength": 3}},
        "required": ["a", "b"], "additionalProperties": False})
    c, state = grammar.completions, grammar.states.initial
    assert c.distance(state) == len('{"a":0,"b":"   "}')
    for byte in b'{"a":12':
        state = grammar.states.step(state, byte)
    assert c.distance(state) == len(',"b":"   "}')


def finish_randomly(grammar, budget: int, seed: int) -> tuple[bytes, int]:
    """Uniformly random allowed tokens under the budget-aware mask until EOS."""
    rng = random.Random(seed)
    matcher = GrammarMatcher(grammar)
    mask = np.zeros(grammar.num_words, dtype=np.uint32)
    out = []
    for used in range(budget):
        matcher.fill_next_token_bitmask(mask, tokens_left=budget - used)
        token = int(rng.choice(allowed_ids(mask, grammar.vocab.size)))
        assert matcher.accept_token(token)
        if token == EOS:
            return b"".join(out), used + 1
        out.append(grammar.vocab.token_bytes[token])
    raise AssertionError(f"no EOS within {budget} tokens: {b''.join(out)[:200]!r}")


@pytest.mark.parametrize("name", schema_names())
def test_random_tokens_finish_every_schema_within_the_budget(compiler, name):
    schema = load_schema(name)
    grammar = compiler.compile_json_schema(schema, strict=True)
    budget = grammar.completions.distance(grammar.states.initial) + 1 + 10
    for seed in range(2):
        text, used = finish_randomly(grammar, budget, seed)
        assert used <= budget
        jsonschema.validate(json.loads(text), schema)


def test_far_from_the_budget_the_mask_is_unchanged(compiler):
    grammar = compiler.compile_json_schema(load_schema("any_json_value"))
    free, bounded = (np.zeros(grammar.num_words, dtype=np.uint32) for _ in range(2))
    GrammarMatcher(grammar).fill_next_token_bitmask(free)
    far = grammar.completions.distance(grammar.states.initial) + 2 + FINISH_SLACK
    GrammarMatcher(grammar).fill_next_token_bitmask(bounded, tokens_left=far)
    assert (free == bounded).all()
    GrammarMatcher(grammar).fill_next_token_bitmask(bounded, tokens_left=2)
    assert 0 < int(np.unpackbits(bounded.view(np.uint8)).sum()) < int(
        np.unpackbits(free.view(np.uint8)).sum())
