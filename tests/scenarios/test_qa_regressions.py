"""Regressions from the first-use QA pass that belong to no single module's tests."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from vtrain.cli import COMMANDS, cli


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_help_works_and_durations_say_duration(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert not re.search(r"--\S*timeout TEXT", result.output), result.output
