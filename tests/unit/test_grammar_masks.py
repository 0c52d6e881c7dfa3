"""Token masks against a brute-force per-token check, and the matcher's contract.

The brute force steps every token's bytes through the automaton's configurations directly
(no trie, no per-position cache, no memoized masks), on small vocabularies cut from the real
SmolLM2 one, at every state along random walks."""

from __future__ import annotations

import random

import numpy as np
import pytest

from atlas.grammar import (GrammarCompiler, GrammarDeadEndError, GrammarError, GrammarMatcher,
                           Vocabulary, bitmask_words)
from atlas.grammar.pda import Automaton, Config
from tests.unit.grammar_support import allowed_ids, load_schema, random_walk, smollm2_compiler

EBNF_LIST = r'''
root  ::= "[" (item ("," " "? item)*)? "]"
item  ::= "\"" [a-c]{1,3} "\"" | number | root
number ::= "-"? [0-9]+ ("." [0-9]+)?
'''


def small_vocabulary(size: int, seed: int) -> Vocabulary:
    """A random slice of SmolLM2's tokens plus every printable ASCII byte, and two EOS
    ids; token ids are re-numbered."""
    full = smollm2_compiler().vocab
    rng = random.Random(seed)
    real = [b for b in full.token_bytes if b]
    chosen = set(rng.sample(real, size)) | {bytes([b]) for b in range(0x20, 0x7F)}
    tokens: list[bytes | None] = [None, None] + sorted(chosen)
    return Vocabulary(tuple(tokens), frozenset({0, 1}))


class BruteForce:
    """Allowed tokens of a configuration by stepping each token's bytes."""

    def __init__(self, automaton: Automaton, vocab: Vocabulary) -> None:
        self.automaton, self.vocab = automaton, vocab
        self._memo: dict[tuple[Config, int], Config] = {}

    def step(self, config: Config, byte: int) -> Config:
        key = (config, byte)
        if key not in self._memo:
            found: Config = frozenset()
            for mask, successor in self.automaton.successors(config):
                if mask >> byte & 1:
                    found = successor
            self._memo[key] = found
        return self._memo[key]

    def allowed(self, config: Config) -> set[int]:
        out = {i for i in self.vocab.eos_token_ids if () in config}
        for token_id, data in enumerate(self.vocab.token_bytes):
            if data is None:
                continue
            current = config
            for byte in data:
                current = self.step(current, byte)
                if not current:
                    break
            if current:
                out.add(token_id)
        return out


def _grammars(compiler: GrammarCompiler):
    yield compiler.compile_json_schema(load_schema("invoice"))
    yield compiler.compile_json_schema(load_schema("expression_tree"))
    yield compiler.compile_json_object()
    yield compiler.compile_regex(r"(\d{3}-)?[A-Z][a-z]+( [A-Z][a-z]+)*|x+y")
    yield compiler.compile_ebnf(EBNF_LIST)


@pytest.mark.parametrize("seed", [0, 1])
def test_masks_equal_brute_force_along_random_walks(seed: int) -> None:
    vocab = small_vocabulary(1500, seed)
    compiler = GrammarCompiler(vocab)
    rng = random.Random(seed)
    for grammar in _grammars(compiler):
        brute = BruteForce(grammar.automaton, vocab)
        matcher = GrammarMatcher(grammar)
        mask = np.zeros(grammar.num_words, dtype=np.uint32)
        checked = 0
        while not matcher.is_terminated() and checked < 60:
            matcher.fill_next_token_bitmask(mask)
            got = set(allowed_ids(mask, vocab.size).tolist())
            assert got == brute.allowed(grammar.states.config(matcher.state))
            eos_allowed = bool(got & vocab.eos_token_ids)
            assert eos_allowed == matcher.can_end()
            pick = sorted(got)
            if checked > 40:               # steer to the end: EOS, else shortest tokens
                pick = sorted(got & vocab.eos_token_ids) or sorted(
                    pick, key=lambda t: len(vocab.token_bytes[t] or b""))[:3]
            assert matcher.accept_token(rng.choice(pick))
            checked += 1


def test_context_independent_tokens_dominate_inside_strings() -> None:
    """XGrammar's premise on a real vocabulary: inside a JSON string almost every token is
    decided by the stack top alone; only tokens leaving the string need the stack."""
    grammar = smollm2_compiler().compile_json_schema({"type": "object", "properties": {
        "a": {"type": "string"}}, "required": ["a"]})
    matcher = GrammarMatcher(grammar)
    for token in (b'{"', b'a', b'":', b' "', b'x'):
        tid = grammar.vocab.token_bytes.index(token)
        assert matcher.accept_token(tid)
    parts = [grammar.position_mask(p) for p in grammar.states.tops(matcher.state)]
    dense = [p for p in parts if p.accepted_words is not None]
    assert len(dense) == 1
    part = dense[0]
    accepted = int(np.unpackbits(part.accepted_words.view(np.uint8)).sum())
    assert accepted > 40_000 and part.num_uncertain < 5_000


