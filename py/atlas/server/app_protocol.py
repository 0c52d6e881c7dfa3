"""The HTTP connection layer under the aiohttp application.

aiohttp answers some requests before any handler or middleware runs: a malformed request
line, an oversized URL or header, too many headers, a bad Content-Length, a NUL in a header.
Its default answer is `text/plain`, and its default log line is a traceback whose message
quotes the offending bytes (the start of an `Authorization` header among them). This module
replaces both: those errors are answered in the API's JSON error shape and logged as one line
that names the error class and the peer, never the request's bytes.

It also holds the connection limits aiohttp lacks or defaults too loosely:
* a header-read deadline: a request whose headers have not all arrived this many seconds
  after its first byte gets a 408 and the connection closes (slow-header clients);
* an idle keep-alive deadline: a connection with no request in flight closes after this
  many seconds (aiohttp's `keepalive_timeout`, which also covers a fresh connection that
  never sends anything);
* a cap on open connections: one more is answered 503 and closed at once, so idle sockets
  cannot exhaust the process's file descriptors.
"""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any

import orjson
import structlog
from aiohttp import web, web_protocol, web_server
from aiohttp.http_exceptions import (BadHttpMessage, BadStatusLine, HttpProcessingError,
                                     InvalidHeader, LineTooLong)

from .context import ConnectionLimits
from .errors import ApiError, ErrorKind, api_for_path

_log = structlog.get_logger("atlas.server")

#: the start of a request line whose path is under /v1/messages (Anthropic's error shape)
_ANTHROPIC_REQUEST_LINE = re.compile(rb"[A-Z]{3,10} /v1/messages(?:[/?# ]|$)")

MAX_LINE_BYTES = 8190   # aiohttp's limits on the request line and on one header
MAX_HEADERS = 128

#: the RequestHandler state this layer reads (aiohttp 3.14's slots); checked at import so an
#: aiohttp without them fails at startup with this message, not on the first request
_HANDLER_STATE = ("_request_in_progress", "_messages", "_request_count")
_missing = [a for a in _HANDLER_STATE if a not in web_protocol.RequestHandler.__slots__]
if _missing:
    raise ImportError(f"atlas's HTTP connection layer needs aiohttp's RequestHandler state "
                      f"{_missing} (aiohttp 3.14); upgrade aiohttp")


def parser_error(exc: BaseException | None, status: int) -> ApiError:
    """What to tell a client whose request aiohttp refused before routing it. The
    message is ours, never the parser's: the parser quotes the offending bytes."""
    if isinstance(exc, LineTooLong):
        line = exc.args[0] if exc.args else b""
        if isinstance(line, (bytes, bytearray)) and line[:1] == b"/":
            return ApiError(ErrorKind.URI_TOO_LONG,
                            f"the request URL exceeds the {MAX_LINE_BYTES}-byte limit",
                            code="uri_too_long")
        return ApiError(ErrorKind.HEADERS_TOO_LARGE,
                        f"a request header exceeds the {MAX_LINE_BYTES}-byte limit",
                        code="header_too_large")
    if isinstance(exc, BadStatusLine):
        return ApiError(ErrorKind.INVALID_REQUEST, "malformed HTTP request line",
                        code="bad_request_line")
    if isinstance(exc, InvalidHeader):
        return ApiError(ErrorKind.INVALID_REQUEST, "malformed HTTP header (invalid name or "
                        "characters)", code="bad_header")
    if isinstance(exc, BadHttpMessage) and "Too many headers" in exc.message:
        return ApiError(ErrorKind.HEADERS_TOO_LARGE,
                        f"the request has more than {MAX_HEADERS} headers",
                        code="too_many_headers")
    if isinstance(exc, HttpProcessingError):
        return ApiError(ErrorKind.INVALID_REQUEST, f"malformed HTTP request: {_reason(exc)}",
                        code="bad_request")
    if status == HTTPStatus.GATEWAY_TIMEOUT:
        return ApiError(ErrorKind.SERVER, "the request handler timed out")
    return ApiError(ErrorKind.SERVER, "internal server error")


def _reason(exc: HttpProcessingError) -> str:
    """The llhttp reason ("Invalid character in Content-Length") without the quoted input
    that follows it on later lines; other messages may embed input, so only the class."""
    first, newline, _ = exc.message.partition("\n")
    if newline and first.isascii() and first.isprintable():
        return first.rstrip(":")[:80]
    return type(exc).__name__


