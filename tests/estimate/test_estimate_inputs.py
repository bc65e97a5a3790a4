"""Issue 20, class 13: the estimate reads what it is given as it was meant. `--step-compute 0s` is a
given zero (not "not given"), `--reducer-machine` is not labelled "(from the job)", `6Gb` (gigabits)
is not read as bytes, and `--plot` writes exactly the path given. (Price files: duplicate and alias
keys are refused in tests/scenarios/test_bounded_inputs.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.conftest import REPO
from vtrain.cli import cli

JOB = str(REPO / "configs" / "reduction-server.yaml")


def _estimate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["estimate", JOB, "--params", "340M", *args])
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


def test_a_zero_step_compute_is_given_not_absent() -> None:
    code, out = _estimate("--step-compute", "0s", "-o", "json")
    assert code == 0 and json.loads(out)["step_compute_s"] == 0
    code, out = _estimate("--step-compute", "0s")
    assert "compute     0 s per step" in out and "needs --step-compute" not in out and "never (0 s compute)" in out
    assert json.loads(_estimate("-o", "json")[1])["step_compute_s"] is None


def test_the_reducer_machine_says_where_it_came_from() -> None:
    code, out = _estimate("--reducer-machine", "n1-highcpu-32")
    assert code == 0 and "× n1-highcpu-32" in out and "machine from --reducer-machine" in out
    assert "machine from --reducer-machine" not in _estimate()[1]


def test_bits_are_not_bytes() -> None:
    code, out = _estimate("--activations", "6Gb")
    assert code == 2 and "Gb is bits; a size is in bytes: write 6GB" in out
    assert _estimate("--activations", "6GB")[0] == 0 and _estimate("--activations", "6gb")[0] == 0


def test_the_plot_goes_exactly_where_it_was_asked(tmp_path: Path) -> None:
    target = tmp_path / "scaling"  # no suffix: a PNG at this very path, nothing appended
    code, out = _estimate("--plot", str(target))
    assert code == 0 and f"plot: {target}" in out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not (tmp_path / "scaling.png").exists()
    assert _estimate("--plot", str(tmp_path / "s.svg"))[0] == 0 and (tmp_path / "s.svg").read_text().find("<svg") >= 0
