"""`vtrain submit --wait --recover N` with the real client against the emulator, which ends jobs FAILED
as Vertex AI does (`--fail-jobs`); the failure classifier; `scheduling.fallback` validation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.cloud.test_submit import job_text, runner
from tests.commands.test_cli_vertex import PROJECT, run
from tests.helpers import MakeEmulator, write_job
from vtrain.cli import cli
from vtrain.cloud.failures import CAUSES, classify_failure
from vtrain.cloud.recover import backoff, variant_for
from vtrain.emulator import Emulator
from vtrain.emulator.jobfaults import JobFault, parse_job_fault, with_job_faults
from vtrain.errors import ConfigError, UsageError
from vtrain.jobfile.load import fallback_overrides, parse_config


@pytest.mark.parametrize(
    ("code", "message", "retryable"),
    [
        (8, "Resources are insufficient in region: us-central1. Please try a different region.", True),
        (8, "STOCKOUT: the job's Spot VMs were preempted.", True),
        (13, "Internal error occurred for the current attempt.", True),
        (14, "", True),
        (8, "", True),
        (13, "The replica workerpool0-0 exited with a non-zero status of 1.", False),
        (8, "The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_cpus",
         False),
        (4, "The job timed out", False),
        (3, "Invalid machine type", False),
        (13, "workerpool0-0 exited with status 1", False),
        (None, None, False),
    ],
)
def test_classify_failure(code: int | None, message: str | None, retryable: bool) -> None:
    assert classify_failure(code, message).retryable is retryable


def test_the_emulator_causes_classify_as_they_claim() -> None:
    for name, cause in CAUSES.items():
        verdict = classify_failure(cause.code, cause.message.format(region="us-central1"))
        assert verdict.retryable is cause.retryable, name


def test_parse_job_fault() -> None:
    assert parse_job_fault("stockout") == JobFault("stockout", 1)
    assert parse_job_fault("Preempted:2") == JobFault("preempted", 2)
    with pytest.raises(UsageError, match="cause must be one of stockout, preempted, internal, replica, quota"):
        parse_job_fault("meteor")
    with pytest.raises(UsageError, match="N must be a whole number >= 1, got '0'"):
        parse_job_fault("stockout:0")


def test_backoff_and_variants() -> None:
    assert [backoff(n, 30) for n in (2, 3, 4, 7, 9)] == [30, 60, 120, 600, 600]
    fallback = ({"region": "europe-west4"}, {"machine_type": "a2-highgpu-1g"})
    assert variant_for(1, fallback) == ("primary", [])
    assert variant_for(2, fallback) == ("scheduling.fallback[0]: region=europe-west4",
                                        ["region=europe-west4", "scheduling.fallback=null"])
    assert variant_for(3, fallback)[1] == ["cluster.chief.machine_type=a2-highgpu-1g", "cluster.chief.accelerator=null",
                                           "cluster.chief.accelerator_count=null", "scheduling.fallback=null"]
    assert variant_for(4, fallback)[0] == "primary"
    assert fallback_overrides({"machine_type": "n1-standard-8", "accelerator": "t4", "accelerator_count": 2}) == [
        "cluster.chief.machine_type=n1-standard-8", "cluster.chief.accelerator=t4",
        "cluster.chief.accelerator_count=2", "scheduling.fallback=null"]


FALLBACK_JOB = """name: fb
trainer:
  package_uris: [gs://my-bucket/t.tar.gz]
  module: trainer.task
  image: tf-gpu.2-17
cluster:
  chief: {machine_type: n1-standard-8, accelerator: t4, accelerator_count: 1}
scheduling:
  fallback:
    - {region: europe-west4}
    - {machine_type: n1-standard-8, accelerator: t4, accelerator_count: 3}
    - {machine_type: a2-highgpu-1g, acelerator: a100}
"""


def test_fallbacks_are_validated_like_the_primary_with_positions() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(FALLBACK_JOB, "job.yaml")
    assert [str(p) for p in err.value.problems] == [
        "job.yaml:11:73: cluster.chief.accelerator_count: NVIDIA_TESLA_T4 on N1 comes in counts 1, 2, 4, got 3; "
        "did you mean 2? (with scheduling.fallback[1])",
        "job.yaml:12:37: scheduling.fallback[2].acelerator: unknown key 'acelerator' in scheduling.fallback[2]; "
        "allowed: region, machine_type, accelerator, accelerator_count; did you mean 'accelerator'?",
    ]
    good = parse_config(FALLBACK_JOB.replace("count: 3}", "count: 2}").replace("acelerator", "accelerator"), "job.yaml")
    assert good.scheduling.fallback[0] == {"region": "europe-west4"}
    assert "fallback" not in str(good.chief)  # the primary is untouched


@pytest.fixture
def failing(make_emulator: MakeEmulator, request: Any) -> Emulator:
    return make_emulator(with_job_faults(runner, parse_job_fault(request.param)), pending_seconds=0.05,
                         cancel_seconds=0.05, point_at=PROJECT)


def labels_of(emu: Emulator) -> list[dict[str, str]]:
    return [dict(job.labels) for job in emu.jobs()]


@pytest.mark.parametrize("failing", ["stockout"], indirect=True)
@pytest.mark.slow
def test_a_stockout_is_resubmitted_and_the_second_attempt_succeeds(tmp_path: Path, failing: Emulator,
                                                                    bucket: Any) -> None:  # noqa: F811
    job = write_job(tmp_path, job_text())
    code, out, err = run("submit", str(job), "--recover", "2", "--recover-backoff", "0.01s", "--poll", "0.02")
    assert code == 0, err
    first, second = failing.jobs()
    assert first.state.name == "JOB_STATE_FAILED" and first.error.code == 8
    assert first.error.message.startswith("Resources are insufficient in region: us-central1.")
    assert second.state.name == "JOB_STATE_SUCCEEDED"
    first_id, second_id = first.name.rsplit("/", 1)[1], second.name.rsplit("/", 1)[1]
    assert first.labels["vtrain-attempt"] == "1" and "vtrain-previous-attempt" not in first.labels
    assert (second.labels["vtrain-attempt"], second.labels["vtrain-previous-attempt"]) == ("2", first_id)
    assert first.labels["vtrain-config-hash"] == second.labels["vtrain-config-hash"]  # the same job, again
    assert first.job_spec == second.job_spec  # same base_output_dir: the second resumes from the checkpoints
    assert re.search(rf"attempt 1 \({first_id}\) FAILED, retryable: a stock-out: no capacity for this machine in "
                     r"the region; resubmitting in 0.01s \(primary\)", err)
    assert out.splitlines()[-1] == f"{second.name} ended JOB_STATE_SUCCEEDED on attempt 2 of 3"
    code, status, _ = run("status", second_id)
    assert re.search(rf"^attempt\s+2 \(after {first_id}\)$", status, re.M)


@pytest.mark.parametrize("failing", ["replica"], indirect=True)
@pytest.mark.slow
def test_a_trainer_failure_is_not_resubmitted(tmp_path: Path, failing: Emulator, bucket: Any) -> None:  # noqa: F811
    code, _, err = run("submit", str(write_job(tmp_path, job_text())), "--recover", "3", "--recover-backoff", "0s",
                       "--poll", "0.02")
    assert code == 10
    assert len(failing.jobs()) == 1
    assert "attempt 1 FAILED, not retryable (a replica failed (the trainer's own error)): not resubmitted" in err
    assert "error: job " in err and "exited with a non-zero status of 1" in err and "Traceback" not in err


@pytest.mark.parametrize("failing", ["preempted:5"], indirect=True)
@pytest.mark.slow
def test_recover_stops_when_its_attempts_are_used_up(tmp_path: Path, failing: Emulator, bucket: Any) -> None:  # noqa: F811
    code, out, err = run("submit", str(write_job(tmp_path, job_text())), "--recover", "1", "--recover-backoff", "0s",
                         "--poll", "0.02", "-o", "json")
    assert code == 10
    assert [labels["vtrain-attempt"] for labels in labels_of(failing)] == ["1", "2"]
    assert "attempt 2 FAILED, retryable, but --recover 1 is used up" in err
    assert '"vtrain-attempt": "2"' in out  # -o json: the last attempt's job


def test_emulator_flag_is_checked_before_listening() -> None:
    result = CliRunner().invoke(cli, ["emulator", "--fail-jobs", "meteor", "--port", "0"])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: --fail-jobs 'meteor': cause must be one of stockout, preempted, "
                                     "internal, replica, quota (optionally :N jobs)")