def raw_error_bytes(err: ApiError, api: str) -> bytes:
    """A complete `Connection: close` HTTP/1.1 response, for the moments no aiohttp request
    object exists (a refused connection, an overdue header)."""
    body = orjson.dumps(err.body(api))
    reason = HTTPStatus(err.status).phrase
    head = (f"HTTP/1.1 {err.status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode("ascii") + body


class LimitedProtocol(web_protocol.RequestHandler):
    """aiohttp's RequestHandler with JSON parser errors, quiet logs and the limits above."""

    def __init__(self, manager: "LimitedServer", **kwargs: Any) -> None:
        super().__init__(manager, keepalive_timeout=manager.limits.keepalive_timeout_s,
                         **kwargs)
        self._limits = manager.limits
        self._header_timer: Any = None
        self._api_hint = "openai"     # the shape for errors raised before routing
        self._refused = False

    # --- connection cap --------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        manager = self._manager
        if manager is not None and len(manager.connections) >= self._limits.max_connections:
            self._refused = True
            err = ApiError(ErrorKind.UNAVAILABLE, "the server has reached its connection "
                           f"limit ({self._limits.max_connections}); retry shortly",
                           code="too_many_connections")
            transport.write(raw_error_bytes(err, "openai"))
            if transport.can_write_eof():
                transport.write_eof()
            # the client's request is read and dropped until it closes (closing with its
            # bytes unread would reset the connection and could lose the 503); a client
            # that does not close is cut off after a second
            self._loop.call_later(1.0, transport.close)
            _log.warning("connection refused", reason="connection limit",
                         limit=self._limits.max_connections)
            return
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_header_timer()
        if not self._refused:
            super().connection_lost(exc)

    # --- header-read deadline ----------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if data and self._header_timer is None and self._between_requests():
            # the first bytes of a request: its request line starts here
            self._api_hint = ("anthropic" if _ANTHROPIC_REQUEST_LINE.match(data[:64])
                              else "openai")
            self._header_timer = self._loop.call_later(self._limits.header_timeout_s,
                                                       self._headers_overdue)
        before = self._request_count
        super().data_received(data)
        if self._request_count != before:
            self._cancel_header_timer()

    def _between_requests(self) -> bool:
        return not self._request_in_progress and not self._messages

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_overdue(self) -> None:
        self._header_timer = None
        if self.transport is None or not self._between_requests():
            return  # the headers completed meanwhile (a request is queued or running)
        err = ApiError(ErrorKind.REQUEST_TIMEOUT, "the request headers did not arrive within "
                       f"{self._limits.header_timeout_s:g} s", code="header_timeout")
        self.transport.write(raw_error_bytes(err, self._api_hint))
        _log.info("connection closed", reason="header timeout")
        self.force_close()

    # --- errors aiohttp raises before routing --------------------------------------------

    def handle_error(self, request: web.BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        err = parser_error(exc, status)
        api = self._api_hint if request.path == "/" else api_for_path(request.path)
        if err.status >= 500:
            _log.error("request failed below the handlers", status=err.status,
                       error=type(exc).__name__ if exc else None)
        else:
            _log.info("request refused by the HTTP parser", status=err.status,
                      error=type(exc).__name__ if exc else None, peer=request.remote)
        if request.writer.output_size > 0:
            raise ConnectionError("the response had started; the connection is dropped")
        resp = web.Response(body=orjson.dumps(err.body(api)), status=err.status,
                            content_type="application/json")
        resp.force_close()
        return resp


class LimitedServer(web_server.Server):
    """aiohttp's low-level Server making LimitedProtocol connections."""

    def __init__(self, handler: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.limits = limits

    def __call__(self) -> LimitedProtocol:
        return LimitedProtocol(self, loop=self._loop, **self._kwargs)


class LimitedAppRunner(web.AppRunner):
    """An AppRunner whose server is a LimitedServer."""

    def __init__(self, app: web.Application, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._limits = limits

    async def _make_server(self) -> web_server.Server:
        base = await super()._make_server()   # runs the application's startup hooks
        return LimitedServer(base.request_handler, self._limits,
                             request_factory=base.request_factory,
                             handler_cancellation=base.handler_cancellation,
                             **base._kwargs)
