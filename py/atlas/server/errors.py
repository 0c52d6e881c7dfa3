"""One error type for every API failure, rendered in the shape each API's clients expect.

Handlers raise `ApiError`; the OpenAI routes render `{"error": {...}}` and the Anthropic
routes `{"type": "error", "error": {...}}`, so SDKs raise their typed exceptions. Errors
raised below the handlers (the router, the HTTP parser, the connection limits) use the same
type and pick the shape from the request path (`api_for_path`).
"""

from __future__ import annotations

import enum


class ErrorKind(enum.Enum):
    """What went wrong, independent of the wire shape. The value is the HTTP status."""

    INVALID_REQUEST = 400
    AUTHENTICATION = 401
    PERMISSION = 403
    NOT_FOUND = 404
    METHOD_NOT_ALLOWED = 405
    REQUEST_TIMEOUT = 408
    TOO_LARGE = 413
    URI_TOO_LONG = 414
    RATE_LIMIT = 429
    HEADERS_TOO_LARGE = 431
    SERVER = 500
    UNAVAILABLE = 503


_OPENAI_TYPES = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.PERMISSION: "permission_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.METHOD_NOT_ALLOWED: "invalid_request_error",
    ErrorKind.REQUEST_TIMEOUT: "timeout_error",
    ErrorKind.TOO_LARGE: "invalid_request_error",
    ErrorKind.URI_TOO_LONG: "invalid_request_error",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.HEADERS_TOO_LARGE: "invalid_request_error",
    ErrorKind.SERVER: "server_error",
    ErrorKind.UNAVAILABLE: "service_unavailable",
}

_ANTHROPIC_TYPES = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.PERMISSION: "permission_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.METHOD_NOT_ALLOWED: "invalid_request_error",
    ErrorKind.REQUEST_TIMEOUT: "timeout_error",
    ErrorKind.TOO_LARGE: "request_too_large",
    ErrorKind.URI_TOO_LONG: "invalid_request_error",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.HEADERS_TOO_LARGE: "invalid_request_error",
    ErrorKind.SERVER: "api_error",
    ErrorKind.UNAVAILABLE: "overloaded_error",
}


class ApiError(Exception):
    """A request failure with a status, a human message and (OpenAI) the offending param."""

    def __init__(self, kind: ErrorKind, message: str, *, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param
        self.code = code

    @property
    def status(self) -> int:
        return self.kind.value

    def openai_body(self) -> dict:
        return {"error": {"message": self.message, "type": _OPENAI_TYPES[self.kind],
                          "param": self.param, "code": self.code}}

    def anthropic_body(self) -> dict:
        return {"type": "error",
                "error": {"type": _ANTHROPIC_TYPES[self.kind], "message": self.message}}

    def body(self, api: str) -> dict:
        """The body in `api`'s shape ("anthropic" or "openai")."""
        return self.anthropic_body() if api == "anthropic" else self.openai_body()


def api_for_path(path: str) -> str:
    """Which API's error shape a path's clients expect: Anthropic under /v1/messages,
    OpenAI everywhere else (the OpenAI shape is what generic HTTP clients handle best)."""
    return "anthropic" if path == "/v1/messages" or path.startswith("/v1/messages/") else "openai"


def kind_for_status(status: int) -> ErrorKind:
    """The ErrorKind of an HTTP status aiohttp chose (router, body limit); an unknown 4xx
    is an invalid request and an unknown 5xx a server error."""
    try:
        return ErrorKind(status)
    except ValueError:
        return ErrorKind.SERVER if status >= 500 else ErrorKind.INVALID_REQUEST


def invalid(message: str, param: str | None = None) -> ApiError:
    """Shorthand for the common 400."""
    return ApiError(ErrorKind.INVALID_REQUEST, message, param=param)


def engine_failure(detail: str | None = None) -> ApiError:
    """A request the engine failed to finish (its step raised, or its grammar reached a
    dead end: `detail` says so): a 500 in each API's shape."""
    return ApiError(ErrorKind.SERVER, detail or "generation failed in the engine")
