"""Watching a Vertex job (`submit --wait`, `status --watch`) against `vtrain emulator --run-jobs`.

The probe trainer reports steps through `vtrain.runtime.report_step`; as on Vertex, the runtime logs
them (the emulator sets VTRAIN_STEP_LOG=1: its replicas run under `vtrain local`), the emulator
keeps each replica line as a log entry, and the watcher reads them back through Cloud Logging's
entries:list. Off a terminal (CliRunner) the view prints plain `[vtrain] progress` lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.emulator.test_emulated_run import NAME_RE, probe_job, run
from tests.helpers import MakeEmulator
from vtrain.emulator import Emulator
from vtrain.emulator.local_jobs import EmulatedRunner

STEPS = ["--steps", "chief-0", "--count", "12", "--step-seconds", "0.25"]
FAST = 'env: {VTRAIN_STEP_LOG_EVERY: "0.5"}'  # a line every half second (default 5 s)
PROGRESS = re.compile(r"^\[vtrain\] progress \d+:\d\d: (.*)$", re.M)


@pytest.fixture
def emu(make_emulator: MakeEmulator, tmp_path: Path, cache: Path, bucket: object) -> Emulator:
    runner = EmulatedRunner(cache_dir=cache, output_root=tmp_path / "runs", kill_grace=2, restart_policy="never")
    return make_emulator(runner, pending_seconds=0.05, cancel_seconds=0.05)


def chief_steps(err: str) -> list[tuple[str, int]]:
    """(state, step) of chief-0 in each progress line that shows a step."""
    found = []
    for rows in PROGRESS.findall(err):
        m = re.search(r"chief-0 (\w+) step (\d+)", rows)
        if m:
            found.append((m.group(1), int(m.group(2))))
    return found


def trainer(tmp_path: Path, name: str, args: list[str]) -> Path:
    job = probe_job(tmp_path, name, args)
    text = job.read_text().replace("  args:", f"  {FAST}\n  args:", 1)
    job.write_text(text)
    return job


@pytest.mark.slow
def test_submit_wait_shows_each_replicas_steps_and_the_end(tmp_path: Path, emu: Emulator) -> None:
    job = trainer(tmp_path, "watch-ok", STEPS)
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.2", "--progress-every", "1s",
                         "--api-endpoint", emu.url)
    assert code == 0, err
    job_id = re.search(NAME_RE, out).group(1)  # type: ignore[union-attr]
    seen = chief_steps(err)
    steps = [step for _, step in seen]
    assert len(set(steps)) >= 2 and steps == sorted(steps), err  # increasing, line after line
    assert seen[-1] == ("succeeded", 12), err  # the last line: the end state and the last step
    assert all(state in ("running", "succeeded") for state, _ in seen), err
    last = PROGRESS.findall(err)[-1]
    assert last == "chief-0 succeeded step 12; worker-0 succeeded", err  # no steps reported: none shown
    assert re.search(rf"^{job_id}  RUNNING  \d+s$", err, re.M), err  # the state changes, as before
    assert re.search(rf"{NAME_RE} ended JOB_STATE_SUCCEEDED after", out)

    # The step lines are in the job's log, as on Vertex; `status --watch` of an ended job returns at once.
    code, log, _ = run("logs", job_id, "--replica", "chief-0", "--api-endpoint", emu.url)
    assert code == 0 and re.search(r'^\[chief-0\] \{"vtrain":"step","step":12,', log, re.M), log
    code, out, err = run("status", job_id, "--watch", "--plain", "--api-endpoint", emu.url)
    assert code == 0, err
    assert PROGRESS.findall(err) == ["chief-0 succeeded step 12; worker-0 succeeded"], err
    assert re.search(r"^state\s+JOB_STATE_SUCCEEDED$", out, re.M), out


@pytest.mark.slow
def test_status_watch_follows_a_failing_job_and_exits_with_its_code(tmp_path: Path, emu: Emulator) -> None:
    job = trainer(tmp_path, "watch-fail", [*STEPS, "--fail", "chief-0", "--code", "3"])
    code, out, err = run("submit", str(job), "--api-endpoint", emu.url)
    assert code == 0, err
    job_id = re.search(NAME_RE, out).group(1)  # type: ignore[union-attr]
    code, out, err = run("status", job_id, "--watch", "--poll", "0.2", "--progress-every", "1s", "--api-endpoint",
                         emu.url)  # fmt: skip
    assert code == 10, err  # FAILED, as --exit-code says it
    seen = chief_steps(err)
    assert seen and seen[-1] == ("failed", 12), err
    assert re.search(r"^state\s+JOB_STATE_FAILED$", out, re.M), out


def test_the_emulator_turns_step_lines_on_unless_the_job_says_otherwise() -> None:
    from vtrain.emulator.local_jobs import with_step_log

    body = {"jobSpec": {"workerPoolSpecs": [
        {"pythonPackageSpec": {"env": [{"name": "A", "value": "1"}]}},
        {"containerSpec": {"imageUri": "x", "env": [{"name": "VTRAIN_STEP_LOG", "value": "0"}]}},
        {"pythonPackageSpec": {}},
    ]}}  # fmt: skip
    out = with_step_log(body)
    assert [p.get("pythonPackageSpec", p.get("containerSpec"))["env"] for p in out["jobSpec"]["workerPoolSpecs"]] == [
        [{"name": "A", "value": "1"}, {"name": "VTRAIN_STEP_LOG", "value": "1"}],
        [{"name": "VTRAIN_STEP_LOG", "value": "0"}],  # the job's own choice stays
        [{"name": "VTRAIN_STEP_LOG", "value": "1"}],
    ]
    assert body["jobSpec"]["workerPoolSpecs"][2] == {"pythonPackageSpec": {}}  # the job as sent is left alone
