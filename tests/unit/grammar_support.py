"""Shared pieces of the grammar tests: real vocabularies (built once per process), the
fixture schemas, and a byte-level membership check. Random walks live in
`atlas.grammar.walk` (the mask benchmark uses them too)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from atlas.grammar import CompiledGrammar, GrammarCompiler, Vocabulary
from atlas.grammar.state_table import DEAD
from atlas.grammar.walk import allowed_ids, random_walk

__all__ = ["SCHEMA_DIR", "accepts", "allowed_ids", "load_schema", "qwen3_compiler",
           "random_walk", "schema_names", "smollm2_compiler"]

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


def accepts(grammar: CompiledGrammar, text: str | bytes, complete: bool = True) -> bool:
    """Whether the grammar accepts `text` (as a whole, or as a prefix), byte by byte."""
    state = grammar.states.initial
    for byte in text.encode("utf-8") if isinstance(text, str) else text:
        state = grammar.states.step(state, byte)
        if state == DEAD:
            return False
    return bool(grammar.states.accepting[state]) if complete else True
