"""Cross-origin requests (CORS) from browser pages, for the origins `--allowed-origins` names.

The policy (this module, no I/O); the HTTP side is app_cors.py. A page served from another
origin may call the API only when the response names its origin in
`Access-Control-Allow-Origin`; a request with headers beyond the simple ones (an
`Authorization` bearer token, a JSON content type) is preceded by an `OPTIONS` preflight the
server must answer with the methods and headers it allows. The allow headers are added before
a response's headers go out (aiohttp's `on_response_prepare`), so streamed (SSE) answers and
errors carry them too. No credentials mode: tokens are explicit headers, not cookies.

Off unless origins are given. vLLM allows every origin by default; here a page the user
happens to visit could then read a server on their own machine, so that takes `*` explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """The origins whose pages may call the server (`*`: any); empty: CORS off."""

    origins: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str | None) -> "CorsPolicy":
        """`--allowed-origins`: comma-separated origins (`https://app.example:8443`) or `*`."""
        if not spec:
            return cls()
        origins = tuple(o.strip().rstrip("/") for o in spec.split(",") if o.strip())
        for origin in origins:
            if origin != "*" and "://" not in origin:
                raise ValueError(f"--allowed-origins: {origin!r} is not an origin "
                                 "(scheme://host[:port]) or *")
        return cls(origins)

    def allow_origin(self, origin: str | None) -> str | None:
        """The `Access-Control-Allow-Origin` value for a request from `origin`, or None."""
        if origin is None or not self.origins:
            return None
        if "*" in self.origins:
            return "*"
        return origin if origin in self.origins else None
