"""The HTTP side of the harness: one aiohttp session against one OpenAI-compatible server.

Every generation request streams (`stream: true` with `stream_options.include_usage`), so
the client sees the first token when the server sends it. Token counts come from the
server's `usage`, never from counting chunks: a chunk may carry several tokens (incremental
detokenization holds bytes back) or none (a stop token). Timing is `time.perf_counter`,
taken on the client, so the numbers include the HTTP stack a real user goes through.

`StreamRecorder` turns the stream into a `RequestResult` and does no I/O, so the timing
rules are testable without a server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from .errors import BenchError
from .sse import SseDecoder


TEXT_PREVIEW_CHARS = 200  # enough to see what a run answered, small enough to store always


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One complete tool call as assembled from its streamed deltas."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One streamed request. Times are seconds after the request was sent; `sent_s` is on
    the client's monotonic clock so a run can place requests on one timeline."""

    sent_s: float
    latency_s: float                  # until the stream's end ([DONE])
    ttft_s: float | None = None       # until the first generated text, reasoning or tool call
    finish_s: float | None = None     # until the chunk carrying finish_reason
    first_tool_s: float | None = None  # until the first tool-call delta
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    chunk_gaps_s: tuple[float, ...] = ()  # between successive chunks with generated output
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def decode_s(self) -> float | None:
        """From the first token to the end of generation: the decode phase."""
        if self.ttft_s is None or self.finish_s is None:
            return None
        return self.finish_s - self.ttft_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (decode time / (completion tokens - 1));
        None when there is no second token to time."""
        decode = self.decode_s
        if decode is None or self.completion_tokens < 2:
            return None
        return decode / (self.completion_tokens - 1)

    @property
    def decode_tok_s(self) -> float | None:
        """This stream's decode rate: tokens after the first per second after the first
        token. Prefill is TTFT's business, so it does not dilute this number."""
        tpot = self.tpot_s
        return None if tpot is None or tpot <= 0 else 1.0 / tpot

    def as_dict(self) -> dict[str, Any]:
        return {"sent_s": self.sent_s, "latency_s": self.latency_s, "ttft_s": self.ttft_s,
                "finish_s": self.finish_s, "first_tool_s": self.first_tool_s,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "finish_reason": self.finish_reason, "tpot_s": self.tpot_s,
                "decode_tok_s": self.decode_tok_s,
                "tool_calls": [{"name": c.name, "arguments": c.arguments}
                               for c in self.tool_calls],
                "text_preview": self.text[:TEXT_PREVIEW_CHARS],
                "error": self.error}


