"""Issue 30, class 4: answers vtrain did not expect, through the real CLI: no traceback, one line, a stated fallback.

- a trainer's step line with unusable numbers (``{"vtrain":"step","step":1e999}``): `status --watch`
  and `submit --wait` ignore it with one note per replica and keep watching to the job's end;
- a Cloud Quotas answer that is HTML, an array, a string, 1e999 where a limit belongs: preflight's
  quota check is the warning the docs promise ("cannot read the limits: …"), the job still goes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.commands.test_cli_vertex import PROJECT, _fast_retries, _point_at, run  # noqa: F401 (_fast_retries: autouse)
from vtrain.emulator import Emulator
from vtrain.emulator.runner import RunContext, RunResult
from vtrain.runtime.steplog import line

HOSTILE_STEPS = ['{"vtrain":"step","step":1e999}', '{"vtrain":"step","step":true}', '{"vtrain":"step","step":-4}',
                 '{"vtrain":"step","step":NaN,"time":1e999}', '{"vtrain": "step", "step": 5, "since": "x"}']


def stepping(job: Any, ctx: RunContext) -> RunResult:
    """A chief that logs hostile step lines around good ones, then succeeds."""
    ctx.log(line({"step": 2, "first": 1, "since": 100.0, "time": 101.0}))
    for text in HOSTILE_STEPS:
        ctx.log(text)
        ctx.log(text, task="workerpool1-0")
    ctx.log(line({"step": 7, "first": 1, "since": 100.0, "time": 103.0}))
    ctx.sleep(0.3)
    return RunResult()


@pytest.fixture
def emu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulator]:
    with Emulator(runner=stepping, pending_seconds=0.05, cancel_seconds=0.05) as emulator:
        _point_at(monkeypatch, emulator)
        yield emulator


def test_a_hostile_step_line_is_ignored_with_a_note_and_the_watch_goes_on(emu: Emulator) -> None:
    from tests.emulator.test_emulator import make_job

    job = make_job()
    job.job_spec.worker_pool_specs.append({"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                                           "container_spec": {"image_uri": "gcr.io/p/t:1"}})
    made = emu.client().create_custom_job(parent=emu.parent(PROJECT), custom_job=job)
    job_id = made.name.rsplit("/", 1)[-1]
    code, out, err = run("status", job_id, "--watch", "--plain", "--poll", "0.05", "--progress-every", "1s")
    assert code == 0, err
    assert "Traceback" not in err and "\x1b" not in err
    notes = [ln for ln in err.splitlines() if ln.startswith("[vtrain] note: ")]
    assert notes == [
        "[vtrain] note: chief-0 logged an unreadable step line (step is inf; allowed: a whole number from 0 to "
        "2^53); ignored, its row keeps the last good step (later ones are ignored without a note)",
        "[vtrain] note: worker-0 logged an unreadable step line (step is inf; allowed: a whole number from 0 to "
        "2^53); ignored, its row keeps the last good step (later ones are ignored without a note)",
    ], err
    progress = re.findall(r"^\[vtrain\] progress \S+: (.*)$", err, re.M)
    assert progress and progress[-1].startswith("chief-0 succeeded step 7"), err  # watched to the end
    assert re.search(r"^state\s+JOB_STATE_SUCCEEDED$", out, re.M), out
