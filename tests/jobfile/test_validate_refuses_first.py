"""Issue 20, class 6: whatever render, submit, create or a local run will refuse, validate refuses
first (exit 2, with a position). `project: p` validated and render exited 1; a project or region from
the environment was not checked; a region with non-ASCII digits, 60-64 labels, a reserved vtrain-*
label, a DiLoCo job's 100th env var (vtrain adds VTRAIN_DILOCO), a NUL in a tuning value and an
int64-overflowing tuning bound all passed validate. The formats and limits now live in one place
(constants: PROJECT_PATTERN, REGION_PATTERN, VTRAIN_LABELS; the rules count what the builder adds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import write_job
from vtrain.cli import cli

BASE = """
name: first
{top}
trainer:
  container: {{image_uri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest}}
  env: {env}
cluster:
  chief: {{machine_type: n1-standard-4}}
  {workers}
{tail}
"""
TUNING = """tuning:
  metric: {{name: loss, goal: minimize}}
  max_trials: 2
  parameters:
    {param}
"""

CASES = {
    "project too short": dict(top="project: p"),
    "region with Arabic-Indic digits": dict(top="region: us-central١"),
    "62 labels (vtrain adds 5)": dict(top="labels: {" + ", ".join(f"k{i}: v" for i in range(62)) + "}"),
    "a reserved label": dict(top="labels: {vtrain-version: x}"),
    "a DiLoCo job's 100 env vars": dict(top="distribution_strategy: diloco",
                                       env="{" + ", ".join(f"V{i}: x" for i in range(99)) + "}",
                                       workers="workers: {replicas: 2}"),
    "a NUL in a tuning value": dict(tail=TUNING.format(param="opt: {type: categorical, values: [adam, \"sg\\0d\"]}")),
    "an int64-overflowing bound": dict(tail=TUNING.format(
        param="n: {type: integer, min: 1, max: 99999999999999999999}")),
}


def _job(tmp_path: Path, top: str = "", env: str = "{}", workers: str = "", tail: str = "") -> Path:
    return write_job(tmp_path, BASE.format(top=top, env=env, workers=workers, tail=tail))


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert not (result.exception and not isinstance(result.exception, SystemExit)), result.exception
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_refuses_what_a_later_step_would(tmp_path: Path, case: str) -> None:
    job = _job(tmp_path, **CASES[case])
    code, out = _run("validate", str(job))
    assert code == 2 and f"{job}:" in out, out  # with its position in the file
    assert "expected a mapping" not in out, out  # the case's own problem, not a malformed test file


@pytest.mark.parametrize(("name", "value"), [("VTRAIN_PROJECT", "p"), ("VTRAIN_REGION", "us-central١"),
                                             ("GOOGLE_CLOUD_REGION", "Europe-West4")])
def test_validate_checks_the_project_and_region_render_would_take_from_the_environment(
        tmp_path: Path, name: str, value: str) -> None:
    job = _job(tmp_path)
    code, out = _run("render", str(job), env={name: value})
    assert code == 1, out  # render refuses it (a BackendError)
    code, out = _run("validate", str(job), env={name: value})
    assert code == 2 and f"(from {name})" in out, out
    assert _run("validate", str(job), "--target", "local", env={name: value})[0] == 0  # local needs neither


def test_what_validate_accepts_renders(tmp_path: Path) -> None:
    """The bounds are the real ones: one less than each refusal validates and renders."""
    ok = _job(tmp_path, top="project: my-project\nregion: europe-west4\ndistribution_strategy: diloco\nlabels: {"
              + ", ".join(f"k{i}: v" for i in range(59)) + "}",
              env="{" + ", ".join(f"V{i}: x" for i in range(98)) + "}", workers="workers: {replicas: 2}")
    assert _run("validate", str(ok))[0] == 0
    assert _run("render", str(ok))[0] == 0
    tuned = _job(tmp_path, tail=TUNING.format(param=f"n: {{type: integer, min: 1, max: {2**63 - 1}}}"))
    assert _run("validate", str(tuned))[0] == 0


def test_the_fault_label_stays_the_users(tmp_path: Path) -> None:
    """vtrain-fault asks the emulator for a fault: only the labels vtrain itself sets are reserved."""
    assert _run("validate", str(_job(tmp_path, top="labels: {vtrain-fault: worker-0_kill_1s}")))[0] == 0
