"""GrammarCompiler: one per vocabulary; compiles and caches grammars (LRU).

The cache key is (kind, canonical source text, options, vocabulary fingerprint), so two
requests with the same schema share one CompiledGrammar — its position masks, its state
table and its memoized masks — and a different tokenizer never sees another's entries.

Position masks are computed at compile time for grammars of up to `precompute_limit`
byte-class positions. Larger ones (long bounded repetitions: ``maxLength: 500`` unrolls into
500 positions, most never visited by one output) compute each position's mask on first use
and keep it, so compiling stays in milliseconds and the cost moves to first visits.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Callable

from .compiled import CompiledGrammar
from .ebnf import parse_ebnf
from .errors import GrammarError
from .ir import Grammar
from .json_schema import json_object_grammar, json_schema_grammar
from .pda import compile_automaton
from .regex import parse_regex
from .token_trie import TokenTrie
from .vocab import Vocabulary


class GrammarCompiler:
    def __init__(self, vocab: Vocabulary, cache_size: int = 32, precompute_limit: int = 600,
                 max_whitespace: int | None = None) -> None:
        self.vocab = vocab
        self.trie = TokenTrie(vocab)
        self.precompute_limit = precompute_limit
        self.max_whitespace = max_whitespace
        self._cache: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _cached(self, key: tuple, build: Callable[[], Grammar]) -> CompiledGrammar:
        key = key + (self.max_whitespace, self.vocab.fingerprint)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return found
        automaton = compile_automaton(build())
        eager = len(automaton.char_positions) <= self.precompute_limit
        compiled = CompiledGrammar(automaton, self.vocab, self.trie, precompute=eager)
        with self._lock:
            self.misses += 1
            self._cache[key] = compiled
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return compiled

    def compile_json_schema(self, schema: Any, strict: bool = True) -> CompiledGrammar:
        """`schema`: parsed JSON Schema (dict/bool) or its JSON text. `strict`: absent
        additionalProperties means false (OpenAI strict); False: JSON Schema's true."""
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as err:
                raise GrammarError(f"the JSON schema is not valid JSON: {err}") from None
        text = json.dumps(schema, sort_keys=False, separators=(",", ":"))
        return self._cached(("json_schema", text, strict),
                            lambda: json_schema_grammar(schema, self.max_whitespace, strict))

    def compile_json_object(self) -> CompiledGrammar:
        return self._cached(("json_object",), lambda: json_object_grammar(self.max_whitespace))

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        def build() -> Grammar:
            grammar = Grammar()
            grammar.add("root", parse_regex(pattern))
            return grammar
        return self._cached(("regex", pattern), build)

    def compile_ebnf(self, text: str, root: str = "root") -> CompiledGrammar:
        return self._cached(("ebnf", text, root), lambda: parse_ebnf(text, root))

    def compile_grammar(self, grammar: Grammar, key: str) -> CompiledGrammar:
        """An IR grammar built by the caller (e.g. a tool-call format); `key` names it in
        the cache and must change whenever the grammar does."""
        return self._cached(("ir", key), lambda: grammar)