def test_eos_only_where_the_grammar_may_end_and_termination() -> None:
    vocab = Vocabulary((None, b"a", b"b", b"ab"), frozenset({0}))
    grammar = GrammarCompiler(vocab).compile_regex("ab?")
    matcher = GrammarMatcher(grammar)
    mask = np.zeros(bitmask_words(vocab.size), dtype=np.uint32)
    matcher.fill_next_token_bitmask(mask)
    assert allowed_ids(mask, vocab.size).tolist() == [1, 3]
    assert not matcher.accept_token(0) and not matcher.accept_token(2)
    assert matcher.accept_token(1)
    matcher.fill_next_token_bitmask(mask)
    assert allowed_ids(mask, vocab.size).tolist() == [0, 2]
    assert matcher.accept_token(0) and matcher.is_terminated()
    assert not matcher.accept_token(2)
    matcher.fill_next_token_bitmask(mask)
    assert not mask.any()


def test_rollback_restores_earlier_states() -> None:
    grammar = smollm2_compiler().compile_json_schema(load_schema("weather_call"))
    vocab = grammar.vocab
    matcher = GrammarMatcher(grammar)
    ids = [vocab.token_bytes.index(t) for t in (b'{"', b"location", b'":', b' "', b"Paris")]
    states = [matcher.state]
    for tid in ids:
        assert matcher.accept_token(tid)
        states.append(matcher.state)
    matcher.rollback(2)
    assert matcher.state == states[3] and matcher.num_accepted == 3
    before = np.zeros(grammar.num_words, dtype=np.uint32)
    matcher.fill_next_token_bitmask(before)
    assert matcher.accept_token(ids[3]) and matcher.state == states[4]
    matcher.rollback(4)
    assert matcher.state == states[0]
    with pytest.raises(GrammarError, match="cannot roll back 1"):
        matcher.rollback(1)


def test_batch_rows_and_bad_buffers() -> None:
    grammar = smollm2_compiler().compile_regex("[0-9]+")
    rows = np.zeros((3, grammar.num_words), dtype=np.uint32)
    GrammarMatcher(grammar).fill_next_token_bitmask(rows, index=1)
    assert not rows[0].any() and rows[1].any() and not rows[2].any()
    with pytest.raises(GrammarError, match="uint32"):
        GrammarMatcher(grammar).fill_next_token_bitmask(np.zeros(grammar.num_words, np.int32))
    with pytest.raises(GrammarError, match="words"):
        GrammarMatcher(grammar).fill_next_token_bitmask(np.zeros(7, np.uint32))


def test_a_grammar_no_token_can_continue_raises_instead_of_hanging() -> None:
    vocab = Vocabulary((None, b"a", b"b"), frozenset({0}))
    grammar = GrammarCompiler(vocab).compile_ebnf('root ::= "a" "c"')
    matcher = GrammarMatcher(grammar)
    mask = np.zeros(grammar.num_words, dtype=np.uint32)
    matcher.fill_next_token_bitmask(mask)
    assert matcher.accept_token(1)
    with pytest.raises(GrammarDeadEndError, match="no token of the vocabulary"):
        matcher.fill_next_token_bitmask(mask)


def test_walks_terminate_on_a_recursive_grammar_with_the_full_vocabulary() -> None:
    grammar = smollm2_compiler().compile_ebnf(EBNF_LIST)
    for seed in range(3):
        text = random_walk(grammar, seed).decode()
        assert text.startswith("[") and text.endswith("]")


def test_matchers_on_several_threads_share_one_grammar() -> None:
    """Four threads walk one fresh CompiledGrammar at once (its tables grow under a lock);
    each thread's masks equal those of a single-threaded walk on a separate compile."""
    import threading

    vocab = small_vocabulary(800, 3)
    shared = GrammarCompiler(vocab).compile_json_schema(load_schema("task_list"))
    alone = GrammarCompiler(vocab).compile_json_schema(load_schema("task_list"))
    results: dict[int, list[bytes]] = {}

    def walk(seed: int, grammar, out: dict[int, list[bytes]]) -> None:
        rng = random.Random(seed)
        matcher = GrammarMatcher(grammar)
        mask = np.zeros(grammar.num_words, dtype=np.uint32)
        seen = []
        for _ in range(80):
            if matcher.is_terminated():
                break
            matcher.fill_next_token_bitmask(mask)
            seen.append(mask.tobytes())
            assert matcher.accept_token(int(rng.choice(allowed_ids(mask, vocab.size))))
        out[seed] = seen

    threads = [threading.Thread(target=walk, args=(seed, shared, results)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected: dict[int, list[bytes]] = {}
    for seed in range(4):
        walk(seed, alone, expected)
    assert results == expected
