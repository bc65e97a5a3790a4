"""Config → CustomJob: pool order, inheritance, images, and equality with the real proto."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.cloud.aiplatform_v1 import CustomJob

from tests.helpers import assert_equals_real_proto, planned, write_job
from vtrain.jobfile.load import load_config
from vtrain.request.custom_job import build_job, build_job_dict

GPU_JOB = """
name: gpu-job
region: europe-west4
base_output_dir: gs://my-bucket/out
labels: {team: nlp}
trainer:
  package_uris: [gs://my-bucket/pkgs/trainer-1.tar.gz]
  module: trainer.task
  image: tf.2-17
  args: [--epochs=3]
  env: {BATCH: 64, API_TOKEN: abc}
cluster:
  chief: {machine_type: a2-highgpu-8g, boot_disk: {type: pd-ssd, size_gb: 200}}
  workers: {replicas: 7}
  reduction_server: {replicas: auto}
  evaluator: {machine_type: n1-standard-8, args: [--mode=eval]}
scheduling: {timeout: 24h, strategy: spot, restart_job_on_worker_restart: true}
"""


def _body(tmp_path: Path, text: str) -> dict:
    return build_job_dict(*planned(load_config(write_job(tmp_path, text))))


def test_round_trip_through_real_proto_is_exact(tmp_path: Path) -> None:
    assert_equals_real_proto(_body(tmp_path, GPU_JOB))


def test_build_job_returns_real_custom_job(tmp_path: Path) -> None:
    job = build_job(*planned(load_config(write_job(tmp_path, GPU_JOB))))
    assert isinstance(job, CustomJob)
    assert job.display_name == "gpu-job"
    assert job.job_spec.worker_pool_specs[1].replica_count == 7
    assert job.job_spec.scheduling.timeout.total_seconds() == 86400


def test_pools_in_vertex_order_with_reducers_sized(tmp_path: Path) -> None:
    pools = _body(tmp_path, GPU_JOB)["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "7", "25", "1"]
    assert pools[0]["machineSpec"] == {
        "machineType": "a2-highgpu-8g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 8,
    }
    assert pools[1]["machineSpec"] == pools[0]["machineSpec"]  # inherited from the chief
    assert pools[1]["diskSpec"] == {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200}
    assert pools[2] == {
        "machineSpec": {"machineType": "n1-highcpu-16"},
        "replicaCount": "25",
        "containerSpec": {
            "imageUri": "europe-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
        },
    }
    assert pools[3]["machineSpec"] == {"machineType": "n1-standard-8"}
    assert pools[3]["pythonPackageSpec"]["args"] == ["--mode=eval"]
    assert pools[3]["pythonPackageSpec"]["executorImageUri"].endswith("/tf-cpu.2-17.py310:latest")


def test_python_package_spec_and_strategy_env(tmp_path: Path) -> None:
    chief = _body(tmp_path, GPU_JOB)["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert chief == {
        "executorImageUri": "europe-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest",
        "packageUris": ["gs://my-bucket/pkgs/trainer-1.tar.gz"],
        "pythonModule": "trainer.task",
        "args": ["--epochs=3"],
        "env": [
            {"name": "BATCH", "value": "64"},
            {"name": "API_TOKEN", "value": "abc"},
            {"name": "VTRAIN_DISTRIBUTION_STRATEGY", "value": "auto"},
        ],
    }


def test_scheduling_and_job_fields(tmp_path: Path) -> None:
    body = _body(tmp_path, GPU_JOB)
    assert body["jobSpec"]["scheduling"] == {
        "timeout": "86400s",
        "restartJobOnWorkerRestart": True,
        "strategy": "SPOT",
    }
    assert body["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://my-bucket/out"}
    assert body["labels"] == {"team": "nlp"}


def test_empty_middle_pool_is_sent_as_empty_object(tmp_path: Path) -> None:
    body = _body(
        tmp_path,
        """
        name: chief-and-evaluator
        trainer: {package_uris: [gs://my-bucket/t.tar.gz], module: trainer.task, image: tf-cpu.2-16}
        cluster:
          chief: {machine_type: n1-standard-4}
          evaluator: {}
        """,
    )
    pools = body["jobSpec"]["workerPoolSpecs"]
    assert pools[1] == {} and pools[2] == {}
    assert pools[3]["machineSpec"] == {"machineType": "n1-standard-4"}
    CustomJob.from_json(json.dumps(body))  # accepted by the real schema


def test_trailing_empty_pools_dropped(tmp_path: Path) -> None:
    body = _body(
        tmp_path,
        """
        name: one
        trainer: {package_uris: [gs://my-bucket/t.tar.gz], module: trainer.task}
        cluster: {chief: {machine_type: n1-standard-4}}
        """,
    )
    assert len(body["jobSpec"]["workerPoolSpecs"]) == 1
    # no image given: the latest prebuilt TF, the family picked from the hardware
    spec = body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert spec["executorImageUri"] == "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"


def test_auto_image_family_per_pool(tmp_path: Path) -> None:
    body = _body(
        tmp_path,
        """
        name: mixed
        region: asia-east1
        trainer: {package_uris: [gs://my-bucket/t.tar.gz], module: trainer.task, image: tf.2-15}
        cluster:
          chief: {machine_type: n1-standard-8, accelerator: v100, accelerator_count: 1}
          workers: {replicas: 2}
          parameter_servers: {replicas: 2}
        """,
    )
    images = [p["pythonPackageSpec"]["executorImageUri"] for p in body["jobSpec"]["workerPoolSpecs"]]
    assert images == [
        "asia-docker.pkg.dev/vertex-ai/training/tf-gpu.2-15.py310:latest",
        "asia-docker.pkg.dev/vertex-ai/training/tf-gpu.2-15.py310:latest",
        "asia-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest",
    ]
    ps = body["jobSpec"]["workerPoolSpecs"][2]["machineSpec"]
    assert ps == {"machineType": "n1-standard-8"}  # CPU default for parameter servers of a GPU job


def test_container_trainer_and_specific_reservation(tmp_path: Path) -> None:
    body = _body(
        tmp_path,
        """
        name: container
        trainer:
          container: {image_uri: us-docker.pkg.dev/p/r/img:1, command: [python, -m, trainer.task]}
          args: [--x=1]
        cluster: {chief: {machine_type: g2-standard-8}}
        reservation: {affinity: specific, name: projects/p/zones/us-central1-a/reservations/r1}
        kms_key: projects/p/locations/us-central1/keyRings/k/cryptoKeys/c
        """,
    )
    pool = body["jobSpec"]["workerPoolSpecs"][0]
    assert pool["containerSpec"] == {
        "imageUri": "us-docker.pkg.dev/p/r/img:1",
        "command": ["python", "-m", "trainer.task"],
        "args": ["--x=1"],
        "env": [{"name": "VTRAIN_DISTRIBUTION_STRATEGY", "value": "auto"}],
    }
    assert pool["machineSpec"]["reservationAffinity"] == {
        "reservationAffinityType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/p/zones/us-central1-a/reservations/r1"],
    }
    assert body["encryptionSpec"] == {"kmsKeyName": "projects/p/locations/us-central1/keyRings/k/cryptoKeys/c"}


@pytest.mark.parametrize(
    ("machine", "topology"),
    [("ct5lp-hightpu-4t", "2x2"), ("ct5lp-hightpu-8t", "2x4"), ("ct5lp-hightpu-1t", "1x1")],
)
def test_tpu_vm_machine_spec(tmp_path: Path, machine: str, topology: str) -> None:
    body = _body(
        tmp_path,
        f"""
        name: tpu
        trainer: {{package_uris: [gs://my-bucket/t.tar.gz], module: trainer.task, image: tf-tpu.2-15}}
        cluster: {{chief: {{machine_type: {machine}}}}}
        """,
    )
    assert body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == {"machineType": machine, "tpuTopology": topology}


def test_flex_start_max_wait(tmp_path: Path) -> None:
    body = _body(
        tmp_path,
        """
        name: flex
        trainer: {package_uris: [gs://my-bucket/t.tar.gz], module: trainer.task}
        cluster: {chief: {machine_type: a3-highgpu-8g}, workers: {replicas: 1}}
        scheduling: {strategy: flex_start, max_wait: 30m, disable_retries: true}
        """,
    )
    assert body["jobSpec"]["scheduling"] == {
        "strategy": "FLEX_START",
        "disableRetries": True,
        "maxWaitDuration": "1800s",
    }
    CustomJob.from_json(json.dumps(body))
