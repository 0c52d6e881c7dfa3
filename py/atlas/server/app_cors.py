"""CORS on the wire (the policy: cors.py): preflight answers and the allow headers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from .cors import CorsPolicy

#: methods the API's routes take
ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS"
#: seconds a browser may cache a preflight's answer
PREFLIGHT_MAX_AGE_S = 600


def cors_middleware(policy: CorsPolicy) -> Middleware:
    """Answers preflights from allowed origins (204) and refuses others (403); other requests,
    and every request while CORS is off, pass through (headers: `add_cors_headers`)."""

    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        preflight = (request.method == "OPTIONS"
                     and "Access-Control-Request-Method" in request.headers)
        if not preflight or not policy.origins:
            return await handler(request)   # CORS off: OPTIONS is a route's 405
        allowed = policy.allow_origin(request.headers.get("Origin"))
        if allowed is None:
            raise web.HTTPForbidden(reason="Origin not allowed")
        headers = {"Access-Control-Allow-Origin": allowed,
                   "Access-Control-Allow-Methods": ALLOWED_METHODS,
                   "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_S),
                   "Vary": "Origin"}
        asked = request.headers.get("Access-Control-Request-Headers")
        if asked:
            headers["Access-Control-Allow-Headers"] = asked
        return web.Response(status=204, headers=headers)

    return cors


def add_cors_headers(policy: CorsPolicy
                     ) -> Callable[[web.Request, web.StreamResponse], Awaitable[None]]:
    """An `on_response_prepare` hook: an allowed origin's responses name it."""

    async def prepare(request: web.Request, response: web.StreamResponse) -> None:
        allowed = policy.allow_origin(request.headers.get("Origin"))
        if allowed is not None:
            response.headers["Access-Control-Allow-Origin"] = allowed
            response.headers.setdefault("Vary", "Origin")

    return prepare
