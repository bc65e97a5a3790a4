"""Issue 21 item 4: jobs and trials move through the states Vertex reports, through the real client.

A new job is JOB_STATE_QUEUED first (`vtrain emulator --queued-seconds`, the Python API's
`queued_seconds`), then PENDING, RUNNING and its end; a cancelled study leaves no trial running;
every trial carries its start and end time and the name of its CustomJob."""

from __future__ import annotations

import time
from typing import Any

from google.cloud import aiplatform_v1 as v1

from vtrain.emulator import Emulator, GatedRunner, RunContext, RunResult
from vtrain.emulator.tuning import TuningContext

PARENT = "projects/test-project/locations/us-central1"
POOL = v1.WorkerPoolSpec(machine_spec=v1.MachineSpec(machine_type="n1-standard-4"), replica_count=1,
                         container_spec=v1.ContainerSpec(image_uri="gcr.io/p/t:1"))


def seen_states(get: Any, until: str, timeout: float = 10) -> list[str]:
    states: list[str] = []
    deadline = time.monotonic() + timeout
    while not states or states[-1] != until:
        assert time.monotonic() < deadline, states
        state = get().state.name
        if not states or states[-1] != state:
            states.append(state)
        time.sleep(0.01)
    return states


def test_a_new_job_is_queued_then_pending_then_runs() -> None:
    runner = GatedRunner()
    with Emulator(runner=runner, queued_seconds=0.3, pending_seconds=0.3) as emu:
        client = emu.client()
        job = client.create_custom_job(parent=PARENT, custom_job=v1.CustomJob(
            display_name="q", job_spec=v1.CustomJobSpec(worker_pool_specs=[POOL])))
        assert job.state.name == "JOB_STATE_QUEUED"
        states = seen_states(lambda: client.get_custom_job(name=job.name), "JOB_STATE_RUNNING")
        runner.release()
        later = seen_states(lambda: client.get_custom_job(name=job.name), "JOB_STATE_SUCCEEDED")
        states += [s for s in later if s != "JOB_STATE_RUNNING"]
    assert states == ["JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"]


def test_a_queued_job_can_be_cancelled() -> None:
    with Emulator(runner=GatedRunner(), queued_seconds=30, cancel_seconds=0) as emu:
        client = emu.client()
        job = client.create_custom_job(parent=PARENT, custom_job=v1.CustomJob(
            display_name="q", job_spec=v1.CustomJobSpec(worker_pool_specs=[POOL])))
        client.cancel_custom_job(name=job.name)
        assert seen_states(lambda: client.get_custom_job(name=job.name), "JOB_STATE_CANCELLED")[-1] == \
            "JOB_STATE_CANCELLED"


def two_trials(job: Any, ctx: RunContext) -> RunResult:
    """Trial 1 succeeds, trial 2 runs until the study is cancelled."""
    assert isinstance(ctx, TuningContext)
    done = {"id": "1", "state": "SUCCEEDED", "parameters": [{"parameterId": "x", "value": 1}]}
    ctx.set_trials([{**done, "state": "ACTIVE"}])
    time.sleep(0.05)
    ctx.set_trials([done, {"id": "2", "state": "ACTIVE", "parameters": [{"parameterId": "x", "value": 2}]}])
    ctx.cancelled.wait(30)
    return RunResult("JOB_STATE_CANCELLED")


def test_a_cancelled_study_leaves_no_trial_running_and_trials_carry_times_and_jobs() -> None:
    with Emulator(tuning_runner=two_trials, pending_seconds=0, cancel_seconds=0) as emu:
        client = emu.client()
        study = v1.StudySpec(metrics=[v1.StudySpec.MetricSpec(metric_id="loss", goal="MINIMIZE")],
                             parameters=[v1.StudySpec.ParameterSpec(parameter_id="x", integer_value_spec={
                                 "min_value": 1, "max_value": 3})])
        tuning = v1.HyperparameterTuningJob(display_name="t", max_trial_count=3, parallel_trial_count=1,
                                            study_spec=study, trial_job_spec=v1.CustomJobSpec(worker_pool_specs=[POOL]))
        job = client.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job=tuning)
        deadline = time.monotonic() + 10
        while len(client.get_hyperparameter_tuning_job(name=job.name).trials) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        running = client.get_hyperparameter_tuning_job(name=job.name).trials
        assert [t.state.name for t in running] == ["SUCCEEDED", "ACTIVE"]
        assert running[0].end_time and not running[1].end_time
        client.cancel_hyperparameter_tuning_job(name=job.name)
        ended = seen_states(lambda: client.get_hyperparameter_tuning_job(name=job.name), "JOB_STATE_CANCELLED")
        trials = client.get_hyperparameter_tuning_job(name=job.name).trials
    assert ended[-1] == "JOB_STATE_CANCELLED"
    assert [t.state.name for t in trials] == ["SUCCEEDED", "INFEASIBLE"]
    assert all(t.start_time and t.end_time and t.start_time <= t.end_time for t in trials)
    assert trials[0].start_time == running[0].start_time  # kept from the trial's first appearance
    links = [t.custom_job for t in trials]
    named = f"projects/{Emulator.project_number()}/locations/us-central1/customJobs/"
    assert all(link.startswith(named) and link.rsplit("/", 1)[1].isdigit() for link in links)
    assert len(set(links)) == 2
