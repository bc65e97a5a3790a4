"""--project, --region and --api-endpoint are one option group: the same three, the same help, on every
command that calls Vertex AI, arriving in the command as one `Where`."""

from __future__ import annotations

import click
import pytest

from vtrain.cli import cli

CALLING_VERTEX = ["submit", "status", "logs", "cancel", "list", "timeline", "diff", "doctor"]


def _options(name: str) -> dict[str, click.Option]:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    return {p.name: p for p in command.params if isinstance(p, click.Option) and p.name}


@pytest.mark.parametrize("name", CALLING_VERTEX)
def test_every_command_that_calls_vertex_has_the_group(name: str) -> None:
    here, there = _options(name), _options("submit")
    for option in ("project", "region", "api_endpoint"):
        assert option in here, f"{name} lacks --{option.replace('_', '-')}"
        assert here[option].help == there[option].help


def test_the_command_receives_one_where() -> None:
    from vtrain.cloud.target import Where
    from vtrain.commands._options import where_options

    seen: list[object] = []

    @click.command()
    @where_options
    def probe(where: Where) -> None:
        seen.append(where)

    probe.main(["--project", "p-1", "--region", "europe-west4", "--api-endpoint", "http://127.0.0.1:9"],
               standalone_mode=False)
    assert seen == [Where("p-1", "europe-west4", "http://127.0.0.1:9")]
