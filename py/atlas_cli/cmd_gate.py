"""`atlas gate`: which benchmark gates a change re-opens, and recording gate runs.

    atlas gate list                      the gates, their suites, metrics and exclusions
    atlas gate check [--base REV]        each gate VALID or OPEN with the reason; exit 1 when
                     [--advisory]        a required gate is open (--advisory: always 0)
    atlas gate record GATE --url URL --model NAME [--checkpoint C] [--param k=v ...]
                                         run the gate's suite, write .benchmarks/<gate>/...
    atlas gate thresholds [--quiet]      validate every BENCH.toml; exit 1 on any violation
    atlas gate explain [--base REV]      advisory summary of a change (decides nothing)

Exit codes of `record`: 0 pass or unmeasured, 1 the run could not be made, 2 a threshold
failed (the record is still written: a failing run is a fact worth keeping).
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import click

import atlas
from atlas.gate import check as gate_check
from atlas.gate import git, store, workspace
from atlas.gate.bench_toml import validate
from atlas.gate.coverage import EXCLUSIONS
from atlas.gate.gates import GATES, gate_by_name
from atlas.gate.records import RecordError, Verdict
from atlas.kernels.sources import closure_paths
from atlas.kernels.tree import KernelTreeError, list_targets

EXIT_BROKEN = 1
EXIT_VERDICT = 2


@click.group("gate")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Repository root (default: the git repository around the current directory).")
@click.pass_context
def command(ctx: click.Context, root: Path | None) -> None:
    """Benchmark gates: which ones a change re-opens, and recording their runs."""
    ctx.obj = root


def _root(ctx: click.Context) -> Path:
    try:
        return (ctx.obj or git.repo_root(Path.cwd())).resolve()
    except git.GitError as exc:
        raise click.ClickException(f"not inside a git repository: {exc}") from None


@command.command("list")
def list_cmd() -> None:
    """The gates: suite, scored metrics, required or excused, exclusions."""
    for gate in GATES:
        status = "required" if gate.required else f"not required: {gate.excuse}"
        click.echo(f"{gate.name} — {gate.description}")
        click.echo(f"  suite {gate.suite}; {status}")
        click.echo("  scores " + ", ".join(f"{m} ({b.value})" for m, b in gate.metrics.items()))
        for exclusion in EXCLUSIONS.get(gate.name, ()):
            click.echo(f"  excludes {exclusion.prefix}: {exclusion.rationale}")


@command.command("check")
@click.option("--base", default=None, metavar="REV",
              help="Judge what this branch changes (REV...HEAD plus uncommitted) instead of "
                   "everything since each gate's record.")
@click.option("--advisory", is_flag=True, help="Print the verdict but always exit 0 (CI "
                                               "has no GPU to discharge a gate with).")
@click.pass_context
def check_cmd(ctx: click.Context, base: str | None, advisory: bool) -> None:
    """Each gate VALID or OPEN, with the reason."""
    root = _root(ctx)
    try:
        inputs = workspace.gather(root, GATES, base)
    except (git.GitError, RecordError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(0 if advisory else EXIT_BROKEN)
    statuses = gate_check.evaluate_all(inputs, workspace.closure_from_tree(root))
    for status in statuses:
        click.echo(status.line())
    blocking = [s.gate.name for s in statuses if s.blocks]
    if blocking:
        click.echo(f"{len(blocking)} required gate(s) open: {', '.join(blocking)}")
    else:
        click.echo("every required gate is valid")
    if advisory:
        click.echo("(advisory: exit status 0 whatever the verdict)")
    elif blocking:
        sys.exit(EXIT_BROKEN)


@command.command("thresholds")
@click.option("--quiet", "-q", is_flag=True, help="Print only errors and the summary.")
@click.pass_context
def thresholds_cmd(ctx: click.Context, quiet: bool) -> None:
    """Validate every kernels/<hw>/<model>/BENCH.toml and list its entries."""
    bench = validate(store.read_bench_files(_root(ctx)))
    for e in () if quiet else bench.entries:
        state = "measured" if e.measured else "unmeasured"
        default = " default" if e.default else ""
        click.echo(f"{e.gate:<18} {e.hw}/{e.model}/{e.quant} {e.checkpoint} "
                   f"[{state}{default}]")
    for error in bench.errors:
        click.echo(f"error: {error}", err=True)
    click.echo(f"{len(bench.entries)} entries, {len(bench.errors)} errors")
    if bench.errors:
        sys.exit(EXIT_BROKEN)


def _parse_params(pairs: tuple[str, ...]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--param")
        params[key] = value
    return params


@command.command("record")
@click.argument("gate_name", metavar="GATE")
@click.option("--url", default="", help="The running server to measure.")
@click.option("--model", default="", help="The served model name to request.")
@click.option("--checkpoint", default=None,
              help="BENCH.toml checkpoint to score against (default: the gate's default).")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Suite parameter override (the harness validates keys and types).")
@click.option("--targets-from", type=click.Path(exists=True, path_type=Path), default=None,
              help="Read the measured targets from PTX-set artifacts (a file or directory) "
                   "instead of the server, for gates that run with no server.")
@click.pass_context
def record_cmd(ctx: click.Context, gate_name: str, url: str, model: str,
               checkpoint: str | None, params: tuple[str, ...],
               targets_from: Path | None) -> None:
    """Run GATE's suite, score it against BENCH.toml, and write its record."""
    from atlas.gate import record, target_stamps
    from atlas.gate.verdict import MissingMetric

    root = _root(ctx)
    try:
        gate = gate_by_name(gate_name)
        if targets_from is None and not (url and model):
            raise click.UsageError("give --url and --model (the server to measure), or "
                                   "--targets-from for a gate measured with no server")
        runner = record.load_suite_runner()
        bench = validate(store.read_bench_files(root))
        stamps = (target_stamps.read_artifact_targets(targets_from) if targets_from
                  else target_stamps.fetch_server_targets(url))
        run = record.plan(gate, stamps, bench, checkpoint, _parse_params(params))
        commit, uncommitted = git.head_commit(root), git.uncommitted(root)
    except (ValueError, git.GitError, record.HarnessMissing,
            target_stamps.TargetsUnavailable) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{gate.name}: suite {gate.suite} on {', '.join(s.target.name for s in stamps)} "
               f"scored by {run.entry.source}", err=True)
    try:
        metrics = runner.run(gate.suite, url, model, run.params)
    except Exception as exc:  # the harness broke: report it as such, exit 1
        raise click.ClickException(f"suite {gate.suite} failed: "
                                   f"{type(exc).__name__}: {exc}") from exc
    try:
        result = record.make_record(run, metrics, url=url, model=model, commit=commit,
                                    uncommitted=uncommitted,
                                    now=datetime.now(timezone.utc),
                                    atlas_version=atlas.__version__)
    except MissingMetric as exc:
        raise click.ClickException(str(exc)) from None
    path = store.write_record(root, result)
    click.echo(f"{result.verdict.value.upper()} {gate.name} -> {path.relative_to(root)}")
    for failure in result.failures:
        click.echo(f"  {failure}")
    if result.verdict is Verdict.FAIL:
        sys.exit(EXIT_VERDICT)


@command.command("explain")
@click.option("--base", default="HEAD", metavar="REV", show_default=True,
              help="Summarise REV...HEAD plus uncommitted work.")
@click.pass_context
def explain_cmd(ctx: click.Context, base: str) -> None:
    """Advisory summary of a change for reviewers. It decides nothing."""
    from atlas.gate.explain import explain

    root = _root(ctx)
    try:
        changed = git.changed_on_branch(root, base)
    except git.GitError as exc:
        raise click.ClickException(str(exc)) from None
    closures: dict[str, frozenset[str]] = {}
    unresolved: dict[str, str] = {}
    try:
        targets = list_targets(root)
    except KernelTreeError as exc:
        raise click.ClickException(str(exc)) from None
    for target in targets:
        try:
            closures[target.name] = frozenset(closure_paths(root, target))
        except (KernelTreeError, OSError) as exc:
            unresolved[target.name] = str(exc)
    for line in explain(base, changed, closures, unresolved).lines():
        click.echo(line)
