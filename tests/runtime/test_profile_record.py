"""The profile's file: where a replica writes it, the job-shape hash, the step statistics. No TensorFlow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vtrain.runtime.profile_record import (
    MIN_TIMED_STEPS,
    PROFILE_VERSION,
    job_spec_from_env,
    percentile,
    profile_dir,
    shape_hash,
    step_stats,
    write_profile,
)

POOL = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
        "pythonPackageSpec": {"executorImageUri": "img", "packageUris": ["gs://a/t.tar.gz"], "pythonModule": "m",
                              "args": ["--epochs=2"], "env": [{"name": "A", "value": "1"}]}}  # fmt: skip


def test_a_local_run_writes_into_its_own_run_folder(tmp_path: Path) -> None:
    run = tmp_path / "vtrain-local" / "local-1"
    run.mkdir(parents=True)
    env = {"AIP_MODEL_DIR": f"{tmp_path}/model/", "CLOUD_ML_JOB_ID": "local-1"}
    assert profile_dir(env) == str(run / "profile")


def test_on_vertex_the_profile_goes_under_the_base_output_dir() -> None:
    env = {"AIP_MODEL_DIR": "gs://bucket/out/model/", "CLOUD_ML_JOB_ID": "123"}
    assert profile_dir(env) == "gs://bucket/out/vtrain-profile/123"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AIP_MODEL_DIR": "gs://b/out/model/"}, None),  # no job id: nowhere to keep it apart
        ({"CLOUD_ML_JOB_ID": "1"}, None),  # no output directory
        ({"AIP_MODEL_DIR": "gs://b/out/model/", "CLOUD_ML_JOB_ID": "../x"}, None),
        ({"VTRAIN_PROFILE_DIR": "/somewhere", "CLOUD_ML_JOB_ID": "1"}, "/somewhere"),
        ({"VTRAIN_PROFILE_DIR": "off", "AIP_MODEL_DIR": "gs://b/m/", "CLOUD_ML_JOB_ID": "1"}, None),
        ({"VTRAIN_PROFILE_DIR": "0", "AIP_MODEL_DIR": "gs://b/m/", "CLOUD_ML_JOB_ID": "1"}, None),
    ],
)
def test_where_a_profile_goes(env: dict[str, str], expected: str | None) -> None:
    assert profile_dir(env) == expected


def test_the_shape_hash_ignores_staging_and_env_but_not_the_shape() -> None:
    base = shape_hash({"workerPoolSpecs": [POOL, {}]})
    staged = {**POOL, "pythonPackageSpec": {**POOL["pythonPackageSpec"], "packageUris": ["file:///cache/t.tar.gz"],
                                            "env": []}}
    assert shape_hash({"workerPoolSpecs": [staged, {}]}) == base
    snake = {"worker_pool_specs": [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                                    "python_package_spec": {"executor_image_uri": "img", "python_module": "m",
                                                            "args": ["--epochs=2"]}}, {}]}  # fmt: skip
    assert shape_hash(snake) == base  # Vertex's CLUSTER_SPEC may spell the spec in snake_case
    more = {**POOL, "pythonPackageSpec": {**POOL["pythonPackageSpec"], "args": ["--epochs=3"]}}
    assert shape_hash({"workerPoolSpecs": [more, {}]}) != base
    assert shape_hash({"workerPoolSpecs": [{**POOL, "replicaCount": "2"}, {}]}) != base
    assert shape_hash(None) is None


def test_the_job_spec_comes_from_cluster_spec() -> None:
    spec = {"workerPoolSpecs": [POOL]}
    assert job_spec_from_env({"CLUSTER_SPEC": json.dumps({"job": spec})}) == spec
    assert job_spec_from_env({"CLUSTER_SPEC": json.dumps({"job": json.dumps(spec)})}) == spec
    assert job_spec_from_env({"CLUSTER_SPEC": "not json"}) is None
    assert job_spec_from_env({}) is None


def test_step_statistics_leave_out_the_warm_up() -> None:
    durations = [5.0, 3.0] + [0.1 * (i + 1) for i in range(10)]  # two slow first steps (tracing)
    stats = step_stats(durations, [0.0, 0.0] + [0.01] * 10)
    assert (stats["count"], stats["warmup"], stats["timed"]) == (12, 2, 10)
    assert stats["median_s"] == pytest.approx(0.55)
    assert stats["p90_s"] == pytest.approx(0.91)
    assert stats["input_wait_share"] == pytest.approx(0.1 / 5.5)
    assert step_stats([0.1] * 100)["warmup"] == 10  # a tenth of a long run


def test_too_few_steps_have_no_step_time() -> None:
    stats = step_stats([0.1] * (2 + MIN_TIMED_STEPS - 1))
    assert stats["median_s"] is None and stats["p90_s"] is None
    assert step_stats([0.1] * (2 + MIN_TIMED_STEPS))["median_s"] == pytest.approx(0.1)


def test_percentile_interpolates() -> None:
    assert percentile([4, 1, 3, 2], 0.5) == 2.5
    assert percentile([1.0], 0.9) == 1.0
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_a_profile_is_written_whole_with_its_version(tmp_path: Path) -> None:
    path = write_profile(str(tmp_path / "profile"), "chief-0", {"replica": "chief-0", "complete": True})
    assert path == str(tmp_path / "profile" / "chief-0.json")
    assert json.loads(Path(path).read_text()) == {"version": PROFILE_VERSION, "replica": "chief-0", "complete": True}
    assert [p.name for p in (tmp_path / "profile").iterdir()] == ["chief-0.json"]  # no temporary file left


@pytest.mark.parametrize("spec", ["[" * 100_000 + "]" * 100_000, '{"job": ' + json.dumps("[" * 100_000 + "]" * 100_000)
                                  + "}", '{"job": [1, 2]}', '{"job": "7"}', "[]"])
def test_a_cluster_spec_the_replica_cannot_use_has_no_job(spec: str) -> None:
    """CLUSTER_SPEC is Vertex's, read inside every replica: a deep or odd one is "no job", never a RecursionError."""
    assert job_spec_from_env({"CLUSTER_SPEC": spec}) is None
    assert shape_hash(job_spec_from_env({"CLUSTER_SPEC": spec})) is None
