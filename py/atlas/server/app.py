"""The aiohttp application: routes, request guards (auth, rate limit, body size, JSON),
error rendering in each API's shape, SSE helpers, and the per-request log line.

Handlers for the two APIs live in app_openai.py and app_anthropic.py; this module holds
what they share and the routes that belong to neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from typing import Any, Awaitable, Callable, Iterator

import orjson
import structlog
from aiohttp import web

from ..core.sampling import SamplingParams
from ..engine.request import FinishReason
from .app_cors import add_cors_headers, cors_middleware
from .app_protocol import LimitedAppRunner
from .auth import presented_token
from .context import ConnectionLimits, ServerContext
from .errors import ApiError, ErrorKind, api_for_path, invalid, kind_for_status
from .generation import Generation, Outcome, render_prompt
from .protocol_openai import continuation, parse_messages
from .request_spec import GenerationSpec
from .validation import Fields, require_object

CTX: web.AppKey[ServerContext] = web.AppKey("atlas_ctx", ServerContext)

_log = structlog.get_logger("atlas.server")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# --- responses -------------------------------------------------------------------------------

def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status,
                        content_type="application/json")


def error_response(err: ApiError, api: str) -> web.Response:
    return json_response(err.body(api), err.status)


async def open_sse(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache",
                                       "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    return resp


async def send_sse(resp: web.StreamResponse, data: Any, event: str | None = None) -> None:
    payload = data if isinstance(data, bytes) else orjson.dumps(data)
    head = f"event: {event}\n".encode() if event else b""
    await resp.write(head + b"data: " + payload + b"\n\n")


# --- guards ----------------------------------------------------------------------------------

def client_key(request: web.Request) -> str:
    """Whom rate limits charge: the presented API key, else the peer address."""
    return presented_token(request.headers) or f"ip:{request.remote}"


def authorize(request: web.Request, ctx: ServerContext) -> str:
    """Auth (401) then the request-rate bucket (429); returns the rate-limit key."""
    if ctx.auth is not None and not ctx.auth.check(presented_token(request.headers)):
        raise ApiError(ErrorKind.AUTHENTICATION, "invalid or missing API key",
                       code="invalid_api_key")
    key = client_key(request)
    refusal = ctx.rate_limiter.admit(key, time.monotonic())
    if refusal is not None:
        raise ApiError(ErrorKind.RATE_LIMIT, refusal, code="rate_limit_exceeded")
    return key


async def read_json(request: web.Request, ctx: ServerContext) -> Any:
    limit = ctx.options.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(request.content_length, limit)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(None, limit) from None
    if not raw:
        raise invalid("the request body is empty; send a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"the request body is not valid JSON: {exc}") from None


def _too_large(size: int | None, limit: int) -> ApiError:
    got = f" ({size} bytes)" if size is not None else ""
    return ApiError(ErrorKind.TOO_LARGE, f"request body{got} exceeds the {limit}-byte limit "
                    "(ATLAS_MAX_BODY_BYTES)", code="request_too_large")


def require_ready(ctx: ServerContext) -> None:
    if not ctx.ready:
        raise ApiError(ErrorKind.UNAVAILABLE, "the model is still loading",
                       code="model_not_loaded")


def api_route(api: str) -> Callable[[Handler], Handler]:
    """Render ApiError (and any crash, as a 500) in `api`'s error shape; count requests."""
    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def run(request: web.Request) -> web.StreamResponse:
            ctx = request.app[CTX]
            try:
                resp = await handler(request)
            except ApiError as err:
                resp = error_response(err, api)
            except (web.HTTPException, ConnectionError):
                raise  # aiohttp's own responses; a client that went away
            except Exception:  # never let a handler bug take the connection down silently
                _log.exception("request failed", path=request.path)
                resp = error_response(ApiError(ErrorKind.SERVER, "internal server error"), api)
            ctx.metrics.record_request(api, resp.status)
            return resp
        return run
    return wrap


SpecParser = Callable[[Any, SamplingParams], GenerationSpec]


async def begin_generation(request: web.Request, parse: SpecParser
                           ) -> tuple[ServerContext, str, GenerationSpec, Generation]:
    """The opening every generation route shares: authorize, parse the body with the
    route's protocol parser, admit the request. Returns (ctx, key, spec, generation)."""
    ctx = request.app[CTX]
    started = time.monotonic()
    key = authorize(request, ctx)
    spec = parse(await read_json(request, ctx), ctx.options.default_sampling)
    return ctx, key, spec, start_generation(spec, ctx, key, started)


