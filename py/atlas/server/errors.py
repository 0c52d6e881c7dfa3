"""One error type for every API failure, rendered in the shape each API's clients expect.

Handlers raise `ApiError`; the OpenAI routes render `{"error": {...}}` and the Anthropic
routes `{"type": "error", "error": {...}}`, so SDKs raise their typed exceptions.
"""

from __future__ import annotations

import enum


class ErrorKind(enum.Enum):
    """What went wrong, independent of the wire shape. The value is the HTTP status."""

    INVALID_REQUEST = 400
    AUTHENTICATION = 401
    NOT_FOUND = 404
    TOO_LARGE = 413
    RATE_LIMIT = 429
    SERVER = 500
    UNAVAILABLE = 503


_OPENAI_TYPES = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.TOO_LARGE: "invalid_request_error",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.SERVER: "server_error",
    ErrorKind.UNAVAILABLE: "service_unavailable",
}

_ANTHROPIC_TYPES = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.TOO_LARGE: "request_too_large",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
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


def invalid(message: str, param: str | None = None) -> ApiError:
    """Shorthand for the common 400."""
    return ApiError(ErrorKind.INVALID_REQUEST, message, param=param)


def engine_failure() -> ApiError:
    """A request the engine failed to finish (its step raised): a 500 in each API's shape."""
    return ApiError(ErrorKind.SERVER, "generation failed in the engine")
