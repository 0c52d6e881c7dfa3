"""Token logprobs in the OpenAI wire shapes: chat's `logprobs.content` entries and the
legacy completions object (parallel `tokens` / `token_logprobs` / `top_logprobs` arrays).

The engine reports ids and floats (`TokenLogprobs`); here they become token text and bytes.
A token the grammar masked has logprob -inf, which JSON cannot carry: it is sent as
-9999.0, the floor OpenAI itself uses.
"""

from __future__ import annotations

import math
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

    def completion(self, tokens: Sequence[TokenLogprobs], text_offset: int
                   ) -> dict[str, Any]:
        """Completions' `choices[i].logprobs`; offsets count characters from
        `text_offset` (the choice's text before these tokens)."""
        out: dict[str, Any] = {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                               "text_offset": []}
        offset = text_offset
        for t in tokens:
            text, _ = self.text(t.token)
            out["tokens"].append(text)
            out["token_logprobs"].append(_finite(t.logprob))
            out["top_logprobs"].append({self.text(i)[0]: _finite(lp) for i, lp in t.top})
            out["text_offset"].append(offset)
            offset += len(text)
        return out
