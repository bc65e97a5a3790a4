"""The rows of a Vertex job's view (vtrain.view.vertex_rows): log entries in Cloud Logging's shapes
(and as the emulator writes them) to steps, steps/s and restarts; the job's state to each row's."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from google.cloud.aiplatform_v1 import CustomJob

from vtrain.runtime.steplog import line
from vtrain.view.lines import plain_line
from vtrain.view.live import Watch
from vtrain.view.vertex_rows import JobProgress, row_state, run_seconds, step_record, tasks_of


def entry(task: str, message: str | None = None, *, payload: dict[str, Any] | None = None,
          text: bool = False) -> dict[str, Any]:  # fmt: skip
    """An ml_job entry as entries:list returns it: jsonPayload.message (Vertex, the emulator), textPayload,
    or a jsonPayload Cloud Logging parsed from a JSON line."""
    out: dict[str, Any] = {"resource": {"type": "ml_job", "labels": {"job_id": "1", "task_name": task}},
                           "timestamp": "2026-01-01T00:00:00Z"}  # fmt: skip
    if payload is not None:
        out["jsonPayload"] = payload
    elif text:
        out["textPayload"] = message
    else:
        out["jsonPayload"] = {"message": message}
    return out


def step(task: str, n: int, at: float, since: float = 100.0, **more: Any) -> dict[str, Any]:
    return entry(task, line({"step": n, "first": 1, "since": since, "time": at, **more}))


def job(state: str = "JOB_STATE_RUNNING", pools: tuple[int, ...] = (1, 2), started: bool = True) -> Any:
    proto = CustomJob(display_name="demo", state=state)
    for count in pools:
        proto.job_spec.worker_pool_specs.append({"replica_count": count, "machine_spec": {"machine_type": "n1"}})
    if started:
        proto.start_time = datetime.now(timezone.utc) - timedelta(seconds=75)

    class Handle:  # what JobProgress reads of a VertexJob: its state, name and last fetched proto
        display_name = "demo"

        def __init__(self) -> None:
            self.proto, self.state = proto, state

    return Handle()


def test_a_step_line_in_every_payload_shape() -> None:
    text = line({"step": 7, "first": 1, "since": 1.0, "time": 2.0})
    expected = ("workerpool1-0", {"step": 7, "first": 1, "since": 1.0, "time": 2.0})
    assert step_record(entry("workerpool1-0", text)) == expected  # jsonPayload.message
    assert step_record(entry("workerpool1-0", text + "\n", text=True)) == expected  # textPayload
    parsed = {"vtrain": "step", "step": 7, "first": 1, "since": 1.0, "time": 2.0}
    assert step_record(entry("workerpool1-0", payload=parsed)) == expected  # jsonPayload parsed by Cloud Logging
    task_label = {"labels": {"ml.googleapis.com/task_name": "workerpool0-0"}, "jsonPayload": {"message": text}}
    assert step_record(task_label) == ("workerpool0-0", expected[1])  # the task in the entry's labels


@pytest.mark.parametrize("message", ["Epoch 1/3", '{"vtrain": "other"}', "{not json", "", '{"step": 3}'])
def test_other_lines_are_no_step(message: str) -> None:
    assert step_record(entry("workerpool0-0", message)) is None


def test_a_line_without_a_task_is_no_replicas() -> None:
    assert step_record(entry("", line({"step": 1}))) is None


def test_rows_steps_rate_and_restarts() -> None:
    handle = job()
    view = JobProgress(handle)
    assert tasks_of(handle.proto) == ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
    assert view.add(entry("workerpool0-0", "Epoch 1/3")) is False
    for n, at in ((10, 1000.0), (30, 1005.0), (50, 1010.0)):
        assert view.add(step("workerpool0-0", n, at, restarts=0)) is True
    view.add(step("workerpool1-0", 5, 1000.0))  # no restart count in the lines: counted from the processes
    view.add(step("workerpool1-0", 9, 1004.0))
    view.add(step("workerpool1-0", 3, 1020.0, since=1015.0))  # a new process: restarted, resumed at step 3
    progress = view.progress()
    assert progress["name"] == "demo" and progress["state"] == "JOB_STATE_RUNNING"
    assert 74 <= progress["seconds"] <= 80  # from the job's start_time
    rows = {r["replica"]: r for r in progress["replicas"]}
    assert rows["chief-0"] == {"replica": "chief-0", "state": "running", "step": 50, "rate": 4.0, "restarts": 0}
    assert rows["worker-0"] == {"replica": "worker-0", "state": "running", "step": 3, "rate": None, "restarts": 1}
    assert rows["worker-1"] == {"replica": "worker-1", "state": "starting", "step": None, "rate": None,
                                "restarts": None}  # fmt: skip
    assert plain_line(progress) == ("progress 1:15: chief-0 running step 50 (4.0/s); worker-0 running step 3, "
                                    "1 restart; worker-1 starting")  # fmt: skip
    assert view.steps_seen == 6


def test_the_rows_follow_the_jobs_state() -> None:
    assert row_state("JOB_STATE_QUEUED", None) == row_state("JOB_STATE_PENDING", 3) == "pending"
    assert row_state("JOB_STATE_RUNNING", None) == "starting"
    assert row_state("JOB_STATE_RUNNING", 0) == "running"
    assert row_state("JOB_STATE_FAILED", 12) == "failed"
    handle = job("JOB_STATE_SUCCEEDED")
    view = JobProgress(handle)
    view.add(step("workerpool0-0", 10, 1000.0))
    view.add(step("workerpool0-0", 20, 1001.0))
    rows = view.progress()["replicas"]
    assert rows[0] == {"replica": "chief-0", "state": "succeeded", "step": 20, "rate": None, "restarts": 0}


def test_seconds_from_the_jobs_own_times() -> None:
    proto = CustomJob()
    assert run_seconds(proto) == 0.0  # never started
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    proto.start_time = start
    assert run_seconds(proto, now=start + timedelta(seconds=90)) == 90.0
    proto.end_time = start + timedelta(seconds=42)
    assert run_seconds(proto, now=start + timedelta(hours=1)) == 42.0


def test_a_reduction_server_pool_is_labelled_reducer() -> None:
    view = JobProgress(job(pools=(1, 1, 2)), reducers=True)
    assert [r["replica"] for r in view.progress()["replicas"]] == ["chief-0", "worker-0", "reducer-0", "reducer-1"]


def test_the_table_shows_unknown_restarts_as_a_dash() -> None:
    """One process reported: 0 restarts; none yet: not known."""
    from rich.console import Console

    handle = job()
    view = JobProgress(handle)
    view.add(step("workerpool0-0", 4, 1000.0))
    out = io.StringIO()
    Console(file=out, width=100).print(Watch(live=False, logs=io.StringIO())._table(view.progress()))
    rows = [r.split() for r in out.getvalue().splitlines()[2:]]
    assert rows == [["chief-0", "running", "4", "-", "0"], ["worker-0", "starting", "-", "-", "-"],
                    ["worker-1", "starting", "-", "-", "-"]]  # fmt: skip
