"""Everything a request handler needs, gathered once at startup."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.sampling import SamplingParams
from .async_engine import AsyncEngine
from .auth import TokenAuth
from .cors import CorsPolicy
from .metrics import ServerMetrics
from .rate_limit import RateLimiter, RateLimits
from .structured import StructuredOutputs
from .tokenizer import TextTokenizer

if TYPE_CHECKING:
    from .app_response_store import SqliteResponseStore

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Per-connection deadlines (seconds) and the cap on open connections; app_protocol
    enforces them. The cap stays well under the usual 1,024 file-descriptor limit."""

    header_timeout_s: float = 15.0
    keepalive_timeout_s: float = 30.0
    max_connections: int = 512


@dataclass(slots=True)
class ServerOptions:
    model_name: str
    tool_parser: str | None = "hermes"     # None: the model has no tool-call format
    request_timeout_s: float | None = None
    disable_thinking: bool = False
    max_thinking_budget: int | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    rate_limits: RateLimits = field(default_factory=RateLimits)
    default_sampling: SamplingParams = field(default_factory=SamplingParams)
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    #: special-token strings in user/system/tool text become control tokens (role injection)
    allow_special_tokens_in_content: bool = False
    #: the Responses API's SQLite store (a file path; ":memory:" lives with the process)
    store_path: str = ":memory:"
    store_max_entries: int = 10_000
    store_max_age_s: float = 30 * 24 * 3600.0
    #: browser origins allowed to call the API (`--allowed-origins`; none: CORS off)
    cors: CorsPolicy = field(default_factory=CorsPolicy)


@dataclass(slots=True)
class ServerContext:
    options: ServerOptions
    tokenizer: TextTokenizer
    metrics: ServerMetrics
    auth: TokenAuth | None = None
    engine: AsyncEngine | None = None       # None until the model is loaded
    #: grammars over the loaded model's vocabulary; set with `engine`
    structured: StructuredOutputs | None = None
    #: the PTX sets the loaded model runs (GET /v1/atlas/targets; benchmark records cite them)
    kernel_targets: list[dict] = field(default_factory=list)
    #: stored /v1/responses (opened by build_app)
    responses: "SqliteResponseStore | None" = None
    rate_limiter: RateLimiter = field(init=False)

    def __post_init__(self) -> None:
        self.rate_limiter = RateLimiter(self.options.rate_limits)

    @property
    def ready(self) -> bool:
        return self.engine is not None

    @property
    def scheduling_priority(self) -> bool:
        """Whether requests' `priority` orders the engine's queue (--scheduling-policy)."""
        assert self.engine is not None
        return self.engine.scheduler.policy.uses_priority

    @property
    def context_limit(self) -> int:
        """Tokens one sequence may hold (prompt + output)."""
        assert self.engine is not None
        return self.engine.scheduler.token_limit
