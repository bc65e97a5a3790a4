"""Tuning jobs on the emulator through the real `aiplatform_v1.JobServiceClient` and the CLI.

The emulator serves hyperparameterTuningJobs create/get/list/cancel; with the local tuning
runner (`--run-jobs`) every trial really runs (tests/data/trainers/tuner, no TensorFlow), so
`submit --wait` ends with the trial that really scored best.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.api_core.exceptions import BadRequest, NotFound
from google.cloud.aiplatform_v1 import HyperparameterTuningJob, JobState

from tests.conftest import REPO
from tests.helpers import MakeEmulator, write_job
from vtrain.cli import cli
from vtrain.emulator import Emulator, GatedRunner
from vtrain.emulator.local_studies import TuningRunner
from vtrain.jobfile.load import load_config
from vtrain.request.tuning_job import build_tuning_dict, to_tuning_proto

TUNER = REPO / "tests" / "data" / "trainers" / "tuner"
PROJECT = "test-project"
NAME_RE = rf"projects/{Emulator.project_number(PROJECT)}/locations/us-central1/hyperparameterTuningJobs/([0-9]+)"


def tuning_job(tmp_path: Path, *, args: str = "[]", algorithm: str = "grid", extra: str = "") -> Path:
    return write_job(tmp_path, f"""
        name: tune-ci
        region: us-central1
        staging_bucket: gs://stage-bkt/s
        base_output_dir: gs://stage-bkt/out
        trainer:
          package: {TUNER}
          module: trainer.task
          image: tf-cpu.2-17
          args: {args}
        cluster:
          chief: {{machine_type: n1-standard-4}}
        tuning:
          metric: {{name: score, goal: maximize}}
          parameters:
            x: {{type: discrete, values: [1, 3]}}
            y: {{type: categorical, values: [a, b]}}
          algorithm: {algorithm}
          max_trials: 4
          parallel_trials: 2
          {extra}
        """)


def body_of(path: Path) -> dict[str, Any]:
    config = load_config(path)
    return build_tuning_dict(config, ["gs://stage-bkt/s/t.tar.gz"])


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


# ---- the real client against the emulator ---------------------------------------------------
def test_real_client_creates_gets_lists_and_cancels_a_tuning_job(tmp_path: Path) -> None:
    gate = GatedRunner(honour_cancel=True)
    with Emulator(tuning_runner=gate, pending_seconds=0.01, cancel_seconds=0.01) as emu:
        client = emu.client()
        parent = emu.parent(PROJECT)
        job = to_tuning_proto(body_of(tuning_job(tmp_path)))
        created = client.create_hyperparameter_tuning_job(parent=parent, hyperparameter_tuning_job=job)
        assert re.fullmatch(NAME_RE, created.name)
        assert created.state == JobState.JOB_STATE_PENDING
        assert created.study_spec.algorithm.name == "GRID_SEARCH"
        assert [p.parameter_id for p in created.study_spec.parameters] == ["x", "y"]
        gate.started.wait(5)
        got = client.get_hyperparameter_tuning_job(name=created.name)
        assert got.state == JobState.JOB_STATE_RUNNING and got.max_trial_count == 4
        listed = list(client.list_hyperparameter_tuning_jobs(parent=parent))
        assert [j.name for j in listed] == [created.name]
        assert list(client.list_custom_jobs(parent=parent)) == []  # two collections, kept apart
        client.cancel_hyperparameter_tuning_job(name=created.name)
        for _ in range(200):
            if client.get_hyperparameter_tuning_job(name=created.name).state == JobState.JOB_STATE_CANCELLED:
                break
            gate.started.wait(0.02)
        final = client.get_hyperparameter_tuning_job(name=created.name)
        assert final.state == JobState.JOB_STATE_CANCELLED and final.error.code == 1
        with pytest.raises(BadRequest, match="Cannot cancel HyperparameterTuningJob"):
            client.cancel_hyperparameter_tuning_job(name=created.name)
        with pytest.raises(NotFound):
            client.get_hyperparameter_tuning_job(name=f"{parent}/hyperparameterTuningJobs/123")


def test_emulator_refuses_what_vertex_refuses(tmp_path: Path) -> None:
    with Emulator(pending_seconds=0.01) as emu:
        client = emu.client()
        body = body_of(tuning_job(tmp_path))
        body["parallelTrialCount"] = 9
        with pytest.raises(BadRequest, match="parallel_trial_count"):
            client.create_hyperparameter_tuning_job(parent=emu.parent(PROJECT),
                                                    hyperparameter_tuning_job=to_tuning_proto(body))
        body = body_of(tuning_job(tmp_path))
        body["trialJobSpec"]["workerPoolSpecs"][0]["replicaCount"] = "2"
        with pytest.raises(BadRequest, match="trial_job_spec.worker_pool_specs"):
            client.create_hyperparameter_tuning_job(parent=emu.parent(PROJECT),
                                                    hyperparameter_tuning_job=to_tuning_proto(body))
        assert emu.tuning_jobs() == []


def test_emulator_without_run_jobs_suggests_trials_but_measures_none(tmp_path: Path) -> None:
    with Emulator(run_seconds=0.05, pending_seconds=0.01) as emu:
        client = emu.client()
        job = client.create_hyperparameter_tuning_job(parent=emu.parent(PROJECT),
                                                      hyperparameter_tuning_job=to_tuning_proto(body_of(
                                                          tuning_job(tmp_path))))
        for _ in range(300):
            got = client.get_hyperparameter_tuning_job(name=job.name)
            if got.state == JobState.JOB_STATE_SUCCEEDED:
                break
            emu._thread.join(0.02)  # type: ignore[union-attr]
        assert got.state == JobState.JOB_STATE_SUCCEEDED
        assert [t.id for t in got.trials] == ["1", "2", "3", "4"]
        assert all(not t.final_measurement.metrics for t in got.trials)


# ---- submit --wait with --run-jobs: the real trials, the real best --------------------------
@pytest.fixture(scope="module")
def tuning_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One environment cache for this file's trials: the tuner is installed once, not once per test."""
    return tmp_path_factory.mktemp("tuning-cache")


