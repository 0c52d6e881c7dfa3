"""`atlas serve [MODEL]`: the OpenAI- and Anthropic-compatible server.

Options are validated before anything loads; a combination that would be ignored is an
error, not a silent no-op. The port is checked before the model is fetched or loaded; the
process binds first (GET /health answers 503 while the model loads), and prints exactly
`Listening on <bind>:<port>` once requests can be served.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import click

from atlas.server.harmony import HARMONY
from atlas.server.tool_parsers import PARSERS
from atlas_cli.kv_flags import kv_cache_flags, kv_load_kwargs
from atlas_cli.tp_launch import ParallelOptions, WorkerWatch, parallel_flags, run_worker

_LOOPBACK_NAMES = {"localhost", "ip6-localhost"}
_BIND_ERRORS = {errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES}


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _configure_logging() -> None:
    import structlog
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars,  # a request's id (server/app.py)
                    structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.format_exc_info,
                    structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))


def _resolve_model_dir(model: str | None, model_from_path: Path | None) -> Path:
    from atlas_cli.model_setup import model_directory
    if model is not None and model_from_path is not None:
        raise click.UsageError("give MODEL or --model-from-path, not both")
    return model_directory(str(model_from_path) if model_from_path is not None else model)


def _check_port_free(host: str, port: int) -> None:
    """Bind and release the port before anything slow happens, so "in use" is the first
    thing a user hears, not the last after a minute of loading."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise click.ClickException(f"cannot listen on {host!r}: {exc.strerror}; pass an IP "
                                   "address or a resolvable name to --bind") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise click.ClickException(
                    f"port {port} on {host} is already in use (another `atlas serve`?); "
                    f"stop it or pick a free port with --port") from None
            raise click.ClickException(f"cannot listen on {host}:{port}: "
                                       f"{exc.strerror or exc}") from None