def start_generation(spec: GenerationSpec, ctx: ServerContext, key: str,
                     started: float) -> Generation:
    require_ready(ctx)
    gen = Generation(spec, ctx, started)
    ctx.metrics.record_prompt(gen.outcome.prompt_tokens)
    ctx.rate_limiter.charge_tokens(key, gen.outcome.prompt_tokens, time.monotonic())
    return gen


@contextlib.contextmanager
def finishing(ctx: ServerContext, key: str, api: str, gen: Generation) -> Iterator[None]:
    """Wrap a generation's response: a client that went away (the handler is cancelled, or
    a write finds the socket closed) finishes it as "abort", not "error"; either way the
    request's one log line and its finish counter follow."""
    try:
        yield
    except (asyncio.CancelledError, ConnectionError):
        gen.outcome.finish_reason = FinishReason.ABORT
        gen.outcome.elapsed_s = time.monotonic() - gen.started
        raise
    finally:
        finish_generation(ctx, key, api, gen.outcome)


def finish_generation(ctx: ServerContext, key: str, api: str, outcome: Outcome) -> None:
    """The one log line per finished request (never per token)."""
    ctx.rate_limiter.charge_tokens(key, outcome.completion_tokens, time.monotonic())
    ctx.metrics.record_finish(outcome.finish_reason)
    _log.info("request finished", api=api, model=ctx.options.model_name,
              finish=outcome.finish_reason, prompt_tokens=outcome.prompt_tokens,
              generated_tokens=outcome.completion_tokens,
              ttft_ms=None if outcome.ttft_s is None else round(outcome.ttft_s * 1000, 1),
              elapsed_ms=round(outcome.elapsed_s * 1000, 1),
              tools=[c.name for c in outcome.tool_calls])


# --- routes of neither API -------------------------------------------------------------------

