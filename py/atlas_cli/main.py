"""Entry point of the `atlas` command.

Every module `atlas_cli/cmd_<name>.py` exports a click command or group named `command`;
they are registered here by discovery, so adding a subcommand touches one file.
"""

from __future__ import annotations

import importlib
import pkgutil

import click

import atlas

import atlas_cli


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(atlas.__version__, prog_name="atlas")
def cli() -> None:
    """Atlas: an OpenAI- and Anthropic-compatible LLM inference server."""


def _register() -> None:
    for info in sorted(pkgutil.iter_modules(atlas_cli.__path__), key=lambda i: i.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"atlas_cli.{info.name}")
            cli.add_command(module.command)


_register()


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