@pytest.fixture
def emu(make_emulator: MakeEmulator, tmp_path: Path, gcs: Any, tuning_cache: Path) -> Emulator:
    gcs.create_bucket("stage-bkt")
    runner = TuningRunner(cache_dir=tuning_cache, output_root=tmp_path / "runs", kill_grace=2)
    return make_emulator(tuning_runner=runner, pending_seconds=0.05, cancel_seconds=0.05, point_at=PROJECT)


@pytest.mark.slow
def test_submit_wait_runs_every_trial_and_ends_with_the_real_best(tmp_path: Path, emu: Emulator) -> None:
    code, out, err = run("submit", str(tuning_job(tmp_path)), "--wait", "--poll", "0.2")
    assert code == 0, err
    name = re.search(NAME_RE, out)
    assert name is not None
    assert "best trial 4: score 1.03 with --x=3 --y=b" in out
    (job,) = emu.tuning_jobs()
    assert job.state == JobState.JOB_STATE_SUCCEEDED
    finals = {t.id: t.final_measurement.metrics[0].value for t in job.trials}
    assert finals == pytest.approx({"1": -3.97, "2": -2.97, "3": 0.03, "4": 1.03})
    assert {t.id: (t.parameters[0].value, t.parameters[1].value) for t in job.trials} == {
        "1": (1.0, "a"), "2": (1.0, "b"), "3": (3.0, "a"), "4": (3.0, "b")}

    code, out, _ = run("status", name.group(1))
    assert code == 0
    assert "best trial 4: score 1.03 with --x=3 --y=b" in out
    assert re.search(r"4\*\s+SUCCEEDED\s+3\s+b\s+1\.03\s+3", out)

    code, out, _ = run("list", "-o", "json")
    assert [j["displayName"] for j in json.loads(out)] == ["tune-ci"]
    code, out, _ = run("list")
    assert "tune-ci (tuning)" in out

    code, out, _ = run("logs", name.group(1))
    assert code == 0
    assert "[trial-3 chief-0] trial 3 x=3.0 y=a" in out
    assert "best trial 4" in out


@pytest.mark.slow
def test_submit_wait_fails_when_trials_fail_beyond_the_budget(tmp_path: Path, emu: Emulator) -> None:
    path = tuning_job(tmp_path, args="[--fail-if-y=b]", extra="max_failed_trials: 1")
    code, out, err = run("submit", str(path), "--wait", "--poll", "0.2")
    assert code == 10, err
    assert "trials failed, more than max_failed_trials (1)" in err
    (job,) = emu.tuning_jobs()
    assert job.state == JobState.JOB_STATE_FAILED
    assert [t.state.name for t in job.trials].count("INFEASIBLE") == 2
    assert "failing on purpose" in next(t.infeasible_reason for t in job.trials if t.state.name == "INFEASIBLE")


@pytest.mark.slow
def test_cancel_stops_every_running_trial(tmp_path: Path, emu: Emulator) -> None:
    path = tuning_job(tmp_path, args="[--sleep=30]")
    code, out, _ = run("submit", str(path))
    assert code == 0
    name = re.search(NAME_RE, out).group(0)  # type: ignore[union-attr]
    for _ in range(600):
        job = emu.tuning_jobs()[0]
        if sum(t.state.name == "ACTIVE" for t in job.trials) == 2:
            break
        emu._thread.join(0.05)  # type: ignore[union-attr]
    code, out, _ = run("cancel", name)
    assert code == 0 and "Cancel requested" in out
    code, _, _ = run("status", name)
    for _ in range(600):
        if emu.tuning_jobs()[0].state == JobState.JOB_STATE_CANCELLED:
            break
        emu._thread.join(0.05)  # type: ignore[union-attr]
    assert emu.tuning_jobs()[0].state == JobState.JOB_STATE_CANCELLED
    code, out, _ = run("status", name, "--exit-code")
    assert code == 11


def test_dry_run_names_the_tuning_collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_PROJECT", PROJECT)
    monkeypatch.setenv("VTRAIN_REGION", "us-central1")
    code, out, err = run("submit", str(tuning_job(tmp_path)), "--dry-run", "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["request"]["url"].endswith(f"/v1/projects/{PROJECT}/locations/us-central1/hyperparameterTuningJobs")
    HyperparameterTuningJob.from_json(json.dumps(report["request"]["body"]))
