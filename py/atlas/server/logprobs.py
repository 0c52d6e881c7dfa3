"""Token logprobs in the OpenAI wire shapes: chat's `logprobs.content` entries and the
legacy completions object (parallel `tokens` / `token_logprobs` / `top_logprobs` arrays,
whose echoed prompt starts with a token that has none), and vLLM's `prompt_logprobs` list.

The engine reports ids and floats (`TokenLogprobs`); here they become token text and bytes.
A token the grammar masked has logprob -inf, which JSON cannot carry: it is sent as
-9999.0, the floor OpenAI itself uses.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

from ..model.batch import TokenLogprobs
from .tokenizer import TextTokenizer

#: what a -inf logprob (a masked or impossible token) is sent as
LOGPROB_FLOOR = -9999.0


def _finite(logprob: float) -> float:
    return logprob if math.isfinite(logprob) else LOGPROB_FLOOR


class LogprobFormatter:
    """Token id -> (text, bytes), memoized per response (top lists repeat tokens)."""

    def __init__(self, tokenizer: TextTokenizer) -> None:
        self._tok = tokenizer
        self._memo: dict[int, tuple[str, bytes]] = {}

    def text(self, token: int) -> tuple[str, bytes]:
        got = self._memo.get(token)
        if got is None:
            raw = self._tok.token_bytes(token)
            got = self._memo[token] = (raw.decode("utf-8", errors="replace"), raw)
        return got

    def _entry(self, token: int, logprob: float) -> dict[str, Any]:
        text, raw = self.text(token)
        return {"token": text, "logprob": _finite(logprob), "bytes": list(raw)}

    def chat(self, tokens: Sequence[TokenLogprobs]) -> dict[str, Any]:
        """Chat completions' `choices[i].logprobs` for these tokens."""
        return {"content": [self._entry(t.token, t.logprob)
                            | {"top_logprobs": [self._entry(i, lp) for i, lp in t.top]}
                            for t in tokens],
                "refusal": None}

    def completion(self, tokens: Sequence[TokenLogprobs | int], text_offset: int
                   ) -> dict[str, Any]:
        """Completions' `choices[i].logprobs`; offsets count characters from
        `text_offset` (the choice's text before these tokens). A bare id is a token without
        a logprob (an echoed prompt's first): null in `token_logprobs` and `top_logprobs`."""
        out: dict[str, Any] = {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                               "text_offset": []}
        offset = text_offset
        for t in tokens:
            if isinstance(t, int):
                text, logprob, top = self.text(t)[0], None, None
            else:
                text, logprob = self.text(t.token)[0], _finite(t.logprob)
                top = {}
                for i, lp in t.top:   # tokens of one text (bytes of a character): the best
                    top.setdefault(self.text(i)[0], _finite(lp))
            out["tokens"].append(text)
            out["token_logprobs"].append(logprob)
            out["top_logprobs"].append(top)
            out["text_offset"].append(offset)
            offset += len(text)
        return out

    def prompt(self, prompt_ids: Sequence[int], logprobs: Sequence[TokenLogprobs],
               top_n: int) -> list[dict[str, dict[str, Any]] | None]:
        """vLLM's `prompt_logprobs`: null for the first token, then per token {id: {logprob,
        rank, decoded_token}} for the token itself and its `top_n` best alternatives. A
        rank is the 1-based place among the alternatives; the token's own is null when it
        is not among them (the engine reports the best `top_n` only)."""
        out: list[dict[str, dict[str, Any]] | None] = [None] if prompt_ids else []
        for token, t in zip(prompt_ids[1:], logprobs):
            ranks = {i: k + 1 for k, (i, _) in enumerate(t.top[:top_n])}
            entry = {str(token): self._ranked(token, t.logprob, ranks.get(token))}
            for i, lp in t.top[:top_n]:
                entry.setdefault(str(i), self._ranked(i, lp, ranks[i]))
            out.append(entry)
        return out

    def _ranked(self, token: int, logprob: float, rank: int | None) -> dict[str, Any]:
        return {"logprob": _finite(logprob), "rank": rank, "decoded_token": self.text(token)[0]}


def echoed_prompt(prompt_ids: Sequence[int], logprobs: Sequence[TokenLogprobs], top_n: int
                  ) -> list[TokenLogprobs | int]:
    """An echoed prompt's entries for `LogprobFormatter.completion`: its first token bare,
    then each token's logprob with its best `top_n` alternatives."""
    return [*prompt_ids[:1], *(replace(t, top=t.top[:top_n]) for t in logprobs)]
