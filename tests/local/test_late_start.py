"""Issue 43 part 3: `--fault REPLICA:late@DURATION` starts a replica after the others, as Vertex starts VMs apart.

The probe trainer (tests/data/trainers/probe) shows the launcher's side in a second or two: when the held replica
starts, that the start-up deadline counts from its own start, and that a chief that succeeds first ends the job
without it. One real MultiWorkerMirrored run (the custom-loop template, a chief and a worker, ~14 CPU-s) shows
TensorFlow's side: the chief waits for a worker started 15 s late, with a collective timeout shorter than that.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tests.local.test_local_restarts import CUSTOM_LOOP
from tests.local.test_local_run import ONE_WORKER, PROBE, assert_clean, job_file
from vtrain.local.faults import parse_fault
from vtrain.local.options import RunOptions
from vtrain.local.runner import LocalJob, run_local


def start(tmp_path: Path, cache: Path, args: list[str], faults: tuple[str, ...], package: Path = PROBE,
          env: str = "", **kw: object) -> tuple[LocalJob, io.StringIO, io.StringIO]:
    out, notices = io.StringIO(), io.StringIO()
    options = RunOptions(output_dir=tmp_path / "out", cache_dir=cache, faults=[parse_fault(f) for f in faults],
                         **kw)  # type: ignore[arg-type]
    path = job_file(tmp_path, args, ONE_WORKER, package=package)
    if env:  # the trainer's env (job_file writes MY_VAR)
        path.write_text(path.read_text().replace("env: {MY_VAR: hello}", f"env: {{MY_VAR: hello, {env}}}"))
    return run_local(path, options=options, out=out, notices=notices), out, notices


def starts(job: LocalJob) -> dict[str, float]:
    """When each replica's first process started, seconds after the job's start."""
    found: dict[str, float] = {}
    for record in job.summary["processes"]:
        found.setdefault(record["replica"], record["start"])
    return found


@pytest.mark.slow
@pytest.mark.alone  # the start-up deadline of 1 s is timing
def test_a_late_worker_starts_after_the_others_and_its_deadline_counts_from_then(tmp_path: Path,
                                                                                  cache: Path) -> None:
    """The held worker is not late for the start-up deadline (1 s here) while it is held back for 2 s."""
    job, out, notices = start(tmp_path, cache, ["--listen=all", "--sleep=chief-0", "--seconds=3"],
                              ("worker-0:late@2s",), startup_timeout=1.0, worker_grace=1.0)
    assert job.wait(timeout=60) == "JOB_STATE_SUCCEEDED", job.error
    begun = starts(job)
    assert begun["chief-0"] < 0.5 and begun["worker-0"] >= 2.0
    assert re.search(r"\[vtrain\] fault worker-0:late@2s: starting worker-0 2(\.\d)?s after the others\n",
                     notices.getvalue()), notices.getvalue()
    assert [f["spec"] for f in job.summary["faults"]] == ["worker-0:late@2s"]
    assert "[worker-0] worker-0 listening on" in out.getvalue()
    assert_clean(job)


def test_a_chief_that_succeeds_first_ends_the_job_without_the_late_replica(tmp_path: Path, cache: Path) -> None:
    job, _, _ = start(tmp_path, cache, [], ("worker-0:late@60s",), worker_grace=30.0)
    assert job.wait(timeout=30) == "JOB_STATE_SUCCEEDED", job.error
    assert job.summary["seconds"] < 20  # neither the 60 s hold nor the workers' 30 s grace
    assert "worker-0" not in starts(job) and job.summary["faults"] == []
    assert "worker-0" not in job.pids
    assert_clean(job)


@pytest.mark.alone  # the start-up deadline of 1 s is timing
def test_a_restarted_chief_whose_peer_had_finished_fails_at_the_start_up_deadline(tmp_path: Path,
                                                                                  cache: Path) -> None:
    """The chief fails after its worker finished (exit 0); restarted, it would wait for it forever, as TF's first
    contact waits for every member. The start-up deadline ends that wait with a line that says why."""
    job, _, _ = start(tmp_path, cache, ["--listen=all", "--fail=chief-0", "--fail-times=1", "--fail-after=1",
                                        "--sleep=chief-0", "--seconds=60"], (), startup_timeout=1.0, kill_grace=1.0)
    assert job.wait(timeout=60) == "JOB_STATE_FAILED"
    assert (job.error or "").startswith(
        "worker-0 had finished (exit 0) and cannot rejoin the cluster chief-0 formed again after a restart; chief-0 "
        "waited 1 s for it (on Vertex it would wait until TensorFlow's registration timeout)"), job.error
    assert job.summary["restarts"]["restarts"] == {"chief-0": 1, "worker-0": 0}
    assert_clean(job)


@pytest.mark.slow
def test_multi_worker_mirrored_waits_for_a_worker_started_past_its_collective_timeout(tmp_path: Path,
                                                                                      cache: Path) -> None:
    """TensorFlow's first contact is the coordination service's registration, which waits for every task; the
    collective timeout (5 s here) bounds the collectives after it. A worker 15 s late: the job succeeds."""
    job, out, notices = start(tmp_path, cache, ["--epochs=1", "--steps-per-epoch=6", "--batch-size=8"],
                              ("worker-0:late@15s",), package=CUSTOM_LOOP,
                              env="VTRAIN_COLLECTIVE_TIMEOUT: '5'")
    assert job.wait(timeout=240) == "JOB_STATE_SUCCEEDED", job.error
    begun = starts(job)
    assert begun["worker-0"] - begun["chief-0"] >= 15.0
    assert job.summary["restarts"]["restarts"] == {"chief-0": 0, "worker-0": 0}
    assert "fault worker-0:late@15s: starting worker-0" in notices.getvalue()
    assert_clean(job)
