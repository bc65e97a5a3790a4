"""Issue 21 item 2: a failed job ends as Vertex ends it (code and wording, vtrain/emulator/endings.py),
and vtrain's own classifier (vtrain.cloud.failures) still reads each ending right."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from vtrain.cloud.failures import classify_failure
from vtrain.emulator import Emulator, RunContext, sleep_runner
from vtrain.emulator.endings import FAILURES, replica_failure
from vtrain.emulator.jobfaults import JobFault, with_job_faults
from vtrain.emulator.local_jobs import follow

PARENT = "projects/test-project/locations/us-central1"


@pytest.mark.parametrize("cause", list(FAILURES))
def test_vtrains_classifier_reads_every_ending_as_the_table_says(cause: str) -> None:
    ending = FAILURES[cause]
    message = ending.message.format(region="us-central1", task="workerpool0-0")
    assert classify_failure(ending.code, message).retryable is ending.retryable


@pytest.mark.parametrize("cause", list(FAILURES))
def test_vtrains_table_of_vertex_wordings_matches_the_emulators(cause: str) -> None:
    from vtrain.cloud.failures import CAUSES

    ours, theirs = FAILURES[cause], CAUSES[cause]
    assert (theirs.code, theirs.retryable) == (ours.code, ours.retryable)
    assert theirs.message.format(region="r") == ours.message.format(region="r", task="workerpool0-0")


@pytest.mark.parametrize("error,code,message", [
    ("chief-0 exited with code 1\nlast lines of chief-0 (full log: /x):\n  | Traceback\n  | ValueError: boom", 3,
     "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error. \nTraceback\n"
     "ValueError: boom"),
    ("worker-2 exited with code 3", 3,
     "The replica workerpool1-2 exited with a non-zero status of 3. Termination reason: Error."),
    ("evaluator-0 was killed by SIGKILL\nlast lines of evaluator-0 (full log: /x):", 3,
     "The replica workerpool3-0 exited with a non-zero status of 137. Termination reason: Error."),
    ("ps-1 was killed by signal 99", 3, "The replica workerpool2-1 exited with a non-zero status of 227. "
     "Termination reason: Error."),
])
def test_a_local_replica_failure_is_worded_as_vertex_words_it(error: str, code: int, message: str) -> None:
    assert replica_failure(error) == (code, message)
    assert classify_failure(code, message).retryable is False


@pytest.mark.parametrize("error", ["could not start the replicas: boom", "the launcher stopped unexpectedly", ""])
def test_other_local_errors_are_left_as_they_are(error: str) -> None:
    assert replica_failure(error) is None


class _Done:
    done = True
    error = "worker-0 exited with code 2\nlast lines of worker-0 (full log: /x):\n  | oops"

    def wait(self) -> str:
        return "JOB_STATE_FAILED"


def test_the_runner_ends_a_failed_replica_with_code_3() -> None:
    result = follow(_Done(), RunContext("1"), lambda text: None, poll=0.01, parts="replica", noun="job")
    assert (result.code, result.error) == (3, "The replica workerpool1-0 exited with a non-zero status of 2. "
                                              "Termination reason: Error. \noops")


def _ended(emu: Emulator, name: str) -> Any:
    deadline = time.monotonic() + 10
    while (job := emu.client().get_custom_job(name=name)).state.name not in ("JOB_STATE_FAILED",
                                                                               "JOB_STATE_SUCCEEDED"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return job


@pytest.mark.parametrize("cause", list(FAILURES))
def test_fail_jobs_ends_each_cause_with_its_code_through_the_real_client(cause: str) -> None:
    from google.cloud import aiplatform_v1 as v1

    runner = with_job_faults(sleep_runner(0.05), JobFault(cause))
    with Emulator(runner=runner, pending_seconds=0, cancel_seconds=0) as emu:
        pool = v1.WorkerPoolSpec(machine_spec=v1.MachineSpec(machine_type="n1-standard-4"), replica_count=1,
                                 container_spec=v1.ContainerSpec(image_uri="gcr.io/p/t:1"))
        job = emu.client().create_custom_job(parent=PARENT, custom_job=v1.CustomJob(
            display_name="f", job_spec=v1.CustomJobSpec(worker_pool_specs=[pool])))
        ended = _ended(emu, job.name)
    assert ended.state.name == "JOB_STATE_FAILED"
    assert ended.error.code == FAILURES[cause].code
    assert ended.error.message == FAILURES[cause].message.format(region="us-central1", task="workerpool0-0")
    assert threading.active_count() < 50
