"""--project, --region and --api-endpoint are one option group: the same three, the same help, on every
command that calls Vertex AI, arriving in the command as one `Where`."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from vtrain.cli import cli

CALLING_VERTEX = ["submit", "status", "logs", "cancel", "list", "timeline", "diff", "doctor", "local", "replay"]


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


FOLLOWING = ["submit", "status", "logs", "timeline"]


@pytest.mark.parametrize("name", FOLLOWING)
def test_poll_comes_from_vtrain_poll_when_not_given(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipeline step's `vtrain submit --wait` (and a CI script) sets the pace without a flag: the launcher
    passes no --poll. The flag still wins; a bad value is click's one line naming the variable."""
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    args = ["123"] if name != "submit" else ["job.yaml"]

    def poll(*extra: str) -> object:
        with command.make_context(name, [*args, *extra], resilient_parsing=False) as ctx:
            return ctx.params["poll"]

    assert poll() == 10.0
    monkeypatch.setenv("VTRAIN_POLL", "0.25")
    assert poll() == 0.25 and poll("--poll", "3") == 3.0
    monkeypatch.setenv("VTRAIN_POLL", "often")
    said = CliRunner().invoke(cli, [name, *args])  # refused while parsing: nothing is read or called
    assert said.exit_code == 2 and "Invalid value for '--poll' (env var: 'VTRAIN_POLL')" in said.output
    assert "Traceback" not in said.output
