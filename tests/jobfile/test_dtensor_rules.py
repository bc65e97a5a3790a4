"""`distribution_strategy: dtensor` and its `dtensor:` block: the mesh against the cluster, with positions
and a mesh that fits in every refusal (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.load import parse_config
from vtrain.jobfile.rules.dtensor import nearest_mesh

HEAD = """\
name: demo
trainer:
  container: {image_uri: us-docker.pkg.dev/my-proj/repo/trainer:1}
distribution_strategy: dtensor
"""
GPU = "cluster:\n  chief: {machine_type: a2-highgpu-4g}\n  workers: {replicas: 1}\n"
CPU = "cluster:\n  chief: {machine_type: n1-standard-4}\n  workers: {replicas: 1}\n"


def parse(text: str) -> JobConfig:
    return parse_config(text, "job.yaml")


def problems(text: str) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        parse(text)
    return info.value.problems


def only(text: str) -> Problem:
    found = [p for p in problems(text) if p.severity == "error"]
    assert len(found) == 1, found
    return found[0]


def test_a_fitting_mesh_is_kept_in_order() -> None:
    config = parse(HEAD + "dtensor: {mesh: {model: 4, batch: 2}}\n" + GPU)
    assert config.dtensor is not None and config.dtensor.mesh == (("model", 4), ("batch", 2))
    assert config.dtensor.size == 8 and not [w for w in config.warnings if w.severity == "error"]


@pytest.mark.parametrize(
    ("mesh", "says"),
    [
        ("{batch: 3, model: 4}", "covers 12 device(s), but chief + workers are 2 replica(s) x 4 GPU(s) = 8; allowed: "
                                 "sizes whose product is 8, e.g. mesh: {batch: 2, model: 4}"),
        ("{batch: 2, model: 2}", "covers 4 device(s), but chief + workers are 2 replica(s) x 4 GPU(s) = 8; allowed: "
                                 "sizes whose product is 8, e.g. mesh: {batch: 2, model: 4}"),
        ("{batch: 16}", "e.g. mesh: {batch: 8}"),
    ],
)
def test_a_gpu_mesh_must_cover_every_gpu(mesh: str, says: str) -> None:
    p = only(HEAD + f"dtensor:\n  mesh: {mesh}\n" + GPU)
    assert (p.path, p.file, p.line) == ("dtensor.mesh", "job.yaml", 6)
    assert says in p.message


def test_a_cpu_mesh_must_split_over_the_replicas() -> None:
    assert parse(HEAD + "dtensor: {mesh: {batch: 2, model: 3}}\n" + CPU).dtensor is not None  # 3 logical CPUs each
    p = only(HEAD + "dtensor: {mesh: {batch: 1, model: 3}}\n" + CPU)
    assert p.path == "dtensor.mesh" and p.line == 5
    assert "which 2 replica(s) cannot split evenly" in p.message and "e.g. mesh: {batch: 1, model: 4}" in p.message


@pytest.mark.parametrize(
    ("cluster", "path", "says"),
    [
        (CPU + "  parameter_servers: {replicas: 1}\n", "cluster.parameter_servers",
         "a DTensor job has no parameter servers"),
        ("cluster:\n  chief: {machine_type: a2-highgpu-1g}\n  workers: {replicas: 1}\n  reduction_server: "
         "{replicas: 2}\n", "cluster.reduction_server", "a DTensor job has no reduction server"),
    ],
)
def test_no_parameter_servers_or_reducers(cluster: str, path: str, says: str) -> None:
    p = only(HEAD + "dtensor: {mesh: {batch: 2}}\n" + cluster)
    assert p.path == path and says in p.message and f"remove {path}" in p.message


def test_every_replica_brings_the_same_devices() -> None:
    p = only(HEAD + "dtensor: {mesh: {batch: 2, model: 4}}\ncluster:\n  chief: {machine_type: a2-highgpu-4g}\n"
             "  workers: {replicas: 1, machine_type: a2-highgpu-2g}\n")
    assert p.path == "cluster.workers.accelerator_count" and p.line == 8  # placed at the pool written
    assert "each chief replica has 4 GPU(s) and each workers replica 2 GPU(s)" in p.message
    assert "a2-highgpu-4g" in p.message


@pytest.mark.parametrize(("name", "fixed"), [("2x", "d_2x"), ("my-dim", "my_dim")])
def test_dimension_names_are_identifiers(name: str, fixed: str) -> None:
    p = only(HEAD + f"dtensor:\n  mesh:\n    batch: 2\n    {name}: 2\n" + CPU)
    assert (p.path, p.line) == (f"dtensor.mesh.{name}", 8)
    assert "letters, digits and _" in p.message and f"e.g. {fixed}" in p.message


@pytest.mark.parametrize(
    ("block", "path", "says"),
    [
        ("dtensor:\n  mesh: {batch: 2, batch: 2}\n", "dtensor.mesh.batch", "duplicate key 'batch'"),
        ("dtensor:\n  mesh: {batch: 0}\n", "dtensor.mesh.batch", "must be at least 1, got 0"),
        ("dtensor:\n  mesh: {batch: 1.5}\n", "dtensor.mesh.batch", "expected a whole number"),
        ("dtensor:\n  mesh: {}\n", "dtensor.mesh", "at least one dimension, e.g. {batch: 2, model: 1}"),
        ("dtensor: {}\n", "dtensor", "missing required key 'mesh'"),
        ("dtensor:\n  mesh: {batch: 2}\n  meshes: 1\n", "dtensor.meshes", "unknown key 'meshes'"),
    ],
)
def test_the_block_itself(block: str, path: str, says: str) -> None:
    found = problems(HEAD + block + CPU)
    assert any(p.path == path and says in p.message and p.line is not None for p in found), found


def test_the_strategy_needs_the_block_and_the_block_the_strategy() -> None:
    p = only(HEAD + GPU)
    assert (p.path, p.line) == ("distribution_strategy", 4)
    assert "needs a `dtensor:` block" in p.message and "dtensor: {mesh: {batch: 2, model: 4}}" in p.message
    p = only(HEAD.replace("dtensor\n", "multi_worker_mirrored\n") + "dtensor: {mesh: {batch: 8}}\n" + GPU)
    assert p.path == "dtensor" and "only for distribution_strategy: dtensor" in p.message


def test_a_model_dimension_across_machines_warns() -> None:
    config = parse(HEAD + "dtensor: {mesh: {batch: 1, model: 8}}\n" + GPU)
    (warning,) = [w for w in config.warnings if w.path == "dtensor.mesh.model"]
    assert warning.severity == "warning" and "spans 2 replicas" in warning.message
    assert "e.g. mesh: {batch: 2, model: 4}" in warning.message


@pytest.mark.parametrize(
    ("mesh", "devices", "expected"),
    [
        ((("batch", 3), ("model", 4)), 8, (("batch", 2), ("model", 4))),
        ((("batch", 2), ("model", 2)), 8, (("batch", 2), ("model", 4))),  # a tie: the innermost grows
        ((("data", 1), ("fsdp", 2), ("model", 2)), 16, (("data", 1), ("fsdp", 4), ("model", 4))),
        ((("batch", 7),), 12, (("batch", 12),)),
        ((("batch", 2), ("model", 2)), 1 << 20, (("batch", 1 << 18), ("model", 4))),  # too large to search
    ],
)
def test_the_nearest_mesh(mesh: tuple, devices: int, expected: tuple) -> None:
    assert nearest_mesh(mesh, devices, per_replica=4) == expected


def test_validate_exits_2_with_the_position_and_a_mesh_that_fits(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from vtrain.cli import cli

    path = tmp_path / "job.yaml"
    path.write_text(HEAD + "dtensor:\n  mesh: {batch: 3, model: 4}\n" + GPU, encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{path}:6:9: dtensor.mesh: mesh {{batch: 3, model: 4}} covers 12 device(s)" in result.output
    assert "e.g. mesh: {batch: 2, model: 4}" in result.output
