"""The `vtrain` command line: a thin shell over the SDK.

Commands live in `vtrain.commands.*` and are imported only when run, so
`vtrain validate` never pays for google-cloud-aiplatform or TensorFlow. Every
:class:`~vtrain.errors.VtrainError` is printed as plain lines with its exit
code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from vtrain import __version__
from vtrain.errors import VtrainError

# name -> "module:attribute". A command whose module is not installed is hidden.
COMMANDS: dict[str, str] = {
    "validate": "vtrain.commands.dryrun:validate",
    "render": "vtrain.commands.dryrun:render",
    "estimate": "vtrain.commands.estimate:estimate",
    "init": "vtrain.commands.trainer:init",
    "package": "vtrain.commands.package:package",
    "local": "vtrain.commands.local:local",
    "submit": "vtrain.commands.vertex:submit",
    "status": "vtrain.commands.vertex:status",
    "logs": "vtrain.commands.vertex:logs",
    "cancel": "vtrain.commands.vertex:cancel",
    "list": "vtrain.commands.vertex:list_jobs",
    "emulator": "vtrain.commands.emulator:emulator",
    "schema": "vtrain.commands.schema:schema",
    "diff": "vtrain.commands.diff:diff",
    "doctor": "vtrain.commands.doctor:doctor",
}


def _available(name: str) -> bool:
    module = COMMANDS[name].split(":", 1)[0]
    return importlib.util.find_spec(module) is not None


class LazyGroup(click.Group):
    """A click group that imports each command's module only when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _available(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or not _available(cmd_name):
            return None
        module_name, attr = COMMANDS[cmd_name].split(":", 1)
        return getattr(importlib.import_module(module_name), attr)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except VtrainError as err:
            err.show()
            ctx.exit(err.exit_code)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vtrain")
def cli() -> None:
    """vtrain: one YAML file to a distributed TensorFlow job on Vertex AI.

    Validate and render the exact CustomJob request offline, run it locally as
    real processes, then submit it to Vertex AI.
    """


def main() -> None:
    cli(prog_name="vtrain")
