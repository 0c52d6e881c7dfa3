"""Bearer-token auth for write endpoints, compared in constant time.

Accepts `Authorization: Bearer <key>` (OpenAI SDKs) and `x-api-key: <key>` (Anthropic SDKs).
Every configured token is compared, so timing does not reveal which one matched.
Header values arrive as str decoded by aiohttp with surrogateescape, so a header holding
invalid UTF-8 carries lone surrogates; "surrogatepass" encodes any str, so such a key fails to
match (a 401), never raises.
"""

from __future__ import annotations

import hmac
from typing import Iterable, Mapping


def parse_tokens_file(text: str) -> list[str]:
    """One token per line; blank lines and `#` comments ignored."""
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def presented_token(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("Authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = headers.get("x-api-key", "").strip()
    return key or None


class TokenAuth:
    def __init__(self, tokens: Iterable[str]) -> None:
        self._tokens = [t.encode() for t in tokens if t]
        if not self._tokens:
            raise ValueError("auth is required but no tokens were given")

    def check(self, presented: str | None) -> bool:
        candidate = (presented or "").encode("utf-8", "surrogatepass")
        ok = False
        for token in self._tokens:
            ok |= hmac.compare_digest(candidate, token)
        return ok
