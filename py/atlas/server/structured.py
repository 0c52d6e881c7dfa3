"""Structured output for the server: what a request constrains (`response_format`, a
forced tool call) -> a compiled grammar the engine enforces token by token.

One `StructuredOutputs` per loaded model: it builds the grammar compiler over the model's
vocabulary on first use (the vocabulary trie takes seconds for a 150k-token tokenizer, so
servers that never see a structured request never pay it) and keeps compiled grammars in
the compiler's LRU cache. A forced tool call (`tool_choice` required / named, Anthropic
any / tool) is enforced in the model's own tool-call format when that format has a grammar
(hermes, mistral); other formats keep the forced-prefix fallback.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from ..engine.grammar_state import GrammarRequest
from ..grammar import CompiledGrammar, GrammarCompiler, GrammarError, Vocabulary
from ..grammar.ir import Grammar, Lit, alt
from ..grammar.tool_calls import tool_call_grammar
from .errors import invalid
from .reasoning import THINK_CLOSE, THINK_OPEN
from .request_spec import GenerationSpec
from .tokenizer import TextTokenizer

#: tool-call formats with a grammar in `atlas.grammar.tool_calls`
GRAMMAR_TOOL_FORMATS = ("hermes", "mistral")
#: markers a tool-call grammar spells; literal text for the vocabulary when present
_TOOL_MARKERS = ("<tool_call>", "</tool_call>", "[TOOL_CALLS]")


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """What the output must follow: `response_format`'s json_object, or json_schema with its
    schema and `strict`; vLLM's guided decoding adds "regex" (schema: the pattern),
    "grammar" (schema: EBNF text, its rule `root` first) and "choice" (schema: the strings,
    one of which is the whole output)."""

    type: str
    schema: Any = None
    strict: bool = False


class StructuredOutputs:
    """Grammars for one model's vocabulary (`vocab_size`: the model's logit rows)."""

    def __init__(self, tokenizer: TextTokenizer, vocab_size: int,
                 tool_format: str | None) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.tool_format = tool_format
        self._compiler: GrammarCompiler | None = None
        self._lock = threading.Lock()

    @property
    def enforces_tool_calls(self) -> bool:
        return self.tool_format in GRAMMAR_TOOL_FORMATS

    @property
    def compiler(self) -> GrammarCompiler:
        with self._lock:
            if self._compiler is None:
                tok = self.tokenizer
                markers = [m for m in _TOOL_MARKERS if tok.token_id(m) is not None]
                vocab = Vocabulary.from_tokenizer_json(
                    tok.tokenizer_json, tok.eos_token_ids,
                    vocab_size=self.vocab_size, literal_special=markers)
                self._compiler = GrammarCompiler(vocab)
            return self._compiler

    def grammar_for(self, spec: GenerationSpec) -> CompiledGrammar | None:
        """The grammar `spec` asks for, or None; a schema the compiler refuses is a 400."""
        try:
            if spec.tools and spec.tool_choice.forces_call and self.enforces_tool_calls:
                return self._tool_grammar(spec)
            rf = spec.response_format
            if rf is None:
                return None
            if rf.type == "json_object":
                return self.compiler.compile_json_object()
            if rf.type == "regex":
                return self.compiler.compile_regex(rf.schema)
            if rf.type == "grammar":
                return self.compiler.compile_ebnf(rf.schema)
            if rf.type == "choice":
                return self.compiler.compile_grammar(_choice_grammar(rf.schema),
                                                     json.dumps(["choice", rf.schema]))
            return self.compiler.compile_json_schema(rf.schema, strict=rf.strict)
        except GrammarError as exc:
            param = "tools" if spec.tool_choice.forces_call else "response_format"
            raise invalid(f"cannot enforce this {param}: {exc}", param) from None

    def _tool_grammar(self, spec: GenerationSpec) -> CompiledGrammar:
        assert spec.tools is not None and self.tool_format is not None
        name = spec.tool_choice.name
        tools = [t for t in spec.tools if name is None or t["function"]["name"] == name]
        parallel = spec.parallel_tool_calls and name is None
        grammar = tool_call_grammar(tools, self.tool_format, parallel=parallel)
        key = json.dumps(["tools", self.tool_format, parallel, tools], sort_keys=True)
        return self.compiler.compile_grammar(grammar, key)

    def request(self, grammar: CompiledGrammar, thinking: bool,
                prompt_opens_thinking: bool) -> GrammarRequest:
        """What the engine enforces: with thinking on (and think tokens in the vocabulary),
        the reasoning block stays free and the grammar starts after it."""
        close = self.tokenizer.token_id(THINK_CLOSE)
        if not thinking or close is None:
            return GrammarRequest(grammar)
        return GrammarRequest(grammar, think_close_id=close,
                              think_open_id=self.tokenizer.token_id(THINK_OPEN),
                              starts_inside_thinking=prompt_opens_thinking)


def _choice_grammar(choices: list[str]) -> Grammar:
    """The output is exactly one of `choices`."""
    grammar = Grammar()
    grammar.add("root", alt(*(Lit(c) for c in choices)))
    return grammar
