"""`atlas benchmark`: run HTTP benchmark suites against a serving endpoint, keep every run.

    atlas benchmark list [ID]                       suites, or one suite's parameters
    atlas benchmark run ID --url URL --model NAME   run a suite against a running server
              [--param k=v ...] [--format table|json] [--no-fail-on-verdict]
    atlas benchmark history [--id ID] [--run RUN] [--limit N] [--format table|json]
    atlas benchmark plot RUN [--out FILE]           SVG of a sweep: tok/s and TTFT vs concurrency

`run` neither loads a model nor touches a GPU: it measures whatever answers at --url
(default $ATLAS_BENCH_URL, else http://127.0.0.1:8888). Results go to stdout, progress to
stderr, so `--format json > run.json` is a clean file. Every run is stored under
$ATLAS_HOME/runs/<suite>/<run-id>.json (ATLAS_HOME defaults to ~/.atlas).

Exit codes: 0 ok; 1 the harness broke (no server, bad parameter, failed request, usage
error); 2 a threshold in the suite's [verdict] failed (0 with --no-fail-on-verdict).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    from atlas.bench.errors import BenchError

# atlas.bench (aiohttp, the runner) is imported inside the commands so that `--help` is fast
API_KEY_ENV = "ATLAS_BENCH_API_KEY"   # == atlas.bench.API_KEY_ENV (a unit test checks)
EXIT_BROKEN = 1
EXIT_VERDICT = 2
DEFAULT_URL = "http://127.0.0.1:8888"


class _UsageErrorsBreak(click.Group):
    """click exits 2 on a usage error; here 2 means "a threshold failed", so a usage error
    (a missing option, a bad value) exits 1 like any other way the harness can break."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            exc.exit_code = EXIT_BROKEN
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            exc.exit_code = EXIT_BROKEN
            raise


def _broken(exc: BenchError) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(EXIT_BROKEN)


def _json(value: Any) -> str:
    import orjson
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


@click.group("benchmark", cls=_UsageErrorsBreak)
def command() -> None:
    """HTTP benchmark suites against a running server, and their stored runs.

    Exit codes: 0 ok; 1 the harness broke (no server, bad parameter, failed request);
    2 a suite threshold failed. Runs are stored under $ATLAS_HOME/runs (default ~/.atlas).
    """


@command.command("list")
@click.argument("suite_id", metavar="[ID]", required=False)
def list_cmd(suite_id: str | None) -> None:
    """The suites, or one suite's parameters, defaults and thresholds."""
    from atlas.bench.errors import BenchError
    from atlas.bench.report import suite_text, suites_text
    from atlas.bench.suites import find_suite, load_suites
    try:
        text = suite_text(find_suite(suite_id)) if suite_id else suites_text(load_suites())
    except BenchError as exc:
        _broken(exc)
    click.echo(text)


@command.command("run")
@click.argument("suite_id", metavar="ID")
@click.option("--url", envvar="ATLAS_BENCH_URL", default=DEFAULT_URL, show_default=True,
              help="The server to measure (env ATLAS_BENCH_URL).")
@click.option("--model", required=True, help="The served model name to request.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Override a suite parameter (see `atlas benchmark list ID`); repeatable.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="What to print on stdout.")
@click.option("--no-fail-on-verdict", is_flag=True,
              help="Exit 0 even when a threshold fails (collecting numbers, not gating).")
@click.option("--api-key", envvar=API_KEY_ENV, default=None,
              help=f"Bearer token for the server (env {API_KEY_ENV}).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=600.0,
              show_default=True, help="Seconds one request may take.")
def run_cmd(suite_id: str, url: str, model: str, params: tuple[str, ...], fmt: str,
            no_fail_on_verdict: bool, api_key: str | None, timeout_s: float) -> None:
    """Run suite ID against the server at --url and store the run."""
    from atlas.bench.errors import BenchError
    from atlas.bench.params import parse_assignments
    from atlas.bench.progress import ProgressBar
    from atlas.bench.report import run_text
    from atlas.bench.runner import run_suite
    from atlas.bench.store import RunStore
    from atlas.bench.suites import find_suite
    from atlas.bench.verdict import FAIL
    try:
        suite = find_suite(suite_id)
        run = run_suite(suite, url, model, parse_assignments(params),
                        progress=ProgressBar(sys.stderr), api_key=api_key,
                        timeout_s=timeout_s)
        path = RunStore().save(run)
    except BenchError as exc:
        _broken(exc)
    except OSError as exc:  # the run happened, but the store is not writable
        _broken(BenchError(f"cannot store the run: {exc}"))
    click.echo(_json(run) if fmt == "json" else run_text(run))
    click.echo(f"stored {run['run_id']} -> {path}", err=True)
    if run["verdict"]["status"] == FAIL and not no_fail_on_verdict:
        sys.exit(EXIT_VERDICT)


@command.command("history")
@click.option("--id", "suite_id", default=None, metavar="ID", help="Only runs of this suite.")
@click.option("--run", "run_id", default=None, metavar="RUN",
              help="One run in full: every parameter, metric and request.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def history_cmd(suite_id: str | None, run_id: str | None, limit: int, fmt: str) -> None:
    """Stored runs, newest first (or one run with --run)."""
    from atlas.bench.errors import BenchError
    from atlas.bench.report import history_text, run_text
    from atlas.bench.store import RunStore
    store = RunStore()
    try:
        if run_id is not None:
            run = store.load(run_id)
            click.echo(_json(run) if fmt == "json" else run_text(run))
            return
        runs = store.history(suite_id, limit)
    except BenchError as exc:
        _broken(exc)
    if fmt == "json":
        click.echo(_json([{k: v for k, v in r.items() if k != "requests"} for r in runs]))
    else:
        click.echo(history_text(runs))


@command.command("plot")
@click.argument("run_id", metavar="RUN")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SVG file to write (default: ./<RUN>.svg).")
def plot_cmd(run_id: str, out: Path | None) -> None:
    """Chart a stored sweep: tok/s and TTFT against concurrency, as SVG."""
    from atlas.bench.errors import BenchError
    from atlas.bench.plot import sweep_svg
    from atlas.bench.store import RunStore
    try:
        svg = sweep_svg(RunStore().load(run_id))
    except BenchError as exc:
        _broken(exc)
    target = out or Path(f"{run_id}.svg")
    try:
        target.write_text(svg, encoding="utf-8")
    except OSError as exc:
        _broken(BenchError(f"cannot write {target}: {exc}"))
    click.echo(str(target))
