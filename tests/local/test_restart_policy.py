"""The restart policy as a table: replica exits in, decisions (and the lines a user reads) out."""

from __future__ import annotations

import pytest

from vtrain.constants import JOB_ATTEMPT_ENV, RESTART_COUNT_ENV
from vtrain.local.policy import (
    CHIEF_SUCCEEDED,
    FAIL,
    IGNORE,
    RESTART,
    RETRY_JOB,
    Exit,
    PolicyConfig,
    RestartPolicy,
    classify_exit,
    exit_text,
    policy_for_job,
)

LABELS = ("chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0")
TRACEBACK = ("Traceback (most recent call last):", '  File "<frozen runpy>", line 198, in _run_module_as_main')


def policy(**config: object) -> RestartPolicy:
    return RestartPolicy(PolicyConfig(**config), LABELS, module="trainer.task")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (-9, "137 (SIGKILL)"),
        (-15, "143 (SIGTERM)"),
        (1, "1"),
        (0, "0"),
        (143, "143 (SIGTERM)"),
        (-100, "228 (signal 100)"),
    ],
)
def test_exit_text(code: int, text: str) -> None:
    assert exit_text(code) == text


@pytest.mark.parametrize(
    ("code", "tail", "permanent", "reason"),
    [
        (1, ("/venv/bin/python: No module named trainer.task",), True, "the entry module cannot be imported"),
        (
            1,
            (
                "/venv/bin/python: Error while finding module specification for 'trainer.task' "
                "(ModuleNotFoundError: No module named 'trainer')",
            ),
            True,
            "the entry module cannot be imported",
        ),
        (
            1,
            (*TRACEBACK, '  File "/t/trainer/task.py", line 3', "    def f(:", "SyntaxError: invalid syntax"),
            True,
            "a SyntaxError (SyntaxError: invalid syntax)",
        ),
        (1, (*TRACEBACK, "ModuleNotFoundError: No module named 'pandas'"), True, "a module cannot be imported"),
        (
            1,
            (*TRACEBACK, "vtrain.errors.RuntimeMismatch: VTRAIN_DISTRIBUTION_STRATEGY=tpu but no TPU is visible"),
            True,
            "the distribution strategy does not fit this replica",
        ),
        (
            2,
            ("usage: task.py [-h] [--epochs EPOCHS]", "task.py: error: unrecognized arguments: --epoch 3"),
            True,
            "the trainer refused its arguments",
        ),
        (1, (*TRACEBACK, "ValueError: NaN loss"), False, "exited 1"),
        (
            1,
            (
                "ModuleNotFoundError: No module named 'pandas'",
                "During handling of the above exception, another exception occurred:",
                "ValueError: boom",
            ),
            False,
            "exited 1",
        ),
        (-9, ("ModuleNotFoundError: No module named 'x'",), False, "exited 137 (SIGKILL)"),
        (137, (), False, "exited 137 (SIGKILL)"),
        (1, ("No module named trainer.other",), False, "exited 1"),  # not the entry module: a runtime import
        (2, ("task.py: error: something",), False, "exited 2"),  # no usage line: not argparse's refusal
    ],
)
def test_classify_exit(code: int, tail: tuple[str, ...], permanent: bool, reason: str) -> None:
    cause = classify_exit(code, tail, "trainer.task")
    assert cause.permanent is permanent
    assert cause.reason.startswith(reason)


def test_worker_killed_is_restarted_in_place_and_counted() -> None:
    p = policy()
    d = p.on_exit(Exit("worker-1", -9, at=3.0))
    assert (d.action, d.replicas, d.line) == (RESTART, ("worker-1",), "worker-1 exited 137 (SIGKILL); restarting 1/5")
    assert p.restarts("worker-1") == 1 and p.restarts("worker-0") == 0
    assert p.env("worker-1") == {RESTART_COUNT_ENV: "1", JOB_ATTEMPT_ENV: "1"}
    assert p.summary()["events"][0] == {
        "replica": "worker-1",
        "exit_code": -9,
        "exit": "137 (SIGKILL)",
        "action": "restart",
        "permanent": False,
        "reason": "exited 137 (SIGKILL)",
        "at": 3.0,
        "attempt": 1,
        "targets": ["worker-1"],
        "count": 1,
        "limit": 5,
    }


def test_five_restarts_then_whole_job_retries_then_failed_with_the_count() -> None:
    p = policy()
    lines = []
    for attempt in range(1, 5):
        for n in range(1, 6):
            d = p.on_exit(Exit("worker-0", 1))
            assert (d.action, d.line) == (RESTART, f"worker-0 exited 1; restarting {n}/5")
        d = p.on_exit(Exit("worker-0", 1))
        lines.append(d.line)
        if attempt < 4:
            assert (d.action, d.replicas) == (RETRY_JOB, LABELS)
            assert p.attempt == attempt + 1 and p.restarts("worker-0") == 0  # fresh counts per attempt
            assert p.env("chief-0")[JOB_ATTEMPT_ENV] == str(attempt + 1)
    assert lines[:3] == [f"worker-0 exited 1 after 5 restarts; retrying the whole job {n}/3" for n in (1, 2, 3)]
    assert d.action == FAIL and d.failed == "worker-0"
    assert d.line == "worker-0 exited 1 after 5 restarts and 3 job retries; failing the job"
    assert d.error == "worker-0 exited 1 after 5 restarts and 3 job retries"
    assert p.summary()["restarts"]["worker-0"] == 20 and p.summary()["attempts"] == 4
    assert p.on_exit(Exit("chief-0", 1)).action == IGNORE  # the job has ended


