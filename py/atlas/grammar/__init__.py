"""Structured output: JSON schema / regular expression / EBNF -> one pushdown automaton over
bytes -> per-state token masks over a real vocabulary (XGrammar-style). Depends only on
the standard library and numpy; does no I/O (callers pass parsed tokenizer data).

    compiler = GrammarCompiler(Vocabulary.from_tokenizer_json(data, eos_token_ids))
    matcher = GrammarMatcher(compiler.compile_json_schema(schema))
    matcher.fill_next_token_bitmask(bitmask)      # uint32 words, 1 = allowed
    matcher.accept_token(sampled_id)
"""

from .compiled import CompiledGrammar, bitmask_words
from .compiler import GrammarCompiler
from .errors import GrammarDeadEndError, GrammarError, GrammarSyntaxError, UnsupportedSchemaError
from .matcher import GrammarMatcher
from .vocab import Vocabulary

__all__ = ["CompiledGrammar", "GrammarCompiler", "GrammarDeadEndError", "GrammarError",
           "GrammarMatcher", "GrammarSyntaxError", "UnsupportedSchemaError", "Vocabulary",
           "bitmask_words"]
