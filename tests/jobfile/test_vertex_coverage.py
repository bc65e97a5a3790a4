"""Issue 24's keys: per-pool mounts, GPU partitions, reservations and trainer overrides; the job's PSC
interface, Experiment run and protected-artifact region. Each reaches the request (the golden config and
tests/request/test_every_key_reaches.py); here, each mistake is refused at its key with a fix."""

from __future__ import annotations

import json
import textwrap

import pytest

import vtrain.emulator.validation  # noqa: F401 - imports aiplatform_v1 (seconds) at collection, not in a test
from tests.conftest import REPO
from tests.helpers import assert_equals_real_proto, planned
from vtrain.errors import ConfigError, Problem
from vtrain.jobfile.load import load_config, parse_config
from vtrain.request.build import build_request

HEAD = """\
name: cover
region: us-central1
trainer:
  package_uris: [gs://my-bucket/trainer-0.1.tar.gz]
  module: trainer.task
"""
CTX = "projects/p/locations/us-central1/metadataStores/default/contexts"


def text(body: str) -> str:
    return HEAD + textwrap.dedent(body)


def problems(body: str) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        parse_config(text(body), "job.yaml")
    return [p for p in info.value.problems if p.severity == "error"]


def one(body: str) -> Problem:
    found = problems(body)
    assert len(found) == 1, found
    return found[0]


def test_the_golden_config_reaches_every_new_field_and_the_emulator_accepts_it() -> None:
    from vtrain.emulator.validation import check_custom_job, parse_custom_job

    config = load_config(REPO / "configs" / "vertex-coverage.yaml")
    body = build_request(*planned(config)).body
    assert_equals_real_proto(body)
    check_custom_job(parse_custom_job(json.dumps(body).encode()))  # raises ApiError on what Vertex refuses
    spec = body["jobSpec"]
    chief, workers, _, evaluator = spec["workerPoolSpecs"]
    assert chief["machineSpec"]["gpuPartitionSize"] == "3g.20gb"
    assert chief["nfsMounts"] == [{"server": "10.76.0.10", "path": "/datasets", "mountPoint": "datasets"}]
    assert chief["lustreMounts"][0]["volumeHandle"] == "my-project/us-central1-a/scratch"
    assert workers["nfsMounts"] == chief["nfsMounts"]  # inherited from the chief
    assert chief["machineSpec"]["reservationAffinity"]["reservationAffinityType"] == "SPECIFIC_RESERVATION"
    assert workers["machineSpec"]["reservationAffinity"] == {"reservationAffinityType": "ANY_RESERVATION"}
    assert evaluator["machineSpec"]["reservationAffinity"] == {"reservationAffinityType": "NO_RESERVATION"}
    assert evaluator["pythonPackageSpec"]["pythonModule"] == "trainer.data"
    assert "tf-cpu.2-17" in evaluator["pythonPackageSpec"]["executorImageUri"]
    assert spec["experimentRun"].endswith("/contexts/mnist-run-7")
    assert spec["protectedArtifactLocationId"] == "us-east1"
    assert spec["pscInterfaceConfig"]["dnsPeeringConfigs"][0]["targetNetwork"] == "shared-vpc"


def test_an_experiment_by_name_is_left_for_submit_and_by_full_name_is_sent_as_written() -> None:
    """`experiment: NAME` is found or made at submit (its full name carries the project); a full name is
    the request's field as written. Either way the run goes with it."""
    chief = "cluster:\n  chief: {machine_type: n1-standard-4}\n"
    bare = build_request(*planned(parse_config(text(f"experiment: mnist\nexperiment_run: {CTX}/mnist-7\n{chief}"),
                                      "job.yaml"))).body["jobSpec"]
    assert "experiment" not in bare and bare["experimentRun"] == f"{CTX}/mnist-7"
    full = build_request(*planned(parse_config(text(f"experiment: {CTX}/mnist\n{chief}"), "job.yaml"))).body["jobSpec"]
    assert full["experiment"] == f"{CTX}/mnist"


def test_a_pool_container_in_a_package_job_and_its_own_command() -> None:
    config = parse_config(text("""\
        cluster:
          chief: {machine_type: n1-standard-4}
          evaluator:
            container: {image_uri: us-docker.pkg.dev/p/r/eval:1, command: [python3, -m, ev]}
            args: [--every=60]
        """), "job.yaml")
    evaluator = build_request(*planned(config)).body["jobSpec"]["workerPoolSpecs"][3]
    assert evaluator["containerSpec"]["imageUri"] == "us-docker.pkg.dev/p/r/eval:1"
    assert evaluator["containerSpec"]["command"] == ["python3", "-m", "ev"]
    assert evaluator["containerSpec"]["args"] == ["--every=60"]