def _read_step_costs(path: Path | None) -> dict[int, list[float]] | None:
    """--spec-step-costs: the "step_cost" object of a bench_spec JSON record, as the draft
    policy's table; a file that is not one is a usage error naming it."""
    if path is None:
        return None
    import json

    from atlas.engine.speculative import step_cost_table
    try:
        return step_cost_table(json.loads(path.read_text())["step_cost"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise click.UsageError(f"--spec-step-costs {path}: not a bench_spec record with a "
                               f"step_cost table ({type(exc).__name__}: {exc})") from None


def _check_options(p: dict) -> None:
    source = click.get_current_context().get_parameter_source
    if (p["max_num_seqs"] is not None and p["max_batch_size"] is not None
            and p["max_num_seqs"] > p["max_batch_size"]):
        raise click.UsageError("--max-num-seqs may not exceed --max-batch-size (the batch the "
                               "model is sized for)")
    if (p["max_mixed_step_tokens"] is not None
            and p["max_mixed_step_tokens"] > p["max_prefill_tokens"]):
        raise click.UsageError("--max-mixed-step-tokens may not exceed --max-prefill-tokens "
                               "(the step buffers are sized for the latter)")
    if (p["scheduling_policy"] != "slai"
            and source("tbt_deadline_ms") == click.core.ParameterSource.COMMANDLINE):
        raise click.UsageError("--tbt-deadline-ms applies only to --scheduling-policy slai")
    if (p["speculative"] is None
            and source("num_draft_tokens") == click.core.ParameterSource.COMMANDLINE):
        raise click.UsageError("--num-draft-tokens applies only with --speculative")
    if p["speculative"] is None and p["spec_step_costs"] is not None:
        raise click.UsageError("--spec-step-costs applies only with --speculative")
    has_tokens = bool(p["auth_token"]) or p["auth_tokens_file"] is not None
    if p["require_auth"] and not has_tokens:
        raise click.UsageError("--require-auth needs --auth-token or --auth-tokens-file")
    if has_tokens and not p["require_auth"]:
        raise click.UsageError("--auth-token/--auth-tokens-file take effect only with "
                               "--require-auth")
    if p["disable_thinking"] and p["max_thinking_budget"] is not None:
        raise click.UsageError("--max-thinking-budget has no effect with --disable-thinking")


@click.command("serve")
@click.argument("model", required=False)
@click.option("--model-from-path", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Serve the model directory at this path.")
@click.option("--backend", type=click.Choice(["auto", "cuda", "host"]), default="auto",
              show_default=True, help="auto picks CUDA when a GPU is present.")
@click.option("--port", type=click.IntRange(1, 65535), default=8888, show_default=True)
@click.option("--bind", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback exposes the server.")
@click.option("--max-seq-len", type=click.IntRange(min=16), default=4096, show_default=True,
              help="Tokens per sequence, prompt and completion together.")
@click.option("--max-batch-size", type=click.IntRange(min=1), default=None,
              help="Largest decode batch the model is sized for (default: 256 on CUDA, fewer "
              "when a hybrid model's recurrent state would take over a quarter of the memory "
              "left after the weights; 8 on the CPU reference backend).")
@click.option("--max-num-seqs", type=click.IntRange(min=1), default=None,
              help="Sequences running at once (default: the batch the model is sized for).")
@click.option("--max-prefill-tokens", type=click.IntRange(min=16), default=2048,
              show_default=True, help="Tokens per step (prompt chunks plus decodes) while "
              "no sequence decodes; longer prompts are chunked. Larger cuts time to first "
              "token; the step buffers are sized for it.")
@click.option("--max-mixed-step-tokens", type=click.IntRange(min=16), default=None,
              help="Tokens per step while any sequence decodes (its decode tokens plus prompt "
              "chunks; at most --max-prefill-tokens). Bounds the inter-token latency of "
              "running sequences while prompts are prefilled: on an H200, Qwen3-8B prefills "
              "~35k tok/s, so 1,024 tokens is ~30 ms a step.  [default: 1024, or "
              "--max-prefill-tokens if smaller]")
@click.option("--gpu-memory-utilization", type=click.FloatRange(0.0, 1.0, min_open=True),
              default=0.9, show_default=True, help="Fraction of GPU memory for weights + KV.")
@click.option("--scheduling-policy", type=click.Choice(["fifo", "slai", "priority"]),
              default="fifo", show_default=True,
              help="Who goes first: arrival (fifo), least slack to the time-between-tokens "
              "deadline (slai), or the requests' `priority` field, lower first (priority).")
@click.option("--tbt-deadline-ms", type=click.FloatRange(0.0, min_open=True), default=100.0,
              show_default=True, help="SLAI time-between-tokens deadline.")
@click.option("--no-async-scheduling", is_flag=True,
              help="Commit every step before planning the next (default: the host plans and "
              "launches step N+1 while the GPU runs step N, and commits N one step behind).")
@click.option("--no-prefix-caching", is_flag=True,
              help="Recompute every prompt instead of reusing cached KV blocks of its prefix.")
@click.option("--ssm-cache-slots", type=click.IntRange(min=0), default=16, show_default=True,
              help="Hybrid models: recurrent-state snapshots kept for the prefix cache (each "
              "the size of one sequence's state; 0 turns their prefix cache off).")
@click.option("--speculative", type=click.Choice(["ngram", "mtp"]), default=None,
              help="Speculative decoding: ngram drafts from the sequence's own tokens, mtp "
              "from the checkpoint's multi-token-prediction head (Qwen3.5 / Qwen3-Next).")
@click.option("--num-draft-tokens", type=click.IntRange(1, 16), default=3, show_default=True,
              help="Tokens drafted per step with --speculative.")
@click.option("--spec-step-costs", type=click.Path(exists=True, dir_okay=False,
                                                   path_type=Path), default=None,
              help="A tools/gpu/bench_spec.py JSON record of this model on this GPU: each "
              "step then drafts the K (up to --num-draft-tokens, 0 = none) that maximizes "
              "expected tokens per step time at its batch size and the measured acceptance.")
@click.option("--tool-call-parser", type=click.Choice([*PARSERS, HARMONY, "none"]),
              default=None, help="Override the model's tool-call format (MODEL.toml); "
              "harmony is gpt-oss's channel format, which carries the reasoning too.")
@click.option("--chat-template", "chat_template", type=click.Path(
    exists=True, dir_okay=False, path_type=Path), help="A jinja file replacing the model's.")
@click.option("--disable-thinking", is_flag=True, help="Render prompts without thinking and "
              "strip any reasoning from responses.")
@click.option("--max-thinking-budget", type=click.IntRange(min=1), default=None,
              help="Cap on reasoning tokens per response.")
@click.option("--require-auth", is_flag=True, help="Require a bearer token on POST routes.")
@click.option("--auth-token", multiple=True, help="An accepted token (repeatable).")
@click.option("--auth-tokens-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Accepted tokens, one per line.")
@click.option("--request-timeout", type=click.FloatRange(0.0, min_open=True), default=None,
              help="Seconds a request may run before it is ended (finish_reason length).")
@click.option("--no-fast-load", is_flag=True,
              help="Read weights through mmap instead of the O_DIRECT reader thread.")
@click.option("--header-timeout", type=click.FloatRange(0.0, min_open=True), default=15.0,
              show_default=True, help="Seconds a client may take to send a request's "
              "headers (from its first byte); then 408 and the connection closes.")
@click.option("--keepalive-timeout", type=click.FloatRange(0.0, min_open=True), default=30.0,
              show_default=True, help="Seconds an idle connection (no request in flight, "
              "or none sent yet) stays open.")
@click.option("--max-connections", type=click.IntRange(min=1), default=512,
              show_default=True, help="Open connections at once; one more is answered 503 "
              "and closed.")
@click.option("--allow-special-tokens-in-content", is_flag=True,
              help="Tokenize special-token strings (<|im_end|>...) in user, system and tool "
              "text as control tokens. Off: they are plain text, so users cannot forge "
              "role boundaries.")
@click.option("--allowed-origins", default=None, metavar="ORIGINS",
              help="Browser origins allowed to call the API (CORS), comma-separated "
              "(https://app.example.com) or * for any; off by default, so a web page the "
              "user visits cannot read this server's answers.")
@click.option("--store-path", default=None, metavar="PATH",
              help="SQLite file of stored /v1/responses (survives restarts); \":memory:\" "
              "keeps them in the process only.  [default: $ATLAS_HOME/responses.sqlite3]")
@click.option("--store-max-entries", type=click.IntRange(min=1), default=10_000,
              show_default=True, help="Stored responses kept (oldest deleted first).")
@click.option("--store-max-age-days", type=click.FloatRange(0.0, min_open=True), default=30.0,
              show_default=True, help="Stored responses older than this are deleted.")
@click.option("--synthetic-weights", "synthetic_seed", type=click.IntRange(min=0), default=None,
              metavar="SEED", help="Benchmarks only: generate random weights on the device "
              "from SEED instead of reading them (the model directory needs only config.json "
              "and the tokenizer files; the answers are gibberish).")
@kv_cache_flags
@parallel_flags
def command(**p) -> None:
    """Serve MODEL (a directory, an Atlas model name, or a name in the Hugging Face cache)
    over the OpenAI and Anthropic APIs. Without MODEL, serves the embedded default model.

    \b
    Sampling fields a request leaves out come from the model's generation_config.json,
    else its MODEL.toml [presets.default], else greedy (temperature 0): the same defaults
    `atlas generate` uses. The startup log shows which applied.
    """
    _check_options(p)
    p["spec_step_cost"] = _read_step_costs(p["spec_step_costs"])
    parallel = ParallelOptions.from_cli(p)
    _check_port_free(p["bind"], p["port"])
    _configure_logging()
    import structlog
    log = structlog.get_logger("atlas.serve")
    if not _is_loopback(p["bind"]):
        log.warning("binding to a non-loopback address exposes the server to the network",
                    bind=p["bind"], require_auth=p["require_auth"])
    from atlas.runtime.backend_select import resolve_kind
    from atlas.runtime.model_paths import atlas_home
    from atlas.server.app_assets import load_assets, read_tokens_file
    from atlas.server.auth import TokenAuth
    from atlas.server.context import (DEFAULT_MAX_BODY_BYTES, ConnectionLimits, ServerContext,
                                      ServerOptions)
    from atlas.server.cors import CorsPolicy
    from atlas.server.metrics import ServerMetrics
    from atlas.server.rate_limit import RateLimits
    from atlas_cli.model_setup import describe, request_defaults

    model_dir = _resolve_model_dir(p["model"], p["model_from_path"])
    if parallel.world().rank != 0:  # a multi-host worker: rank 0 serves
        run_worker(model_dir, parallel.world(), _load_kwargs(resolve_kind(p["backend"]), p))
        return
    try:
        backend = resolve_kind(p["backend"])
        assets = load_assets(model_dir, chat_template_file=p["chat_template"])
        limits_env = RateLimits.from_env(os.environ)
        max_body = int(os.environ.get("ATLAS_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if max_body <= 0:
        raise click.ClickException("ATLAS_MAX_BODY_BYTES must be positive")
    parser = p["tool_call_parser"] or assets.behavior.get("tool_parser") or "hermes"
    tokens = list(p["auth_token"])
    if p["auth_tokens_file"] is not None:
        tokens += read_tokens_file(p["auth_tokens_file"])
    sampling, sampling_source = request_defaults(model_dir, assets.config, backend)
    try:
        cors = CorsPolicy.parse(p["allowed_origins"])
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    options = ServerOptions(
        model_name=assets.name, tool_parser=None if parser == "none" else parser,
        request_timeout_s=p["request_timeout"], disable_thinking=p["disable_thinking"],
        max_thinking_budget=p["max_thinking_budget"], max_body_bytes=max_body,
        rate_limits=limits_env, default_sampling=sampling,
        connection_limits=ConnectionLimits(header_timeout_s=p["header_timeout"],
                                           keepalive_timeout_s=p["keepalive_timeout"],
                                           max_connections=p["max_connections"]),
        allow_special_tokens_in_content=p["allow_special_tokens_in_content"],
        store_path=p["store_path"] or str(atlas_home() / "responses.sqlite3"),
        store_max_entries=p["store_max_entries"],
        store_max_age_s=p["store_max_age_days"] * 86400.0, cors=cors)
    try:
        auth = TokenAuth(tokens) if p["require_auth"] else None
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    ctx = ServerContext(options, assets.tokenizer, ServerMetrics(assets.name), auth=auth)
    log.info("loading model", model=str(model_dir), backend=backend, tool_parser=parser,
             request_defaults=f"{describe(sampling)} ({sampling_source})")
    try:
        asyncio.run(_serve(ctx, model_dir, backend, p, parallel))
    except KeyboardInterrupt:
        pass


def _load_kwargs(backend: str, p: dict) -> dict:
    """What every rank loads with (rank 0 adds its progress display)."""
    return dict(backend=backend, max_seq_len=p["max_seq_len"],
                max_batch_size=p["max_batch_size"], max_prefill_tokens=p["max_prefill_tokens"],
                gpu_memory_utilization=p["gpu_memory_utilization"],
                fast_load=not p["no_fast_load"], synthetic_seed=p["synthetic_seed"],
                num_draft_tokens=p["num_draft_tokens"] if p["speculative"] else 0,
                mtp=p["speculative"] == "mtp",
                ssm_cache_slots=0 if p["no_prefix_caching"] else p["ssm_cache_slots"],
                **kv_load_kwargs(p), **ParallelOptions.from_cli(p).load_kwargs())


async def _serve(ctx, model_dir: Path, backend: str, p: dict,
                 parallel: ParallelOptions) -> None:
    import structlog

    from atlas.engine.scheduler import DEFAULT_MIXED_STEP_TOKENS
    from atlas.server.app_serve import EngineLimits, serve, shutdown

    log = structlog.get_logger("atlas.serve")
    world = parallel.world()
    workers = WorkerWatch.spawn(model_dir, parallel, _load_kwargs(backend, p))
    fatal: list[str] = []
    made: list = []  # the executor, once loaded: closing it tells the workers to exit

    def load():
        from atlas.model.load import load_runner
        from atlas.model.parallel_executor import TensorParallelExecutor
        from atlas_cli.load_progress import LoadProgress, step
        runner = load_runner(model_dir, world=world, progress=LoadProgress(), step=step,
                             **_load_kwargs(backend, p))
        kv = getattr(runner, "kv", None)  # a ModelRunner's pool; test executors have none
        if kv is not None:
            print(kv.describe(), file=sys.stderr, flush=True)
        executor = (TensorParallelExecutor(runner, on_failure=group_failed)
                    if world.world_size > 1 else runner)
        made.append(executor)
        return executor

    def ready() -> None:
        print(f"Listening on {p['bind']}:{p['port']}", flush=True)

    limits = EngineLimits(max_num_seqs=p["max_num_seqs"] or p["max_batch_size"],
                          max_seq_len=p["max_seq_len"],
                          max_prefill_tokens=p["max_prefill_tokens"],
                          max_mixed_step_tokens=p["max_mixed_step_tokens"]
                          or DEFAULT_MIXED_STEP_TOKENS,
                          scheduling_policy=p["scheduling_policy"],
                          tbt_deadline_ms=p["tbt_deadline_ms"],
                          prefix_caching=not p["no_prefix_caching"],
                          async_scheduling=not p["no_async_scheduling"],
                          speculative=p["speculative"], num_draft_tokens=p["num_draft_tokens"],
                          spec_step_cost=p["spec_step_cost"])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def group_failed(message: str) -> None:  # any thread: stop serving, exit 1 with it
        log.error(message)
        fatal.append(message)
        loop.call_soon_threadsafe(stop.set)

    def worker_died(message: str) -> None:  # on the watch thread
        if not made:  # rank 0 may be blocked in the rendezvous: nothing to shut down yet
            print(f"Error: {message}", file=sys.stderr, flush=True)
            os._exit(1)
        group_failed(message)

    workers.watch(worker_died)
    try:
        try:
            runner = await serve(ctx, p["bind"], p["port"], load, limits, ready,
                                 serving_process=True)
        except OSError as exc:
            if exc.errno in _BIND_ERRORS:  # taken since the check at startup
                raise click.ClickException(f"cannot serve on {p['bind']}:{p['port']}: "
                                           f"{exc.strerror}") from None
            raise click.ClickException(f"could not load {model_dir}: {exc}") from exc
        try:
            await stop.wait()
        finally:
            await shutdown(ctx, runner)
            close = getattr(made[0], "close", None)
            if close is not None and not fatal:
                close()
        if fatal:  # a broken group: name the dead worker if one died
            fatal.insert(0, workers.death_report() or fatal[0])
    finally:
        workers.stop(timeout=5.0)
    if fatal:
        raise click.ClickException(fatal[0])
