"""`vtrain.pipelines.training_op`: the compiled pipeline's CustomJob is `vtrain render`'s, field by field."""

# No `from __future__ import annotations`: KFP reads pipeline annotations as types.

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kfp", reason="the pipelines extra (kfp) is not installed")
pytest.importorskip("google_cloud_pipeline_components", reason="google-cloud-pipeline-components is not installed")

from kfp import dsl  # noqa: E402

from tests.conftest import REPO  # noqa: E402
from tests.helpers import (
    planned,
    write_job,  # noqa: E402
)
from tests.pipelines.compiled import compile_to_spec, custom_jobs, with_op_defaults  # noqa: E402
from vtrain.errors import ConfigError, UsageError  # noqa: E402
from vtrain.jobfile.load import load_config  # noqa: E402
from vtrain.pipelines import training_op  # noqa: E402
from vtrain.request.build import CUSTOM_JOB, build_request  # noqa: E402

EXAMPLES = sorted([*(REPO / "configs").glob("**/*.yaml"), *(REPO / "examples").glob("**/job.yaml")])
CUSTOM_JOBS = [p for p in EXAMPLES if build_request(*planned(load_config(p))).kind == CUSTOM_JOB]
TUNING = [p for p in EXAMPLES if p not in CUSTOM_JOBS]


def _compiled_job(tmp_path: Path, job_file: Path, args: Any = None, params: dict[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    @dsl.pipeline(name="train")
    def pipeline(lr: float = 0.1) -> None:
        training_op(job_file, args(lr) if callable(args) else args, **kwargs)

    jobs = custom_jobs(compile_to_spec(pipeline, tmp_path), params or {"lr": 0.1})
    assert len(jobs) == 1
    return next(iter(jobs.values()))


@pytest.mark.parametrize("path", CUSTOM_JOBS, ids=[str(p.relative_to(REPO)) for p in CUSTOM_JOBS])
def test_the_compiled_custom_job_is_renders_field_by_field(tmp_path: Path, path: Path) -> None:
    request = build_request(*planned(load_config(path)))
    job = _compiled_job(tmp_path, path, allow_credentials=True)  # spot.yaml's env has a WANDB_API_KEY
    body = request.body
    assert job.pop("_location") == request.config.region
    assert job.pop("_project") == (request.config.project or "{{$.pipeline_google_cloud_project_id}}")
    assert job["displayName"] == body["displayName"]
    assert job.get("labels") == body.get("labels")
    assert job.get("encryptionSpec") == body.get("encryptionSpec")
    expected = with_op_defaults(body["jobSpec"])
    assert set(job["jobSpec"]) == set(expected)
    for field in expected:
        assert job["jobSpec"][field] == expected[field], field
    assert set(job) - {"displayName", "jobSpec", "labels", "encryptionSpec"} == set()


def test_there_are_examples_and_the_coverage_one_needs_fields_the_op_lacks(tmp_path: Path) -> None:
    """vertex-coverage sets the Experiments contexts and more, which CustomTrainingJobOp has no input for."""
    assert len(CUSTOM_JOBS) >= 10
    job = _compiled_job(tmp_path, REPO / "configs" / "vertex-coverage.yaml")
    assert job["jobSpec"]["experiment"].endswith("/contexts/mnist")


@pytest.mark.parametrize("path", TUNING, ids=[p.stem for p in TUNING])
def test_a_tuning_job_file_is_refused_in_one_line(path: Path) -> None:
    with pytest.raises(UsageError, match=r"a job file with `tuning:` makes a HyperparameterTuningJob"):
        _compiled_job(Path("/nonexistent"), path)


def test_a_pipeline_parameter_reaches_every_trainer_pools_args(tmp_path: Path) -> None:
    path = REPO / "configs" / "quickstart.yaml"
    job = _compiled_job(tmp_path, path, args=lambda lr: ["--lr", lr, "--tag=x"], params={"lr": 0.25})
    pools = job["jobSpec"]["workerPoolSpecs"]
    for pool in pools:
        assert pool["pythonPackageSpec"]["args"] == [
            "--epochs=2", "--steps-per-epoch=20", "--batch-size=64", "--lr", "0.25", "--tag=x"]


def test_pool_args_of_their_own_get_the_args_too_and_the_reducers_none(tmp_path: Path) -> None:
    job_file = write_job(tmp_path, """
        name: own-args
        region: us-central1
        trainer: {package_uris: [gs://my-bkt/t.tar.gz], module: trainer.task, image: tf-gpu.2-17, args: [--a]}
        cluster:
          chief: {machine_type: a2-highgpu-8g, accelerator: a100, accelerator_count: 8}
          workers: {replicas: 2, args: [--w]}
          reduction_server: {replicas: 1, machine_type: n1-highcpu-16}
        """)
    job = _compiled_job(tmp_path, job_file, args=["--lr", "3"])
    chief, workers, reducers = job["jobSpec"]["workerPoolSpecs"]
    assert chief["pythonPackageSpec"]["args"] == ["--a", "--lr", "3"]
    assert workers["pythonPackageSpec"]["args"] == ["--w", "--lr", "3"]
    assert "args" not in reducers["containerSpec"]


def test_args_are_checked_at_compile_time(tmp_path: Path) -> None:
    path = REPO / "configs" / "quickstart.yaml"
    with pytest.raises(UsageError, match=r"args\[1\] is a int: give strings"):
        _compiled_job(tmp_path, path, args=["--steps", 3])
    with pytest.raises(UsageError, match="args must be a list"):
        _compiled_job(tmp_path, path, args="--lr=3")


def test_a_job_file_mistake_is_vtrains_own_error_at_compile_time(tmp_path: Path) -> None:
    bad = write_job(tmp_path, """
        name: bad
        trainer: {package_uris: [gs://my-bkt/t.tar.gz], module: trainer.task, image: tf-cpu.2-17}
        cluster: {chief: {machine_type: n1-standard-4, replicaz: 2}}
        """)
    with pytest.raises(ConfigError) as caught:
        _compiled_job(tmp_path, bad)
    assert "cluster.chief.replicaz" in str(caught.value) and "job.yaml:3" in str(caught.value)


def test_diloco_args_never_reach_the_syncer(tmp_path: Path) -> None:
    path = REPO / "configs" / "diloco.yaml"
    job = _compiled_job(tmp_path, path, args=["--lr", "3"])
    pools = [p for p in job["jobSpec"]["workerPoolSpecs"] if p]
    syncer, *learners = pools
    spec = syncer.get("pythonPackageSpec") or syncer["containerSpec"]
    assert "--lr" not in json.dumps(spec.get("args", []))
    assert all("--lr" in (p.get("pythonPackageSpec") or p["containerSpec"])["args"] for p in learners)