@pytest.mark.parametrize(("body", "path", "words"), [
    ("cluster:\n  chief: {machine_type: n1-standard-4, gpu_partition_size: 1g.5gb}\n",
     "cluster.chief.gpu_partition_size", "need an A100, H100 or H200"),
    ("cluster:\n  chief: {machine_type: a2-highgpu-1g, gpu_partition_size: 1g.6gb}\n",
     "cluster.chief.gpu_partition_size", "did you mean '1g.5gb'?"),
    ("cluster:\n  chief: {machine_type: a2-highgpu-2g, gpu_partition_size: 1g.5gb}\n",
     "cluster.chief.gpu_partition_size", "such as a2-highgpu-1g"),
    ("cluster:\n  chief: {machine_type: n1-standard-4, nfs_mounts: [{server: 10.0.0.2, path: share, "
     "mount_point: d}]}\nnetwork: projects/1/global/networks/v\n", "cluster.chief.nfs_mounts[0].path", "'/share'"),
    ("cluster:\n  chief: {machine_type: n1-standard-4, nfs_mounts: [{server: 10.0.0.2, path: /s, "
     "mount_point: /abs}]}\nnetwork: projects/1/global/networks/v\n", "cluster.chief.nfs_mounts[0].mount_point",
     "try 'abs'"),
    ("cluster:\n  chief: {machine_type: n1-standard-4, lustre_mounts: [{instance_ip: 10.0.0.3, volume_handle: v, "
     "filesystem: f, mount_point: a}, {instance_ip: 10.0.0.4, volume_handle: w, filesystem: g, mount_point: a}]}\n",
     "cluster.chief.lustre_mounts[1].mount_point", "already the mount point of lustre_mounts[0]"),
    ("cluster:\n  chief: {machine_type: n1-standard-4, reservation: {affinity: specific}}\n",
     "cluster.chief.reservation.name", "needs the reservation name"),
    ("cluster:\n  chief: {machine_type: n1-standard-4, module: 'not a module'}\n", "cluster.chief.module",
     "not a Python module path"),
    ("cluster:\n  chief: {machine_type: n1-standard-4, image: tf-gpu.2-17}\n", "cluster.chief.image",
     "runs on CPU"),
    ("cluster:\n  chief: {machine_type: n1-standard-4, container: {image_uri: u/i:1}, module: m}\n",
     "cluster.chief.module", "python-package pools"),
    ("psc_interface: {network_attachment: att}\nnetwork: projects/1/global/networks/v\n"
     "cluster:\n  chief: {machine_type: n1-standard-4}\n", "psc_interface", "not both"),
    ("psc_interface: {network_attachment: projects/p/regions/europe-west4/networkAttachments/a}\n"
     "cluster:\n  chief: {machine_type: n1-standard-4}\n", "psc_interface.network_attachment", "job's region"),
    ("psc_interface: {network_attachment: a, dns_peering: [{domain: corp.example.com, target_project: my-host, "
     "target_network: vpc}]}\ncluster:\n  chief: {machine_type: n1-standard-4}\n",
     "psc_interface.dns_peering[0].domain", "'corp.example.com.'"),
    ("experiment: projects/p/mnist\ncluster:\n  chief: {machine_type: n1-standard-4}\n", "experiment",
     "projects/PROJECT/locations/us-central1/metadataStores/default/contexts/NAME"),
    (f"experiment: mnist\nexperiment_run: {CTX}/other-1\ncluster:\n  chief: {{machine_type: n1-standard-4}}\n",
     "experiment_run", "contexts/mnist-RUN"),
    (f"experiment_run: {CTX}/mnist-1\ncluster:\n  chief: {{machine_type: n1-standard-4}}\n", "experiment_run",
     "set experiment too"),
    (f"experiment: {CTX}/mnist\nexperiment_run: {CTX}/other-1\ncluster:\n  chief: {{machine_type: n1-standard-4}}\n",
     "experiment_run", "mnist-RUN"),
    ("experiment: projects/p/locations/europe-west4/metadataStores/default/contexts/m\n"
     "cluster:\n  chief: {machine_type: n1-standard-4}\n", "experiment", "in its own region"),
    ("protected_artifact_location_id: us_east1\ncluster:\n  chief: {machine_type: n1-standard-4}\n",
     "protected_artifact_location_id", "not a region name"),
])
def test_each_mistake_is_refused_at_its_key(body: str, path: str, words: str) -> None:
    problem = one(body)
    assert problem.path == path and words in problem.message, problem
    assert problem.line is not None  # a position in the job file


def test_an_inherited_mistake_is_reported_once_at_the_chief() -> None:
    found = problems("""\
        cluster:
          chief: {machine_type: n1-standard-4, gpu_partition_size: 1g.5gb}
          workers: {replicas: 2}
        """)
    assert [p.path for p in found] == ["cluster.chief.gpu_partition_size"]


def test_nfs_without_a_vpc_warns_and_the_reduction_server_takes_no_mounts() -> None:
    config = parse_config(text("""\
        cluster:
          chief: {machine_type: n1-standard-4, nfs_mounts: [{server: 10.0.0.2, path: /s, mount_point: d}]}
        """), "job.yaml")
    assert any(w.path == "cluster.chief.nfs_mounts" and "network" in w.message for w in config.warnings)
    found = problems("""\
        cluster:
          chief: {machine_type: a2-highgpu-1g}
          workers: {replicas: 1}
          reduction_server: {nfs_mounts: []}
        """)
    assert any(p.path == "cluster.reduction_server.nfs_mounts" and "unknown key" in p.message for p in found)


