"""The `vtrain` command line: a thin shell over the SDK.

Commands live in `vtrain.commands.*` and are imported only when run, so
`vtrain validate` never pays for google-cloud-aiplatform or TensorFlow. Every
:class:`~vtrain.errors.VtrainError` is printed as plain lines with its exit
code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import signal
import sys

import click

from vtrain import __version__
from vtrain.errors import VtrainError

# name -> "module:attribute". A command whose module is not installed is hidden.
COMMANDS: dict[str, str] = {
    "validate": "vtrain.commands.validate:validate",
    "render": "vtrain.commands.render:render",
    "estimate": "vtrain.commands.estimate:estimate",
    "init": "vtrain.commands.trainer:init",
    "package": "vtrain.commands.package:package",
    "local": "vtrain.commands.local:local",
    "replay": "vtrain.commands.replay:replay",
    "submit": "vtrain.commands.submit:submit",
    "status": "vtrain.commands.jobs:status",
    "logs": "vtrain.commands.jobs:logs",
    "cancel": "vtrain.commands.jobs:cancel",
    "list": "vtrain.commands.jobs:list_jobs",
    "emulator": "vtrain.commands.emulator:emulator",
    "cache": "vtrain.commands.cache:cache",
    "schema": "vtrain.commands.schema:schema",
    "catalog": "vtrain.commands.catalog:catalog",
    "diff": "vtrain.commands.diff:diff",
    "doctor": "vtrain.commands.doctor:doctor",
    "timeline": "vtrain.commands.timeline:timeline",
    "model": "vtrain.commands.model:model",
}

#: Commands that build, install or upload: SIGTERM cleans up as Ctrl-C does (temporary files
#: removed), no process they started outlives them, and an interruption exits 130 / 143.
CLEAN_EXIT = frozenset({"package", "submit", "local", "replay"})
_CLEANUP = "vtrain.cleanup"


def _available(name: str) -> bool:
    module = COMMANDS[name].split(":", 1)[0]
    return importlib.util.find_spec(module) is not None


def _shown(text: str) -> str:
    """vtrain's own lines (errors, retries) through the redaction every output uses: an endpoint or a
    bucket URL given with user:password@ must not be echoed into a CI log. Each line made printable
    (a retry line carries the server's words; an error's lines are printable already)."""
    from vtrain.foreign import printable_lines
    from vtrain.request.redact import redact_strings

    return "".join(f"{line}\n" for line in printable_lines(redact_strings(text), limit=None))


class LazyGroup(click.Group):
    """A click group that imports each command's module only when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _available(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or not _available(cmd_name):
            return None
        module_name, attr = COMMANDS[cmd_name].split(":", 1)
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # A real argv cannot hold NUL (exec passes C strings), but the SDK's callers and CliRunner can;
        # no option or path can use one, so refuse it once here for every command, as a usage error.
        for arg in args:
            if "\x00" in arg:
                shown = arg.replace("\x00", "\\0")
                raise click.UsageError(f"argument '{shown}' contains a NUL byte (\\0); no path, name or "
                                       "value can hold one", ctx)
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:  # bytes that are not UTF-8 reach argv as lone surrogates
                shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                raise click.UsageError(f"argument '{shown}' is not valid UTF-8 text; a request, a path or a log line "
                                       "sent to Google must be", ctx) from None
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        stack = ctx.meta.get(_CLEANUP)
        if name in CLEAN_EXIT and isinstance(stack, contextlib.ExitStack):
            from vtrain.proctree import children_end_with

            stack.enter_context(children_end_with())
        return name, cmd, rest

    def invoke(self, ctx: click.Context) -> object:
        from vtrain import network

        # retries say so on stderr
        previous = network.set_sink(lambda line: click.echo(_shown(line), err=True, nl=False))
        stack = contextlib.ExitStack()
        try:
            with stack:
                ctx.meta[_CLEANUP] = stack
                return super().invoke(ctx)
        except VtrainError as err:
            text = io.StringIO()
            err.show(text)
            sys.stderr.write(_shown(text.getvalue()))
            ctx.exit(err.exit_code)
        except KeyboardInterrupt as err:
            if ctx.invoked_subcommand not in CLEAN_EXIT:
                raise  # click's own "Aborted!"
            from vtrain.errors import Interrupted
            from vtrain.proctree import interrupted_by

            signum = interrupted_by(err)
            stopped = Interrupted(signal.Signals(signum).name, signum)
            stopped.show()
            ctx.exit(stopped.exit_code)
        finally:
            network.set_sink(previous)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vtrain")
def cli() -> None:
    """vtrain: one YAML file to a distributed TensorFlow job on Vertex AI.

    Validate and render the exact CustomJob request offline, run it locally as
    real processes, then submit it to Vertex AI.
    """


def main() -> None:
    cli(prog_name="vtrain")
