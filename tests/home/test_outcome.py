"""How a job ended on Vertex and here, and whether the two agree (vtrain.home.outcome): pure, from Vertex's own
wording and log entries as Cloud Logging returns them."""

from __future__ import annotations

from typing import Any

from vtrain.home.outcome import Outcome, cloud_outcome, compare, fault_for, last_step, local_outcome, replica_failure

FAILED, SUCCEEDED = "JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"


def entry(task: str, message: str, severity: str = "INFO") -> dict[str, Any]:
    return {"resource": {"type": "ml_job", "labels": {"task_name": task}}, "severity": severity,
            "jsonPayload": {"message": message}}  # fmt: skip


def test_the_replica_a_failure_names_in_vertex_s_words_and_in_vtrain_local_s() -> None:
    assert replica_failure("The replica workerpool1-1 exited with a non-zero status of 137. Termination reason: "
                           "Error.") == ("worker-1", 137)
    assert replica_failure("chief-0 exited 1 after 5 restarts") == ("chief-0", 1)
    assert replica_failure("[vertex] worker-0 exited 3; restarting 1/5") == ("worker-0", 3)
    assert replica_failure("worker-2 was killed by SIGKILL") == ("worker-2", 137)
    assert replica_failure("Resources are insufficient in region: us-central1.") is None


def test_the_last_step_prefers_the_runtime_s_reports_and_says_when_it_guessed() -> None:
    assert last_step(['{"vtrain":"step","step":7,"since":1.0,"time":2.0}', "chief-0 step 9"]) == (7, False)
    assert last_step(["Epoch 1", "training step 41 loss 0.2", "step: 42"]) == (42, True)
    assert last_step(["nothing here"]) == (None, False)


def test_a_trainer_s_own_failure_on_vertex() -> None:
    body = {"state": FAILED, "error": {"code": 3, "message": "The replica workerpool0-0 exited with a non-zero status "
                                                             "of 1. Termination reason: Error. \nTraceback (most "
                                                             "recent call last):\nValueError: bad shape"}}
    entries = [entry("workerpool0-0", '{"vtrain":"step","step":7,"since":1.0,"time":2.0}'),
               entry("workerpool0-0", "ValueError: bad shape", "ERROR"), entry("workerpool1-0", "worker line")]
    cloud = cloud_outcome(body, entries)
    assert (cloud.replica, cloud.exit_status, cloud.exception, cloud.step, cloud.cause) == (
        "chief-0", 1, "ValueError: bad shape", 7, None)
    here = Outcome(FAILED, "chief-0", 1, "ValueError: bad shape", 7)
    assert compare(cloud, here).line == ("replay: reproduced: chief-0 raised ValueError: bad shape at step 7 "
                                         "(exit 1), as on Vertex")
    other = compare(cloud, Outcome(FAILED, "chief-0", 1, "ValueError: bad shape", 3))
    assert not other.reproduced and other.differences == ("the step: 7 on Vertex, 3 here",)
    ran = compare(cloud, Outcome(SUCCEEDED))
    assert not ran.reproduced and "here the job SUCCEEDED: a cloud-side cause: memory" in ran.line


def test_a_killed_replica_is_an_outside_cause_played_again_as_a_kill() -> None:
    body = {"state": FAILED, "error": {"code": 3, "message": "The replica workerpool1-0 exited with a non-zero status "
                                                             "of 137. Termination reason: Error."}}
    cloud = cloud_outcome(body, [entry("workerpool1-0", "worker-0 step 40")])
    assert (cloud.replica, cloud.exit_status, cloud.step, cloud.step_guessed, cloud.cause) == (
        "worker-0", 137, 40, True, "killed")
    assert fault_for(cloud, ["chief-0", "worker-0"]) == ("worker-0:kill@step:40", None)
    assert fault_for(cloud, ["chief-0", "worker-3"]) == (
        "worker-3:kill@step:40", "worker-0 is not in this run (--max-replicas): worker-3 stands in")
    verdict = compare(cloud, Outcome(SUCCEEDED), faults=("worker-0:kill@step:40",))
    assert not verdict.reproduced and "OOM kill" in verdict.line and "with the same fault (worker-0:kill@step:40)" \
        in verdict.line  # fmt: skip


def test_a_stock_out_before_anything_ran_injects_nothing() -> None:
    body = {"state": FAILED, "error": {"code": 8, "message": "Resources are insufficient in region: us-central1."}}
    cloud = cloud_outcome(body, [entry("service", "provisioning")])
    assert (cloud.replica, cloud.cause) == (None, "stock-out")
    assert fault_for(cloud, ["chief-0"]) == (None, "stock-out: no replica had started; nothing to inject")


def test_a_local_run_s_ending_from_its_result() -> None:
    summary = {"state": FAILED, "error": "worker-1 exited 3 after 5 restarts\nlast lines",
               "restarts": {"events": [{"replica": "worker-1", "exit_code": 3, "action": "restart"}]},
               "steps": {"worker-1": [[0.5, 1], [0.9, 4]]}}  # fmt: skip
    mine = local_outcome(summary, {"worker-1": ["Traceback (most recent call last):", "KeyError: 'x'"]})
    assert (mine.replica, mine.exit_status, mine.exception, mine.step) == ("worker-1", 3, "KeyError: 'x'", 4)
    killed = local_outcome({"state": FAILED, "error": "chief-0 was killed by SIGKILL"}, {})
    assert (killed.replica, killed.exit_status, killed.cause) == ("chief-0", 137, "killed")
    assert local_outcome({"state": SUCCEEDED}, {}) == Outcome(SUCCEEDED)


def test_a_running_job_is_reproduced_by_a_run_that_succeeds() -> None:
    running = Outcome("JOB_STATE_RUNNING")
    assert compare(running, Outcome(SUCCEEDED)).line == ("replay: reproduced: on Vertex the job is running, with no "
                                                         "failure so far; here it succeeded")
    failed = compare(running, Outcome(FAILED, "worker-0", 1, "OSError: disk", 3))
    assert not failed.reproduced and failed.line.startswith("replay: not reproduced: on Vertex the job is running")
