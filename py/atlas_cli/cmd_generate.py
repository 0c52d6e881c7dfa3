"""`atlas generate`: one prompt through the engine core (`LLMEngine`, the loop the server
runs too), printed to stdout (no server)."""

from __future__ import annotations

import sys
import time

import click

from atlas_cli.tp_launch import ParallelOptions, WorkerWatch, parallel_flags, run_worker


@click.command("generate")
@click.option("--model", "model", default=None,
              help="Model directory or Hugging Face cache name (default: the embedded model).")
@click.option("--prompt", required=True, help="The user message (or raw text with --raw).")
@click.option("--raw", is_flag=True, help="Feed the prompt as-is, without the chat template.")
@click.option("--backend", type=click.Choice(["auto", "cuda", "host"]), default="auto",
              show_default=True)
@click.option("--max-tokens", type=click.IntRange(1), default=128, show_default=True)
@click.option("--temperature", type=click.FloatRange(0.0), default=None,
              help="Default: the model's, as `atlas serve` gives requests (see its --help).")
@click.option("--top-p", type=click.FloatRange(0.0, 1.0, min_open=True), default=None)
@click.option("--top-k", type=click.IntRange(0), default=None)
@click.option("--seed", type=int, default=None)
@click.option("--stop", multiple=True, help="Stop string (repeatable).")
@click.option("--max-seq-len", type=click.IntRange(16), default=None)
@click.option("--max-prefill-tokens", type=click.IntRange(1), default=2048, show_default=True)
@click.option("--no-fast-load", is_flag=True, help="Read weights through mmap.")
@parallel_flags
def command(model: str | None, prompt: str, raw: bool, backend: str, max_tokens: int,
            temperature: float | None, top_p: float | None, top_k: int | None,
            seed: int | None, stop: tuple[str, ...], max_seq_len: int | None,
            max_prefill_tokens: int, no_fast_load: bool, **parallel: object) -> None:
    """Generate a completion for PROMPT with the engine directly. Sampling options left
    out take the model's defaults, the same ones `atlas serve` gives requests."""
    from dataclasses import replace

    from atlas.comm import CommError
    from atlas.model.load import load_runner
    from atlas.model.parallel_executor import TensorParallelExecutor
    from atlas.server.app_assets import load_assets
    from atlas_cli.load_progress import LoadProgress, step
    from atlas_cli.model_setup import model_directory, request_defaults

    model_dir = model_directory(model)
    assets = load_assets(model_dir)
    tok = assets.tokenizer
    text = prompt if raw else tok.chat_template(False).render(
        [{"role": "user", "content": prompt}], add_generation_prompt=True)
    ids = tok.encode(text)
    given = {"temperature": temperature, "top_p": top_p, "top_k": top_k, "seed": seed}
    params = replace(request_defaults(model_dir, assets.config, backend)[0],
                     **{k: v for k, v in given.items() if v is not None})
    params.validate()
    opts = ParallelOptions.from_cli(parallel)
    world = opts.world()
    load_kwargs = dict(backend=backend, max_seq_len=max_seq_len, max_batch_size=1,
                       max_prefill_tokens=max_prefill_tokens, fast_load=not no_fast_load,
                       **opts.load_kwargs())
    if world.rank != 0:  # a multi-host worker: rank 0 runs the engine and prints
        run_worker(model_dir, world, load_kwargs)
        return
    workers = WorkerWatch.spawn(model_dir, opts, load_kwargs)
    try:
        runner = load_runner(model_dir, world=world, progress=LoadProgress(), step=step,
                             **load_kwargs)
        executor = TensorParallelExecutor(runner) if world.world_size > 1 else runner
        try:
            _generate(executor, tok, ids, params, max_tokens, stop, max_prefill_tokens)
        finally:
            if isinstance(executor, TensorParallelExecutor):
                executor.close()
    except (CommError, RuntimeError) as exc:
        cause = exc if isinstance(exc, CommError) else exc.__cause__
        if not isinstance(cause, CommError):
            raise
        raise click.ClickException(f"parallel group failed: {cause}") from None
    finally:
        workers.stop()


def _generate(runner, tok, ids: list[int], params, max_tokens: int, stop: tuple[str, ...],
              max_prefill_tokens: int) -> None:
    """Run the request through the engine core and print it (stdout) and its stats."""
    from atlas.engine.llm_engine import LLMEngine
    from atlas.engine.request import EngineRequest

    def stop_check(_: int, out: list[int]) -> bool:
        return bool(stop) and any(s in tok.decode(out) for s in stop)

    t0 = time.perf_counter()
    engine = LLMEngine(runner, max_prefill_tokens=max_prefill_tokens)
    try:
        (result,) = engine.generate([EngineRequest(ids, params, max_tokens, tok.eos_token_ids)],
                                    stop_check)
    except ValueError as exc:  # the prompt does not fit the context
        raise click.ClickException(str(exc)) from None
    elapsed = time.perf_counter() - t0
    out = tok.decode(result.token_ids)
    for s in stop:
        if s in out:
            out = out[:out.index(s)]
    click.echo(out)
    click.echo(f"[{runner.info.backend_kind}] {len(ids)} prompt + {len(result.token_ids)} "
               f"generated tokens in {elapsed:.2f}s, finish={result.finish_reason}", err=True)
    sys.stdout.flush()