async def health(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    if not ctx.ready:
        return json_response({"status": "loading"}, 503)
    return json_response({"status": "ok"})


async def metrics(request: web.Request) -> web.Response:
    return web.Response(text=request.app[CTX].metrics.render(),
                        content_type="text/plain", charset="utf-8",
                        headers={"X-Prometheus-Format": "0.0.4"})


@api_route("openai")
async def models(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    entry = {"id": ctx.options.model_name, "object": "model", "created": 0,
             "owned_by": "atlas"}
    if ctx.ready:
        entry["max_model_len"] = ctx.context_limit
    return json_response({"object": "list", "data": [entry]})


async def kernel_targets(request: web.Request) -> web.Response:
    """The PTX sets serving this model, as built (the merge-lattice gate records these)."""
    ctx = request.app[CTX]
    if not ctx.ready:
        return json_response({"status": "loading"}, 503)
    return json_response({"targets": ctx.kernel_targets})


@api_route("openai")
async def tokenize(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    authorize(request, ctx)
    f = Fields(require_object(await read_json(request, ctx)))
    tok = ctx.tokenizer
    if f.raw("messages") is not None:
        spec = GenerationSpec(model=ctx.options.model_name, sampling=SamplingParams(),
                              max_tokens=None, messages=parse_messages(f.array("messages")),
                              **continuation(f))
        ids = render_prompt(spec, ctx).ids
    else:
        ids = tok.encode(f.string("prompt", required=True),
                         add_special_tokens=f.boolean("add_special_tokens", True))
    body: dict[str, Any] = {"tokens": ids, "count": len(ids)}
    if ctx.ready:
        body["max_model_len"] = ctx.context_limit
    return json_response(body)


@api_route("openai")
async def detokenize(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    authorize(request, ctx)
    f = Fields(require_object(await read_json(request, ctx)))
    ids = f.array("tokens", required=True)
    if not all(isinstance(t, int) and not isinstance(t, bool) and ctx.tokenizer.is_valid_id(t)
               for t in ids):
        raise invalid("tokens must be an array of token ids in the vocabulary", "tokens")
    return json_response({"prompt": ctx.tokenizer.decode(ids, skip_special_tokens=False)})


#: the header a request's id arrives in (from a gateway that traces it) and is answered in
REQUEST_ID_HEADER = "X-Request-Id"
REQUEST_ID = web.RequestKey("request_id", str)
_REQUEST_ID_MAX = 128


def request_id_of(request: web.Request) -> str:
    """The caller's `X-Request-Id` when it is a short printable token, else a fresh one."""
    given = request.headers.get(REQUEST_ID_HEADER, "")
    if 0 < len(given) <= _REQUEST_ID_MAX and given.isprintable() and " " not in given:
        return given
    return uuid.uuid4().hex


@web.middleware
async def request_ids(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every request gets an id: its log lines carry it (structlog's context variables, bound
    for the handler's task) and its response answers it in X-Request-Id."""
    request[REQUEST_ID] = request_id_of(request)
    with structlog.contextvars.bound_contextvars(request_id=request[REQUEST_ID]):
        return await handler(request)


async def answer_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: the response names its request's id (errors and streams too)."""
    if REQUEST_ID in request:
        response.headers[REQUEST_ID_HEADER] = request[REQUEST_ID]


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own HTTP errors (no route: 404, wrong method: 405, body over the limit:
    413) in the JSON shape of the API the path belongs to; redirects and successes pass."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        api = api_for_path(request.path)
        err = ApiError(kind_for_status(exc.status), _http_error_message(exc, request),
                       code=exc.reason.lower().replace(" ", "_"))
        resp = error_response(err, api)
        if "Allow" in exc.headers:
            resp.headers["Allow"] = exc.headers["Allow"]
        request.app[CTX].metrics.record_request(api, resp.status)
        return resp


def _http_error_message(exc: web.HTTPException, request: web.Request) -> str:
    if exc.status == 404:
        return f"no route {request.path!r}; see GET /v1/models and the API docs"
    if exc.status == 405:
        allowed = exc.headers.get("Allow", "")
        return f"{request.method} is not allowed on {request.path!r} (allowed: {allowed})"
    return exc.reason


def build_app(ctx: ServerContext) -> web.Application:
    from . import app_anthropic, app_conversations, app_openai, app_responses
    from .app_response_store import SqliteResponseStore
    if ctx.responses is None:
        o = ctx.options
        ctx.responses = SqliteResponseStore(o.store_path, max_entries=o.store_max_entries,
                                            max_age_s=o.store_max_age_s)
    # aiohttp enforces the body limit itself too; read_json turns it into a JSON 413
    cors = ctx.options.cors
    app = web.Application(client_max_size=ctx.options.max_body_bytes,
                          middlewares=[request_ids, json_errors, cors_middleware(cors)])
    app.on_response_prepare.append(add_cors_headers(cors))
    app.on_response_prepare.append(answer_request_id)
    app[CTX] = ctx
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/v1/atlas/targets", kernel_targets)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    app.router.add_post("/v1/chat/completions", app_openai.chat_completions)
    app.router.add_post("/v1/completions", app_openai.completions)
    app.router.add_post("/v1/embeddings", app_openai.embeddings)
    app.router.add_post("/v1/responses", app_responses.create)
    app.router.add_get("/v1/responses/{response_id}", app_responses.retrieve)
    app.router.add_delete("/v1/responses/{response_id}", app_responses.delete)
    conversations = "/v1/conversations/{conversation_id}"
    app.router.add_post("/v1/conversations", app_conversations.create)
    app.router.add_get(conversations, app_conversations.retrieve)
    app.router.add_post(conversations, app_conversations.update)
    app.router.add_delete(conversations, app_conversations.delete)
    app.router.add_post(conversations + "/items", app_conversations.add_items)
    app.router.add_get(conversations + "/items", app_conversations.list_items)
    app.router.add_get(conversations + "/items/{item_id}", app_conversations.retrieve_item)
    app.router.add_delete(conversations + "/items/{item_id}", app_conversations.delete_item)
    app.router.add_post("/v1/messages", app_anthropic.messages)
    app.router.add_post("/v1/messages/count_tokens", app_anthropic.count_tokens)
    return app


async def start_server(app: web.Application, host: str, port: int,
                       limits: ConnectionLimits | None = None) -> web.AppRunner:
    """Bind and serve under the connection limits; a client that disconnects cancels its
    handler (which aborts the sequence and frees its KV blocks)."""
    runner = LimitedAppRunner(app, limits or ConnectionLimits(), handler_cancellation=True,
                              access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner
