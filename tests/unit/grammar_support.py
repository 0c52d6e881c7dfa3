"""Shared pieces of the grammar tests: real vocabularies (built once per process), a random
walk that samples allowed tokens until the matcher terminates, and a byte-level oracle.

The walk explores with uniformly random allowed tokens for a while, then finishes: it
takes EOS when allowed, else the single-byte token that starts a shortest completion of
the grammar (so loops and recursion end), else a random allowed token. Every step checks that the sampled token is
accepted, so a mask that allows a token the matcher then refuses fails the walk.
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import numpy as np

from atlas.grammar import CompiledGrammar, GrammarCompiler, GrammarMatcher, Vocabulary
from atlas.grammar.state_table import DEAD

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "json_schemas"


def _vocabulary(tokenizer_path: Path, eos_names: tuple[str, ...],
                vocab_size: int | None = None) -> Vocabulary:
    data = json.loads(tokenizer_path.read_text(encoding="utf-8"))
    eos = [t["id"] for t in data["added_tokens"] if t["content"] in eos_names]
    return Vocabulary.from_tokenizer_json(data, eos, vocab_size=vocab_size)


@functools.lru_cache(maxsize=1)
def smollm2_compiler() -> GrammarCompiler:
    """SmolLM2's byte-level BPE vocabulary (49,152 tokens), from the imported default
    model."""
    from atlas.runtime.model_paths import ensure_default_model
    path = ensure_default_model() / "tokenizer.json"
    return GrammarCompiler(_vocabulary(path, ("<|im_end|>", "<|endoftext|>")))


@functools.lru_cache(maxsize=1)
def qwen3_compiler() -> GrammarCompiler:
    """The real Qwen3 vocabulary: 151,669 tokens padded to the model's 151,936 rows."""
    from atlas.runtime.tokenizer_assets import (QWEN3_EOS_TOKENS, QWEN3_VOCAB_ROWS,
                                                qwen3_tokenizer_json)
    return GrammarCompiler(_vocabulary(qwen3_tokenizer_json(), QWEN3_EOS_TOKENS,
                                       QWEN3_VOCAB_ROWS))


def schema_names() -> list[str]:
    return sorted(p.stem for p in SCHEMA_DIR.glob("*.json"))


def load_schema(name: str) -> object:
    return json.loads((SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8"))


def allowed_ids(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:vocab_size])


@functools.lru_cache(maxsize=4)
def _single_byte_tokens(vocab: Vocabulary) -> dict[int, int]:
    return {data[0]: i for i, data in enumerate(vocab.token_bytes)
            if data is not None and len(data) == 1}


def shortest_completion_byte(grammar: CompiledGrammar, state: int) -> int | None:
    """The first byte of a shortest byte string that completes the grammar from `state`
    (breadth-first over the state table); None when `state` already accepts."""
    table = grammar.states
    frontier = [(state, -1)]
    seen = {state}
    every_byte = np.arange(256, dtype=np.int32)
    while frontier:
        following = []
        for current, first in frontier:
            if table.accepting[current]:
                return None if first < 0 else first
            successors = table.step_many(np.full(256, current, dtype=np.int32), every_byte)
            for byte in np.flatnonzero(successors != DEAD).tolist():
                nxt = int(successors[byte])
                if nxt not in seen:
                    seen.add(nxt)
                    following.append((nxt, byte if first < 0 else first))
        frontier = following
    raise AssertionError("no completion: the grammar has a dead state")


def _finishing_choice(grammar: CompiledGrammar, state: int, allowed: np.ndarray,
                      rng: random.Random) -> int:
    allowed_set = set(allowed.tolist())
    eos = sorted(allowed_set & grammar.vocab.eos_token_ids)
    if eos:
        return eos[0]
    byte = shortest_completion_byte(grammar, state)
    token = _single_byte_tokens(grammar.vocab).get(byte) if byte is not None else None
    return token if token in allowed_set else int(rng.choice(allowed))


def random_walk(grammar: CompiledGrammar, seed: int, explore: int | None = None,
                max_steps: int = 3000) -> bytes:
    """Sample allowed tokens until EOS is accepted; the text generated (bytes)."""
    rng = random.Random(seed)
    explore = rng.randint(3, 60) if explore is None else explore
    matcher = GrammarMatcher(grammar)
    mask = np.zeros(grammar.num_words, dtype=np.uint32)
    out: list[bytes] = []
    for step in range(max_steps):
        if matcher.is_terminated():
            return b"".join(out)
        matcher.fill_next_token_bitmask(mask)
        allowed = allowed_ids(mask, grammar.vocab.size)
        assert allowed.size, "an empty mask must raise, not be returned"
        if step < explore:
            token = int(rng.choice(allowed))
        else:
            token = _finishing_choice(grammar, matcher.state, allowed, rng)
        assert matcher.accept_token(token), f"mask allowed token {token} the matcher refused"
        if token not in grammar.vocab.eos_token_ids:
            out.append(grammar.vocab.token_bytes[token])
    raise AssertionError(f"no EOS after {max_steps} tokens: {b''.join(out)[:300]!r}")


def accepts(grammar: CompiledGrammar, text: str | bytes, complete: bool = True) -> bool:
    """Whether the grammar accepts `text` (as a whole, or as a prefix), byte by byte."""
    state = grammar.states.initial
    for byte in text.encode("utf-8") if isinstance(text, str) else text:
        state = grammar.states.step(state, byte)
        if state == DEAD:
            return False
    return bool(grammar.states.accepting[state]) if complete else True
