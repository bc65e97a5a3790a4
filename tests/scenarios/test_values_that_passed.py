"""Issue 30, classes 3 and 4: job-file values that `validate` accepted and that were wrong, through the real CLI.

- a one-dimension DTensor mesh `{model: 8}` over two 4-GPU machines spans them (the two-dimension case
  warned already): the spanning rule now holds for any number of dimensions, GPUs or CPU devices;
- Lustre mounts: an instance_ip that is no IP address, a file system name Managed Lustre cannot have;
  a mount server or an image registry with a port above 65535;
- a lone surrogate (a double-quoted "\\ud800") in `name` or anywhere: validate said valid and render
  died in click.echo; now refused at its position, exit 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from vtrain.cli import cli

HEAD = 'name: demo\ntrainer:\n  container: {image_uri: "us-docker.pkg.dev/p/r/t:1"}\n'
GPU2 = "cluster:\n  chief: {machine_type: a2-highgpu-4g}\n  workers: {replicas: 1}\n"
CPU2 = "cluster:\n  chief: {machine_type: n1-standard-8}\n  workers: {replicas: 1}\n"


def invoke(tmp_path: Path, text: str, *args: str) -> Result:
    job = tmp_path / "job.yaml"
    job.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, [*args, str(job)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


@pytest.mark.parametrize(("cluster", "mesh", "said"), [
    (GPU2, "{model: 8}", "dtensor.mesh.model: the innermost dimension model (8) spans 2 replicas, so its collectives "
                         "(every layer, for tensor parallelism) cross the network; keep it within one replica's 4 "
                         "GPU(s), e.g. mesh: {batch: 2, model: 4}"),
    (GPU2, "{batch: 1, model: 8}", "keep it within one replica's 4 GPU(s), e.g. mesh: {batch: 2, model: 4}"),
    (CPU2, "{model: 8}", "dtensor.mesh.model: the innermost dimension model (8) spans 2 replicas, so its collectives "
                         "(every layer, for tensor parallelism) cross the network; keep it within one replica's 4 "
                         "logical CPU device(s), e.g. mesh: {batch: 2, model: 4}"),
])  # fmt: skip
def test_a_model_dimension_across_machines_warns_in_any_number_of_dimensions(tmp_path: Path, cluster: str, mesh: str,
                                                                             said: str) -> None:  # fmt: skip
    done = invoke(tmp_path, HEAD + f"distribution_strategy: dtensor\ndtensor: {{mesh: {mesh}}}\n" + cluster,
                  "validate")
    assert done.exit_code == 0, done.output
    assert said in done.stderr


@pytest.mark.parametrize("mesh", ["{batch: 2, model: 4}", "{batch: 8}", "{model: 4, batch: 2}"])
def test_a_mesh_within_each_replica_does_not_warn(tmp_path: Path, mesh: str) -> None:
    done = invoke(tmp_path, HEAD + f"distribution_strategy: dtensor\ndtensor: {{mesh: {mesh}}}\n" + GPU2, "validate")
    assert done.exit_code == 0 and "spans" not in done.stderr, done.output


LUSTRE = ("cluster:\n  chief:\n    machine_type: n1-standard-4\n    lustre_mounts: [{{{mount}}}]\n"
          "network: projects/1/global/networks/n\n")
GOOD = {"instance_ip": "10.90.1.4", "volume_handle": "my-project/us-central1-a/my-lustre", "filesystem": "lfs",
        "mount_point": "lustre"}


def mount(**over: str) -> str:
    return ", ".join(f'{k}: "{v}"' for k, v in {**GOOD, **over}.items())


@pytest.mark.parametrize(("over", "said"), [
    ({"instance_ip": "lustre.example.com"}, "lustre_mounts[0].instance_ip: 'lustre.example.com' is not an IP address"),
    ({"instance_ip": "10.90.1.4:99999"}, "lustre_mounts[0].instance_ip: '10.90.1.4:99999' has a port (:99999)"),
    ({"filesystem": "my lustre"}, "lustre_mounts[0].filesystem: 'my lustre' is not a Lustre file system name: at "
                                  "most 8 letters and digits, starting with a letter"),
    ({"filesystem": "lustrefs01"}, "'lustrefs01' is not a Lustre file system name"),
    ({"filesystem": "9lfs"}, "'9lfs' is not a Lustre file system name"),
    ({"volume_handle": " "}, "lustre_mounts[0].volume_handle: ' ' is not a Lustre volume handle"),
])  # fmt: skip
def test_invalid_lustre_values_are_refused_at_their_position(tmp_path: Path, over: dict[str, str], said: str) -> None:
    done = invoke(tmp_path, HEAD + LUSTRE.format(mount=mount(**over)), "validate")
    assert done.exit_code == 2, done.output
    assert "job.yaml:7:" in done.stderr and said in done.stderr, done.stderr


def test_a_valid_lustre_mount_passes(tmp_path: Path) -> None:
    done = invoke(tmp_path, HEAD + LUSTRE.format(mount=mount()), "validate")
    assert done.exit_code == 0, done.output


@pytest.mark.parametrize(("text", "said"), [
    (HEAD.replace("us-docker.pkg.dev/p/r/t:1", "localhost:99999/r/t:1") + "cluster: {chief: {machine_type: "
     "n1-standard-4}}\n", "job.yaml:3:26: trainer.container.image_uri: image 'localhost:99999/r/t:1': registry port "
     "99999 in 'localhost:99999' is not a TCP port (1 to 65535)"),
    (HEAD + "cluster:\n  chief:\n    machine_type: n1-standard-4\n    nfs_mounts: [{server: '10.0.0.1:70000', path: "
     "/s, mount_point: d}]\nnetwork: projects/1/global/networks/n\n",
     "job.yaml:7:27: cluster.chief.nfs_mounts[0].server: '10.0.0.1:70000' has a port (:70000)"),
])  # fmt: skip
def test_a_port_above_65535_is_refused(tmp_path: Path, text: str, said: str) -> None:
    done = invoke(tmp_path, text, "validate")
    assert done.exit_code == 2 and said in done.stderr, done.output


@pytest.mark.parametrize("command", ["validate", "render"])
@pytest.mark.parametrize(("text", "where"), [
    ('name: "demo\\ud800"\n' + HEAD.split("\n", 1)[1] + "cluster: {chief: {machine_type: n1-standard-4}}\n",
     "job.yaml:1:7: name: contains a lone surrogate (\\ud800, from a \\u escape) at character 5"),
    (HEAD + 'labels: {team: "a\\udfffb"}\ncluster: {chief: {machine_type: n1-standard-4}}\n',
     "job.yaml:4:16: labels.team: contains a lone surrogate (\\udfff, from a \\u escape) at character 2"),
])  # fmt: skip
def test_a_lone_surrogate_is_refused_with_its_position(tmp_path: Path, command: str, text: str, where: str) -> None:
    done = invoke(tmp_path, text, command)
    assert done.exit_code == 2, done.output
    assert done.stdout == "" and done.stderr.startswith(f"{tmp_path}/{where}"), done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: ") and "\udfff" not in done.stderr
