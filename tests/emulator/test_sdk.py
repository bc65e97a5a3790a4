"""The high-level SDK (`google.cloud.aiplatform`) against the emulator, over REST (issue 21 item 7).

The SDK reaches the emulator only with `api_transport="rest"` and `api_endpoint="http://127.0.0.1:PORT"`
(gRPC is not served), as the README's snippet shows. Importing the SDK takes seconds: the tests are few
and slow-marked, and share one emulator."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from vtrain.emulator import Emulator, GatedRunner, RunContext, RunResult

pytestmark = pytest.mark.slow
POOLS = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
          "container_spec": {"image_uri": "gcr.io/p/trainer:1"}}]


class Runner:
    """Jobs named 'hold' run until cancelled; the others succeed at once."""

    def __init__(self) -> None:
        self.gate = GatedRunner(honour_cancel=True)

    def __call__(self, job: Any, ctx: RunContext) -> RunResult:
        return self.gate(job, ctx) if job.display_name == "hold" else RunResult()


@pytest.fixture(scope="module")
def sdk() -> Iterator[tuple[Any, Emulator]]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform import jobs

    # `run(sync=True)` polls every _JOB_WAIT_TIME (5 s): sized for Vertex, where a job takes minutes. Each of
    # these jobs ends in ~0.1 s; at 5 s the three `run` tests slept ~15 s, idle beside the other worker.
    with pytest.MonkeyPatch.context() as patch, \
            Emulator(runner=Runner(), pending_seconds=0.05, cancel_seconds=0.05, queued_seconds=0.05) as emu:
        patch.setattr(jobs, "_JOB_WAIT_TIME", 0.1)
        aiplatform.init(project="test-project", location="us-central1", api_transport="rest",
                        api_endpoint=emu.url, credentials=AnonymousCredentials(), staging_bucket="gs://stage-bkt")
        yield aiplatform, emu


def test_custom_job_run_and_list(sdk: tuple[Any, Emulator]) -> None:
    aiplatform, emu = sdk
    job = aiplatform.CustomJob(display_name="sdk-run", worker_pool_specs=POOLS, labels={"team": "ml"})
    job.run(sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert job.resource_name.startswith(f"projects/{emu.project_number()}/locations/us-central1/customJobs/")
    listed = aiplatform.CustomJob.list(filter='labels.team="ml" OR display_name="none"')
    assert [j.resource_name for j in listed] == [job.resource_name]
    again = aiplatform.CustomJob.get(job.resource_name)
    assert again.display_name == "sdk-run" and again.job_spec.base_output_directory.output_uri_prefix.startswith(
        "gs://stage-bkt/")


def test_custom_job_cancel(sdk: tuple[Any, Emulator]) -> None:
    aiplatform, emu = sdk
    job = aiplatform.CustomJob(display_name="hold", worker_pool_specs=POOLS)
    job.submit()
    job.wait_for_resource_creation()
    job.cancel()
    deadline = time.monotonic() + 30
    while aiplatform.CustomJob.get(job.resource_name).state.name != "JOB_STATE_CANCELLED":
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_hyperparameter_tuning_job_run(sdk: tuple[Any, Emulator]) -> None:
    aiplatform, _ = sdk
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    trial_job = aiplatform.CustomJob(display_name="trial", worker_pool_specs=POOLS)
    tuning = aiplatform.HyperparameterTuningJob(
        display_name="sdk-tune", custom_job=trial_job, metric_spec={"loss": "minimize"},
        parameter_spec={"x": hpt.IntegerParameterSpec(min=1, max=3, scale="linear")},
        max_trial_count=2, parallel_trial_count=1)
    tuning.run(sync=True)
    assert tuning.state.name == "JOB_STATE_SUCCEEDED"
    assert len(tuning.trials) == 2 and all(t.start_time and t.end_time and t.custom_job for t in tuning.trials)


def test_a_trials_custom_job_is_got_like_any_job(sdk: tuple[Any, Emulator]) -> None:
    """issue 31: Trial.custom_job names a CustomJob; `get` on it answers it (it was a 404)."""
    aiplatform, _ = sdk
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    trial_job = aiplatform.CustomJob(display_name="trial", worker_pool_specs=POOLS)
    tuning = aiplatform.HyperparameterTuningJob(
        display_name="sdk-tune-2", custom_job=trial_job, metric_spec={"loss": "minimize"},
        parameter_spec={"x": hpt.IntegerParameterSpec(min=1, max=3, scale="linear")},
        max_trial_count=1, parallel_trial_count=1)
    tuning.run(sync=True)
    (trial,) = tuning.trials
    job = aiplatform.CustomJob.get(trial.custom_job)
    assert job.resource_name == trial.custom_job and job.display_name == f"sdk-tune-2-trial-{trial.id}"
    assert job.job_spec.worker_pool_specs[0].machine_spec.machine_type == "n1-standard-4"
    assert job.start_time == trial.start_time and job.state.name in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED")