def test_disable_retries_fails_after_the_restarts() -> None:
    p = policy(disable_retries=True, restart_job_on_worker_restart=True)
    for _ in range(5):
        d = p.on_exit(Exit("worker-0", 1))
        assert d.replicas == ("worker-0",)  # disable_retries overrides restart_job_on_worker_restart
    d = p.on_exit(Exit("worker-0", 1))
    assert (d.action, d.line) == (
        FAIL,
        "worker-0 exited 1 after 5 restarts; failing the job (scheduling.disable_retries)",
    )


def test_restart_job_on_worker_restart_restarts_everyone() -> None:
    p = policy(restart_job_on_worker_restart=True)
    d = p.on_exit(Exit("worker-1", -9))
    assert d.action == RESTART and d.replicas == LABELS
    assert d.line == "worker-1 exited 137 (SIGKILL); restarting every replica 1/5 (restart_job_on_worker_restart)"
    assert all(p.restarts(label) == 1 for label in LABELS)
    # The others' exits while being restarted are the supervisor's doing: not failures.
    assert p.on_exit(Exit("chief-0", -15, stopped=True)).action == IGNORE
    assert (
        p.on_exit(Exit("worker-1", 1)).line
        == "worker-1 exited 1; restarting every replica 2/5 (restart_job_on_worker_restart)"
    )


def test_permanent_error_fails_at_once() -> None:
    p = policy()
    d = p.on_exit(Exit("chief-0", 1, tail=("/venv/bin/python: No module named trainer.task",)))
    assert d.action == FAIL and p.restarts("chief-0") == 0
    assert d.line == (
        "chief-0 exited 1: permanent error, the entry module cannot be imported: No module named "
        "'trainer.task'; failing the job without a restart"
    )
    assert p.summary()["events"][0]["permanent"] is True


@pytest.mark.parametrize("config", [{}, {"policy": "never"}, {"disable_retries": True}])
def test_a_container_that_never_started_fails_at_once_saying_why_once(config: dict[str, object]) -> None:
    """Issue 46, class 13: a replica whose container never started was restarted as if transient (20 starts, then
    the runtime's raw line seven times). Now it fails the job at once, under any policy: the runtime's reason is
    in the error, once; the notice says only what happens; the log tail, which would repeat it, is left out."""
    p = policy(**config)
    why = 'runc: exec: "python3": executable file not found in $PATH'
    d = p.on_exit(Exit("chief-0", 1, tail=(f"runc run failed: unable to start container process: {why[6:]}",),
                       start_error=why))
    assert (d.action, d.line, d.error, d.tail) == (
        FAIL, "chief-0's container did not start (a permanent error); failing the job without a restart",
        f"chief-0 exited 1: its container did not start: {why}", False)
    assert p.restarts("chief-0") == 0 and p.summary()["events"][0]["permanent"] is True
    # a worker's too (an evaluator's never fails the job, as before)
    assert policy(**config).on_exit(Exit("worker-0", 1, start_error=why)).action == FAIL
    assert policy(**config).on_exit(Exit("evaluator-0", 1, start_error=why)).action == IGNORE


def test_never_is_fail_fast() -> None:
    p = policy(policy="never")
    d = p.on_exit(Exit("worker-0", -9))
    assert (d.action, d.line, d.error) == (
        FAIL,
        "worker-0 exited 137 (SIGKILL); failing the job (--restart-policy never)",
        "worker-0 exited 137 (SIGKILL)",
    )


def test_the_chief_decides() -> None:
    p = policy()
    assert p.on_exit(Exit("worker-0", 0)).action == IGNORE
    assert p.on_exit(Exit("chief-0", 0)).action == CHIEF_SUCCEEDED
    d = p.on_exit(Exit("worker-1", 1))
    assert (
        d.action == IGNORE
        and d.line == "worker-1 exited 1 after the chief succeeded; the job's result follows the chief"
    )


def test_evaluator_restarts_but_never_fails_the_job() -> None:
    p = policy()
    for n in range(1, 6):
        assert p.on_exit(Exit("evaluator-0", 1)).line == f"evaluator-0 exited 1; restarting {n}/5"
    d = p.on_exit(Exit("evaluator-0", 1))
    assert d.action == IGNORE and "leaving the evaluator down" in (d.line or "")
    assert policy(policy="never").on_exit(Exit("evaluator-0", 1)).action == IGNORE


def test_steps_measure_recovery() -> None:
    p = policy()
    for step in range(1, 31):
        p.on_step("worker-1", step, at=step * 0.1)
    p.on_exit(Exit("worker-1", -9, at=3.5))
    p.on_step("worker-1", 21, at=9.0)  # resumed from the checkpoint at step 20
    p.on_step("worker-1", 22, at=9.1)
    assert p.summary()["recoveries"] == [
        {"replica": "worker-1", "at": 9.0, "seconds": 5.5, "resumed_at_step": 21, "steps_redone": 10}
    ]
    assert p.lines() == [
        "restarts: worker-1 1 (attempt 1 of the job)",
        "worker-1 resumed at step 21 5.5 s after it failed, 10 step(s) redone",
    ]
    assert policy().lines() == []


def test_from_job_reads_scheduling_and_the_module() -> None:
    job = {
        "jobSpec": {
            "scheduling": {"restartJobOnWorkerRestart": True, "disableRetries": False},
            "workerPoolSpecs": [{"pythonPackageSpec": {"pythonModule": "trainer.task"}}],
        }
    }
    p = policy_for_job(job, ["chief-0"])
    assert p.config.restart_all and p.module == "trainer.task"
    assert PolicyConfig.from_job({"jobSpec": {}}) == PolicyConfig()
    with pytest.raises(ValueError, match="restart policy must be one of vertex, never"):
        PolicyConfig(policy="sometimes")