@dataclass
class _ToolCallParts:
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamRecorder:
    """Consumes one OpenAI stream's event payloads (chat or completions) as they arrive."""

    def __init__(self, sent_s: float) -> None:
        self.sent_s = sent_s
        self._ttft: float | None = None
        self._finish: float | None = None
        self._first_tool: float | None = None
        self._last_output: float | None = None
        self._gaps: list[float] = []
        self._text: list[str] = []
        self._calls: dict[int, _ToolCallParts] = {}
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._error: str | None = None
        self.done = False

    def on_event(self, now_s: float, data: str) -> None:
        """One event's data; `[DONE]` ends the stream. The first error is the one kept."""
        if self._error is not None:
            return
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._error = f"the server sent an event that is not JSON: {data[:120]!r}"
            return
        if not isinstance(chunk, dict):
            self._error = f"the server sent an event that is not a JSON object: {data[:120]!r}"
            return
        if "error" in chunk:
            err = chunk["error"]
            self._error = str(err.get("message", err) if isinstance(err, dict) else err)
            return
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            self._on_choice(now_s - self.sent_s, choice)

    def _on_choice(self, t: float, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        text = choice.get("text") or delta.get("content") or ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        tool_deltas = delta.get("tool_calls") or ()
        if text or reasoning or tool_deltas:
            if self._ttft is None:
                self._ttft = t
            else:
                self._gaps.append(t - self._last_output)
            self._last_output = t
        self._text.append(text)
        for d in tool_deltas:
            if self._first_tool is None:
                self._first_tool = t
            parts = self._calls.setdefault(int(d.get("index", 0)), _ToolCallParts())
            fn = d.get("function") or {}
            parts.name += fn.get("name") or ""
            parts.arguments.append(fn.get("arguments") or "")
        if choice.get("finish_reason"):
            self._finish_reason = choice["finish_reason"]
            self._finish = t

    def result(self, now_s: float) -> RequestResult:
        """The request's record; an error when the stream broke or lacked usage."""
        error = self._error
        if error is None and not self.done:
            error = "the stream ended before data: [DONE]"
        if error is None and self._usage is None:
            error = ("the server sent no usage in its last chunk (the harness counts tokens "
                     "from stream_options.include_usage)")
        usage = self._usage or {}
        calls = tuple(ToolCall(p.name, "".join(p.arguments))
                      for _, p in sorted(self._calls.items()))
        return RequestResult(
            sent_s=self.sent_s, latency_s=now_s - self.sent_s, ttft_s=self._ttft,
            finish_s=self._finish, first_tool_s=self._first_tool,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=self._finish_reason, chunk_gaps_s=tuple(self._gaps),
            text="".join(self._text), tool_calls=calls, error=error)


def normalize_url(url: str) -> str:
    """`http://host:port`, `http://host:port/` and `http://host:port/v1` name one server."""
    base = url.strip().rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    if not base.startswith(("http://", "https://")):
        raise BenchError(f"--url {url!r} is not an http(s) URL (e.g. http://127.0.0.1:8888)")
    return base


class BenchClient:
    """One server, one session. Use as `async with BenchClient(...) as client:`."""

    def __init__(self, url: str, model: str, *, api_key: str | None = None,
                 timeout_s: float = 600.0) -> None:
        self.base = normalize_url(url)
        self.model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=10)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "BenchClient":
        # no client-side connection cap: a concurrency level must reach the server whole
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), headers=self._headers,
            timeout=self._timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._session is not None
        await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("BenchClient is used outside `async with`")
        return self._session

    async def check_health(self) -> None:
        """Fail fast, before any suite starts, when nothing ready answers at the URL."""
        where = f"{self.base}/health"
        try:
            async with self.session.get(where, timeout=aiohttp.ClientTimeout(total=10)) as r:
                status, body = r.status, (await r.text())[:200]
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise BenchError(f"no server answers at {where} ({type(exc).__name__}: {exc}); "
                             f"start one (atlas serve) or point --url at it") from None
        if status != 200:
            raise BenchError(f"the server at {self.base} is not ready: GET /health answered "
                             f"{status} {body.strip()}")

    async def max_model_len(self) -> int | None:
        """The served context length from /v1/models, when the server reports one."""
        try:
            async with self.session.get(f"{self.base}/v1/models") as r:
                if r.status != 200:
                    return None
                body = await r.json(loads=orjson.loads, content_type=None)
        except (aiohttp.ClientError, orjson.JSONDecodeError):
            return None
        entries = body.get("data") if isinstance(body, dict) else None
        for entry in entries or ():
            if isinstance(entry, dict) and entry.get("id") == self.model:
                value = entry.get("max_model_len")
                return int(value) if isinstance(value, int) else None
        return None

    async def tokenize(self, text: str) -> list[int] | None:
        """The server's token ids for `text` without special tokens (vLLM's and Atlas's
        /tokenize); None when the server has no such endpoint."""
        body = {"model": self.model, "prompt": text, "add_special_tokens": False}
        async with self.session.post(f"{self.base}/tokenize", data=orjson.dumps(body),
                                     headers={"Content-Type": "application/json"}) as r:
            if r.status != 200:
                return None
            body = await r.json(loads=orjson.loads, content_type=None)
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return None
        return tokens

    async def stream_chat(self, body: dict[str, Any]) -> RequestResult:
        return await self._stream("/v1/chat/completions", body)

    async def stream_completion(self, body: dict[str, Any]) -> RequestResult:
        return await self._stream("/v1/completions", body)

    async def _stream(self, path: str, body: dict[str, Any]) -> RequestResult:
        payload = orjson.dumps({"model": self.model, **body, "stream": True,
                                "stream_options": {"include_usage": True}})
        sent = time.perf_counter()
        recorder = StreamRecorder(sent)
        try:
            async with self.session.post(f"{self.base}{path}", data=payload,
                                         headers={"Content-Type": "application/json"}) as r:
                if r.status != 200:
                    detail = (await r.text())[:300].strip()
                    return RequestResult(sent_s=sent, latency_s=time.perf_counter() - sent,
                                         error=f"HTTP {r.status}: {detail}")
                decoder = SseDecoder()
                async for line in r.content:
                    data = decoder.feed(line)
                    if data is not None:
                        recorder.on_event(time.perf_counter(), data)
                tail = decoder.close()
                if tail is not None:
                    recorder.on_event(time.perf_counter(), tail)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            # ValueError: aiohttp refuses a line longer than its buffer (not an SSE stream)
            return RequestResult(sent_s=sent, latency_s=time.perf_counter() - sent,
                                 error=f"{type(exc).__name__}: {exc}")
        return recorder.result(time.perf_counter())
