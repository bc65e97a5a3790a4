"""Step lines for Cloud Logging (vtrain.runtime.steplog): where they are written, how often, and that
what the runtime writes is what a watcher parses."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from vtrain.runtime import recovery, steplog
from vtrain.runtime.steplog import BadStepLine, StepLog, enabled, every, parse, record_of


@pytest.mark.parametrize(("env", "on"), [
    ({"CLOUD_ML_JOB_ID": "123"}, True),  # Vertex
    ({"CLOUD_ML_JOB_ID": "123", "VTRAIN_STATUS_FILE": "/r/chief-0.json"}, False),  # vtrain local
    ({}, False),  # a plain python run
    ({"CLOUD_ML_JOB_ID": "123", "VTRAIN_STATUS_FILE": "/r/s.json", "VTRAIN_STEP_LOG": "1"}, True),  # the emulator
    ({"CLOUD_ML_JOB_ID": "123", "VTRAIN_STEP_LOG": "0"}, False),
    ({"CLOUD_ML_JOB_ID": "123", "VTRAIN_STEP_LOG": "maybe"}, True),
])  # fmt: skip
def test_written_on_vertex_not_under_vtrain_local(env: dict[str, str], on: bool) -> None:
    assert enabled(env) is on


def test_every_reads_the_env_and_never_fails() -> None:
    assert every({}) == 5.0
    assert every({"VTRAIN_STEP_LOG_EVERY": "0.5"}) == 0.5
    assert every({"VTRAIN_STEP_LOG_EVERY": "soon"}) == 5.0
    assert every({"VTRAIN_STEP_LOG_EVERY": "-1"}) == 5.0


def test_rate_limited_with_the_last_step_at_the_end() -> None:
    out = io.StringIO()
    log = StepLog(3600.0, out)
    for step in range(1, 101):
        log.record(step, first=1, epoch=None, restarts=2)
    log.flush()
    log.flush()  # nothing new: nothing written
    records = [parse(line) for line in out.getvalue().splitlines()]
    assert [r["step"] for r in records if r] == [1, 100]
    first, last = records
    assert first is not None and last is not None
    assert first["restarts"] == 2 and first["first"] == 1 and first["since"] == last["since"]
    assert "epoch" not in first  # no value: left out
    assert last["time"] >= first["time"] >= first["since"] - 0.01


def test_every_step_when_every_is_zero() -> None:
    out = io.StringIO()
    log = StepLog(0.0, out)
    for step in (5, 6, 7):
        log.record(step, first=5, epoch=0, restarts=None)
    assert [json.loads(line)["step"] for line in out.getvalue().splitlines()] == [5, 6, 7]
    assert out.getvalue().startswith('{"vtrain":"step","step":5,"first":5,"epoch":0,"since":')


@pytest.mark.parametrize("text", ["", "step 4", '{"vtrain": "other", "step": 4}', '{"vtrain": "step", "step": 4',
                                  '["vtrain", "step"]', '{"step": 4}', '[' * 3000 + '"vtrain"' + ']' * 3000,
                                  '{"x": "vtrain", "pad": "' + "y" * 5000 + '"}'])
def test_other_lines_are_no_step(text: str) -> None:
    assert parse(text) is None


def test_a_parsed_json_payload_is_read_too() -> None:
    """Cloud Logging keeps a jsonPayload's numbers as doubles: a whole 3.0 is step 3."""
    assert record_of({"vtrain": "step", "step": 3.0, "restarts": 1.0, "time": 5}) == {"step": 3, "restarts": 1,
                                                                                        "time": 5.0}
    assert record_of({"message": "hello"}) is None


@pytest.mark.parametrize(("text", "said"), [
    ('{"vtrain":"step","step":1e999}', "step is inf; allowed: a whole number from 0 to 2^53"),
    ('{"vtrain":"step","step":-1e999}', "step is -inf"),
    ('{"vtrain":"step","step":NaN}', "step is NaN"),
    ('{"vtrain":"step","step":true}', "step is a boolean (true)"),
    ('{"vtrain":"step","step":-3}', "step is -3"),
    ('{"vtrain":"step","step":2.5}', "step is 2.5"),
    ('{"vtrain":"step","step":"four"}', "step is a string"),
    ('{"vtrain":"step"}', "step is missing"),
    ('{"vtrain":"step","step":1' + "0" * 400 + '}', "step is a 401-digit number"),
    ('{"vtrain":"step","step":4,"restarts":[1]}', "restarts is an array"),
    ('{"vtrain":"step","step":4,"time":1e999}', "time is inf; allowed: a Unix time"),
    ('{"vtrain":"step","step":4,"since":"5"}', "since is a string"),
    ('{"vtrain":"step","step":4,"pad":"' + "x" * 5000 + '"}', "a step line of 5,"),
])  # fmt: skip
def test_a_marked_line_with_unusable_numbers_says_what(text: str, said: str) -> None:
    with pytest.raises(BadStepLine) as caught:
        parse(text)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_report_step_writes_a_line_on_vertex(tmp_path: Path) -> None:
    """A real replica-like process: CLOUD_ML_JOB_ID, no status file; two lines for 50 quick steps."""
    code = "from vtrain.runtime import report_step\nfor s in range(1, 51): report_step(s, epoch=0)\n"
    env = {**os.environ, "CLOUD_ML_JOB_ID": "42", "PYTHONPATH": str(REPO), "VTRAIN_STEP_LOG_EVERY": "60"}
    env.pop("VTRAIN_STATUS_FILE", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    records = [parse(line) for line in done.stdout.splitlines()]
    assert [(r or {}).get("step") for r in records] == [1, 50]
    assert all(r is not None and r["first"] == 1 and r["epoch"] == 0 and "restarts" not in r for r in records)


def test_report_step_under_vtrain_local_writes_no_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("CLOUD_ML_JOB_ID", "42")
    monkeypatch.setenv("VTRAIN_STATUS_FILE", str(tmp_path / "chief-0.json"))
    monkeypatch.setattr(recovery, "_first_step", [])
    monkeypatch.setattr(steplog, "_log", [])
    recovery.report_step(1)
    assert capsys.readouterr().out == ""
    assert (tmp_path / "chief-0.json").exists()
