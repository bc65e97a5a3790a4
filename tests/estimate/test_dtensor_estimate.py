"""`vtrain estimate` for model parallelism (issue 22): memory and traffic per device under a mesh, and the
ready `dtensor:` block where the advisor says "model parallel"; the block it prints validates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from vtrain.cli import cli
from vtrain.estimate.dtensor import mesh_plan, suggest_mesh
from vtrain.jobfile.load import parse_config

GB = 1e9
IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest"
HEAD = "name: {name}\ntrainer:\n  container:\n    image_uri: " + IMAGE + "\n"


def estimate(tmp_path: Path, text: str, *args: str) -> dict:
    path = tmp_path / "job.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["estimate", str(path), *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("shards", "replicas", "per", "mesh", "new_replicas"),
    [
        (3, 2, 4, (("batch", 2), ("model", 4)), 2),  # within a replica: the next power of two
        (2, 2, 8, (("batch", 8), ("model", 2)), 2),
        (16, 2, 8, (("batch", 1), ("model", 16)), 2),  # two whole replicas per model copy
        (16, 3, 8, (("batch", 2), ("model", 16)), 4),  # rounded up to a multiple of 2 replicas
        (5, 4, 1, (("batch", 1), ("model", 8)), 8),  # CPU machines: one device (its RAM) each
        (2, 1, 3, (("batch", 1), ("model", 3)), 1),  # an odd GPU count: the whole replica
    ],
)
def test_suggested_mesh(shards: int, replicas: int, per: int, mesh: tuple, new_replicas: int) -> None:
    got, count = suggest_mesh(shards, replicas, per)
    assert (got, count) == (mesh, new_replicas)
    size = got[0][1] * got[1][1]
    assert size == count * per and got[1][1] >= shards


def test_memory_and_traffic_per_device_by_hand() -> None:
    """7B, adam fp32: 112 GB state, 28 GB gradients; mesh batch 2 x model 4 on 2 x 4 GPUs at 100 Gbps."""
    plan = mesh_plan((("batch", 2), ("model", 4)), replicas=2, devices_per_replica=4, state_bytes=112 * GB,
                     activations=2 * GB, grad_bytes=28 * GB, device_bytes=40 * GB, nic_gbps=100)  # fmt: skip
    assert plan.state_bytes_per_device == 28 * GB and plan.bytes_per_device == 30 * GB and plan.fits
    assert plan.batch_bytes_per_step == pytest.approx(2 * 1 / 2 * 7 * GB)  # ring over 2: 2(B-1)/B x G/M
    assert plan.model_bytes_per_step == pytest.approx(3 * 3 / 4 * 28 * GB)  # gather x2 + reduce-scatter
    assert plan.model_within_replica
    assert plan.network_seconds_per_step == pytest.approx(7 * GB * 8 / 100e9)  # only `batch` leaves a machine
    across = mesh_plan((("batch", 1), ("model", 8)), replicas=2, devices_per_replica=4, state_bytes=112 * GB,
                       activations=None, grad_bytes=28 * GB, device_bytes=40 * GB, nic_gbps=100)  # fmt: skip
    assert not across.model_within_replica and across.batch_bytes_per_step == 0
    assert across.network_seconds_per_step == pytest.approx(3 * 7 / 8 * 28 * GB * 8 / 100e9)
    tight = mesh_plan((("batch", 8),), replicas=2, devices_per_replica=4, state_bytes=112 * GB, activations=None,
                      grad_bytes=28 * GB, device_bytes=40 * GB, nic_gbps=100)  # fmt: skip
    assert tight.model == 1 and tight.fits is False


def test_the_advisor_prints_a_block_that_validates(tmp_path: Path) -> None:
    text = HEAD.format(name="big") + "cluster:\n  chief: {machine_type: a2-highgpu-4g}\n  workers: {replicas: 1}\n"
    data = estimate(tmp_path, text, "--params", "7B", "--activations", "2GB")
    rec = data["recommendation"]
    assert rec["kind"] == "model_parallel" and rec["numbers"]["sharded_devices"] == 4  # ⌈112 / (36 - 2)⌉
    assert rec["job_file"] == "distribution_strategy: dtensor\ndtensor:\n  mesh: {batch: 2, model: 4}"
    assert rec["numbers"]["dtensor_bytes_per_device"] == pytest.approx(30 * GB)
    pasted = yaml.safe_load(text)
    pasted.update(yaml.safe_load(rec["job_file"]))
    config = parse_config(yaml.safe_dump(pasted), "pasted.yaml")
    assert config.dtensor is not None and config.dtensor.mesh == (("batch", 2), ("model", 4))
    out = CliRunner().invoke(cli, ["estimate", str(tmp_path / "job.yaml"), "--params", "7B"]).output
    assert "in the job file" in out and "    dtensor:\n      mesh: {batch: 2, model: 4}" in out


def test_a_block_that_needs_more_replicas_says_so(tmp_path: Path) -> None:
    """70B (1.12 TB) on 8-GPU A100-40GB machines: 32 shards = 4 machines; a 3-replica job is given 4."""
    text = HEAD.format(name="huge") + "cluster:\n  chief: {machine_type: a2-highgpu-8g}\n  workers: {replicas: 2}\n"
    rec = estimate(tmp_path, text, "--params", "70B")["recommendation"]
    block = yaml.safe_load(rec["job_file"])
    assert block["dtensor"]["mesh"] == {"batch": 1, "model": 32}
    assert block["cluster"]["workers"]["replicas"] == 3
    pasted = yaml.safe_load(text)
    pasted.update({k: v for k, v in block.items() if k != "cluster"})
    pasted["cluster"]["workers"]["replicas"] = 3
    parse_config(yaml.safe_dump(pasted), "pasted.yaml")  # the mesh covers the 4 x 8 GPUs
    assert "across replicas" in " ".join(rec["reasons"])


def test_a_dtensor_job_gets_its_own_mesh_in_numbers(tmp_path: Path) -> None:
    text = (HEAD.format(name="mp") + "distribution_strategy: dtensor\ndtensor: {mesh: {batch: 2, model: 4}}\n"
            "cluster:\n  chief: {machine_type: a2-highgpu-4g}\n  workers: {replicas: 1}\n")  # fmt: skip
    data = estimate(tmp_path, text, "--params", "1B")
    mesh = data["dtensor"]
    assert mesh["mesh"] == {"batch": 2, "model": 4} and (mesh["model"], mesh["batch"]) == (4, 2)
    assert mesh["state_bytes_per_device"] == pytest.approx(16 * GB / 4) and mesh["fits"] is True
    assert mesh["batch_bytes_per_step"] == pytest.approx(4 * GB / 4)
    assert any("trains with DTensor" in note for note in data["notes"])
    out = CliRunner().invoke(cli, ["estimate", str(tmp_path / "job.yaml"), "--params", "1B"]).output
    assert "dtensor mesh {batch: 2, model: 4}: 2 replica(s) x 4 device(s)" in out
    assert "state 16.00 GB / 4 = 4.00 GB of 40.00 GB: fits" in out


def test_a_cpu_dtensor_job_shares_host_ram_between_logical_devices(tmp_path: Path) -> None:
    text = (HEAD.format(name="cpu") + "distribution_strategy: dtensor\ndtensor: {mesh: {batch: 2, model: 2}}\n"
            "cluster:\n  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 1}\n")  # fmt: skip
    mesh = estimate(tmp_path, text, "--params", "100M")["dtensor"]
    assert mesh["devices_per_replica"] == 2 and mesh["device_bytes"] == pytest.approx(15 * GB / 2)
    assert mesh["state_bytes_per_device"] == pytest.approx(1.6 * GB / 2)


def test_render_hints_no_reduction_server_for_a_dtensor_job() -> None:
    from vtrain.estimate import estimate_hint
    from vtrain.jobfile.load import load_config

    config = load_config(Path(__file__).resolve().parents[2] / "configs" / "model-parallel.yaml")
    assert estimate_hint(config) is None  # validate refuses reducers with dtensor: no hint towards them
    plain = load_config(Path(__file__).resolve().parents[2] / "configs" / "model-parallel.yaml",
                        overrides=["distribution_strategy=multi_worker_mirrored", "dtensor=null"])
    assert estimate_hint(plain) is not None and "Reduction Server" in estimate_hint(plain)
