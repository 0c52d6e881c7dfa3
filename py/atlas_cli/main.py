"""Entry point of the `atlas` command.

Commands load lazily: `COMMANDS` maps each name to its module (`atlas_cli/cmd_<name>.py`,
which exports a click command or group named `command`) and a one-line summary, so
`atlas --help` imports click and nothing else, and `atlas serve --help` imports only the
serve module. Adding a subcommand is one line in the table.

Expected failures (a missing model, an invalid config.json, a checkpoint that does not
match its config, a port in use) end as a few lines naming the file or tensor and the fix,
exit code 1, no traceback; `atlas --debug ...` (or ATLAS_DEBUG=1) shows the traceback.
"""

from __future__ import annotations

import importlib
import sys
import traceback

import click

import atlas

COMMANDS: dict[str, tuple[str, str]] = {
    "benchmark": ("atlas_cli.cmd_benchmark", "Run and inspect HTTP benchmarks."),
    "gate": ("atlas_cli.cmd_gate", "The merge lattice: which benchmark gates a change "
                                   "re-opens."),
    "generate": ("atlas_cli.cmd_generate", "Generate a completion for PROMPT with the engine "
                                           "directly (no server)."),
    "image": ("atlas_cli.cmd_image", "Build a hermetic OCI image of Atlas (no daemon)."),
    "kernels": ("atlas_cli.cmd_kernels", "Build and list the PTX sets of the kernel tree."),
    "models": ("atlas_cli.cmd_models", "Manage local models (the embedded default model and "
                                       "imported GGUFs)."),
    "serve": ("atlas_cli.cmd_serve", "Serve a model over the OpenAI and Anthropic APIs."),
}

#: exception classes (module, name) whose message is the whole story for a user; matched
#: by name along the MRO so that reporting them imports nothing
EXPECTED_ERRORS = frozenset({
    ("atlas.runtime.model_paths", "ModelNotFoundError"),
    ("atlas.runtime.model_paths", "ModelFilesError"),
    ("atlas.runtime.weights", "WeightError"),
    ("atlas.runtime.gguf", "GGUFError"),
    ("atlas.runtime.kv_cache", "KvCacheBudgetError"),
    ("atlas.core.config", "ConfigError"),
    ("atlas.model.load", "StartupError"),
    ("atlas.model.loaders.dense", "UnsupportedModelError"),
    ("atlas.model.rope", "RopeConfigError"),
    ("atlas.kernels.registry", "KernelsNotFound"),
    ("atlas.kernels.tree", "KernelTreeError"),
    ("atlas.kernels.compiler", "CompilerError"),
})
MAX_ERROR_LINES = 5


def is_expected(exc: BaseException) -> bool:
    return any((c.__module__, c.__name__) in EXPECTED_ERRORS for c in type(exc).__mro__)


def short_message(text: str) -> str:
    """At most MAX_ERROR_LINES lines; the rest is counted, not shown."""
    lines = text.strip().splitlines() or [""]
    if len(lines) <= MAX_ERROR_LINES:
        return "\n".join(lines)
    hidden = len(lines) - MAX_ERROR_LINES + 1
    return "\n".join(lines[:MAX_ERROR_LINES - 1] + [f"  ... {hidden} more lines"])


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command runs or is asked
    for its help, and lists commands from the table's summaries."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return importlib.import_module(COMMANDS[name][0]).command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in sorted(COMMANDS)])


_options = {"debug": False}


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(atlas.__version__, prog_name="atlas")
@click.option("--debug", is_flag=True, envvar="ATLAS_DEBUG",
              help="Show the traceback of any failure.")
def cli(debug: bool) -> None:
    """Atlas: an OpenAI- and Anthropic-compatible LLM inference server."""
    _options["debug"] = debug


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; an expected failure is a short `Error:` and exit 1 (no traceback)."""
    try:
        cli.main(args=argv, prog_name="atlas", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        if _options["debug"] and exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__)
        exc.message = short_message(exc.message)
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:
        if not is_expected(exc) or _options["debug"]:
            raise
        click.echo(f"Error: {short_message(str(exc))}", err=True)
        click.echo("(run `atlas --debug ...` for the traceback)", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
