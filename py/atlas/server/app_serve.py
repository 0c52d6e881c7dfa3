"""Startup glue: bind the listener first (so /health answers 503 while the model loads),
build the model's executor off the event loop, start the engine thread, then report ready.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from dataclasses import dataclass
from typing import Callable

from aiohttp import web

from ..engine.block_manager import BlockPool
from ..engine.core import EngineCore
from ..engine.scheduler import DEFAULT_MIXED_STEP_TOKENS
from ..engine.scheduling_policy import make_policy
from ..engine.speculative import Drafter, Speculator, make_drafter
from ..model.batch import StepExecutor
from ..runtime.kv_cache import BlockAllocator
from .app import build_app, start_server
from .async_engine import AsyncEngine
from .context import ServerContext
from .engine_thread import EngineThread
from .structured import StructuredOutputs


@dataclass(slots=True)
class EngineLimits:
    max_num_seqs: int | None = None  # None: the batch the executor is sized for
    max_seq_len: int = 4096
    max_prefill_tokens: int = 8192
    #: the step budget while sequences decode: bounds their inter-token latency
    max_mixed_step_tokens: int = DEFAULT_MIXED_STEP_TOKENS
    scheduling_policy: str = "fifo"
    tbt_deadline_ms: float = 100.0
    prefix_caching: bool = True
    speculative: str | None = None   # a drafter name ("ngram", "mtp"); None: no speculation
    num_draft_tokens: int = 3
    #: the draft policy's step-cost table (batch -> relative cost of K = 1.. drafts; see
    #: Speculator); None: every step drafts num_draft_tokens
    spec_step_cost: dict[int, list[float]] | None = None
    #: plan and launch each step while the one before runs on the device (EngineCore)
    async_scheduling: bool = True


def build_engine(executor: StepExecutor, limits: EngineLimits, ctx: ServerContext,
                 loop: asyncio.AbstractEventLoop,
                 pool_factory: Callable[[int], BlockPool] = BlockAllocator) -> AsyncEngine:
    core = EngineCore.build(
        executor, max_prefill_tokens=limits.max_prefill_tokens,
        max_mixed_step_tokens=limits.max_mixed_step_tokens,
        max_num_seqs=limits.max_num_seqs, max_seq_len=limits.max_seq_len,
        policy=make_policy(limits.scheduling_policy, limits.tbt_deadline_ms),
        pool_factory=pool_factory, prefix_caching=limits.prefix_caching,
        speculator=Speculator(_drafter(limits.speculative, executor), limits.num_draft_tokens,
                              step_cost=limits.spec_step_cost)
        if limits.speculative else None, async_scheduling=limits.async_scheduling)
    kv = getattr(executor, "kv", None)   # a model runner's pool (absent on test executors)
    if kv is not None:
        ctx.metrics.kv_pool = (kv.cfg.max_tokens, kv.dtype_label, kv.cfg.bytes_per_token)
    return AsyncEngine(lambda sink: EngineThread(core, sink, ctx.metrics), loop)


def _drafter(name: str, executor: StepExecutor) -> Drafter:
    """The named drafter; "mtp" drafts what the executor's MTP head proposed."""
    if name == "mtp":
        return make_drafter(name, source=getattr(executor, "mtp_drafts"))
    return make_drafter(name)


async def serve(ctx: ServerContext, host: str, port: int, load: Callable[[], StepExecutor],
                limits: EngineLimits, on_ready: Callable[[], None],
                pool_factory: Callable[[int], BlockPool] = BlockAllocator,
                serving_process: bool = False) -> web.AppRunner:
    """Start listening, load the model in a worker thread, then start the engine and call
    `on_ready`. Returns the runner; the caller keeps the loop alive and cleans up.
    `serving_process` (`atlas serve`) ends startup with `tune_serving_process`; an embedding
    process (tests) keeps its collector and interpreter settings as they are."""
    runner = await start_server(build_app(ctx), host, port, ctx.options.connection_limits)
    loop = asyncio.get_running_loop()
    try:
        executor = await loop.run_in_executor(None, load)
    except BaseException:
        await runner.cleanup()
        raise
    engine = build_engine(executor, limits, ctx, loop, pool_factory)
    engine.start()
    info = getattr(executor, "info", None)  # a ModelRunner's build facts; fakes have none
    ctx.kernel_targets = [dict(s) for s in getattr(info, "kernel_stamps", ())]
    ctx.structured = StructuredOutputs(ctx.tokenizer, executor.vocab_size,
                                       ctx.options.tool_parser)
    ctx.engine = engine
    if serving_process:
        tune_serving_process()
    on_ready()
    return runner


#: the serving process's GIL switch interval (seconds; Python's default is 5 ms)
SERVING_SWITCH_INTERVAL_S = 0.0005


def tune_serving_process() -> None:
    """The serving process's interpreter settings: `freeze_startup_heap`, and a GIL switch
    interval of SERVING_SWITCH_INTERVAL_S. Why the interval: the engine thread and the event
    loop share the GIL, and cuda-bindings drops it on every driver call, so the loop (a
    request's rendering and tokenizing, the streams' writes) takes it at any of an eager
    step's ~330 launches and keeps it until it blocks or the interval expires; at 5 ms an
    interval can hold a prefill's launches back that long. Measured (gpu204, H100, Qwen3-8B,
    tools/gpu/profile_ttft.py, medians of 8 / 4 requests over HTTP): time to first token
    past a cached 2,000-word prefix 20.97 ms at 5 ms, 17.22 at 0.5 ms; a 12-word prompt
    18.78 -> 13.27."""
    freeze_startup_heap()
    sys.setswitchinterval(SERVING_SWITCH_INTERVAL_S)


def freeze_startup_heap() -> None:
    """Collect, then move every object startup made (model structures, kernel caches,
    tokenizer and grammar tables, imported modules) into the collector's permanent
    generation, so that each full collection while serving traces only what serving made.
    Why: a full collection runs on whichever thread allocates, the engine thread included,
    and holds the GIL throughout; after startup it traced ~66,000 objects (the CPU server on
    the default model, 16-19 ms a collection on a 2-core machine; the Qwen3-8B CUDA runner
    on the mock backend ~72,000, 18-26 ms), a stall of every stream's next token. Startup
    garbage in reference cycles that dies later is never reclaimed: a one-time cost."""
    gc.collect()
    gc.freeze()


async def shutdown(ctx: ServerContext, runner: web.AppRunner) -> None:
    await runner.cleanup()
    if ctx.engine is not None:
        ctx.engine.stop()
    if ctx.responses is not None:
        ctx.responses.close()
