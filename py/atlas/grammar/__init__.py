"""Structured output: JSON schema / regular expression / EBNF -> one pushdown automaton over
bytes -> per-state token masks over a real vocabulary (XGrammar-style). Depends only on
the standard library and numpy; does no I/O (callers pass parsed tokenizer data)."""