def test_protected_artifacts_in_the_jobs_own_region_warn() -> None:
    config = parse_config(text("protected_artifact_location_id: us-central1\ncluster:\n  chief: "
                               "{machine_type: n1-standard-4}\n"), "job.yaml")
    assert any(w.path == "protected_artifact_location_id" for w in config.warnings)


def test_a_diloco_chief_runs_the_syncer_not_a_module_of_its_own() -> None:
    found = problems("""\
        distribution_strategy: diloco
        cluster:
          chief: {machine_type: n1-standard-8, module: trainer.sync}
          workers: {replicas: 2}
        """)
    assert [p.path for p in found] == ["cluster.chief.module"] and "syncer" in found[0].message


def test_vtrain_local_says_it_mounts_nothing() -> None:
    config = parse_config(text("""\
        cluster:
          chief: {machine_type: n1-standard-4, lustre_mounts: [{instance_ip: 10.0.0.3, volume_handle: v,
                  filesystem: f, mount_point: a}]}
        """), "job.yaml", target="local")
    assert any(w.path == "cluster.chief.lustre_mounts" and "mounts nothing" in w.message for w in config.warnings)


@pytest.mark.parametrize(("point", "suggested"), [
    ("../../etc", "try 'etc'"), ("/data", "try 'data'"), ("my data", "try 'my-data'"), ("a/../b", "try 'a/b'"),
    ("..", None), ("/", None), ("../..", None),
])  # fmt: skip
def test_a_bad_mount_point_gets_a_valid_suggestion_or_none(point: str, suggested: str | None) -> None:
    problem = one("cluster:\n  chief: {machine_type: n1-standard-4, nfs_mounts: [{server: 10.0.0.2, path: /s, "
                  f"mount_point: '{point}'}}]}}\nnetwork: projects/1/global/networks/v\n")
    assert problem.path == "cluster.chief.nfs_mounts[0].mount_point"
    if suggested is None:
        assert "try" not in problem.message, problem.message
    else:
        assert problem.message.endswith(suggested), problem.message
        assert one(f"cluster:\n  chief: {{machine_type: n1-standard-4, nfs_mounts: [{{server: 10.0.0.2, path: /s, "
                   f"mount_point: '{point}'}}, {{server: 10.0.0.2, path: /t, mount_point: '{suggested[5:-1]}'}}]}}\n"
                   "network: projects/1/global/networks/v\n").path.endswith("[0].mount_point")  # the fix is valid


# ---- issue 31: the Experiments contexts, composed as the SDK composes them ------------------------
FULL = "projects/my-project/locations/us-central1/metadataStores/default/contexts"


@pytest.mark.parametrize(("keys", "experiment", "run"), [
    ("experiment: my-exp\nexperiment_run: run-7\n", f"{FULL}/my-exp", f"{FULL}/my-exp-run-7"),
    (f"experiment: {FULL}/my-exp\nexperiment_run: run-7\n", f"{FULL}/my-exp", f"{FULL}/my-exp-run-7"),
    (f"experiment: my-exp\nexperiment_run: {FULL}/my-exp-r1\n", f"{FULL}/my-exp", f"{FULL}/my-exp-r1"),
    ("experiment: my-exp\n", f"{FULL}/my-exp", None),
])  # fmt: skip
def test_a_run_by_name_is_the_sdks_context_and_the_experiment_is_sent_in_full(
        keys: str, experiment: str, run: str | None) -> None:  # fmt: skip
    from google.cloud.aiplatform.metadata.experiment_run_resource import _format_experiment_run_resource_id

    config = parse_config(text(keys + "cluster:\n  chief: {machine_type: n1-standard-4}\n"), "job.yaml")
    spec = build_request(*planned(config), project="my-project").body["jobSpec"]
    assert (spec["experiment"], spec.get("experimentRun")) == (experiment, run)
    if "experiment_run: run-7" in keys:  # the SDK's own composition: start_run("run-7") in my-exp
        assert run == f"{FULL}/{_format_experiment_run_resource_id('my-exp', 'run-7')}"
    unresolved = build_request(*planned(config)).body["jobSpec"]  # no project anywhere: submit fills the bare names
    assert "experiment" not in unresolved or "/" in keys.split("\n")[0]


@pytest.mark.parametrize(("keys", "words"), [
    ("experiment: e\nexperiment_run: Run_7\n", "a run name is lowercase letters, digits and '-'"),
    ("experiment: e\nexperiment_run: Run_7\n", "try 'run-7'"),
    (f"experiment: {'e' * 100}\nexperiment_run: {'r' * 30}\n", "at most 121"),
    ("experiment_run: run-7\n", "set experiment too"),
])  # fmt: skip
def test_a_bad_run_name_is_refused_at_its_key(keys: str, words: str) -> None:
    problem = one(keys + "cluster:\n  chief: {machine_type: n1-standard-4}\n")
    assert problem.path == "experiment_run" and words in problem.message, problem
