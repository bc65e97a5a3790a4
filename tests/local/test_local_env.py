"""What each replica of `vtrain local` sees: pure, table-driven (no process, no TensorFlow)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write_job
from vtrain.errors import UsageError
from vtrain.jobfile.load import load_config
from vtrain.local import env as localenv
from vtrain.local.env import Replica
from vtrain.local.envcache import check_requirements, default_cache_dir, env_key, package_digest
from vtrain.request.custom_job import build_job_dict

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "data" / "trainers" / "probe"


def job_for(tmp_path: Path, cluster: str, extra: str = "") -> dict[str, Any]:
    path = write_job(tmp_path, f"""
        name: env-test
        trainer:
          package: {PROBE}
          module: trainer.task
          args: [--x=1]
          env: {{MY_VAR: hello, AIP_MODEL_DIR: /not/this}}
        cluster:
        {cluster}
        {extra}
        """)
    return build_job_dict(load_config(path, target="local"), artifacts=["file:///p/t.tar.gz"])


def ports_for(plan: localenv.Plan) -> dict[Replica, int]:
    return {r: 20000 + i for i, r in enumerate(plan.replicas)}


@pytest.mark.parametrize(
    ("counts", "limit", "expected"),
    [
        ([1, 4, 2, 1], 8, [1, 4, 2, 1]),  # fits: unchanged
        ([1, 4, 2, 1], 4, [1, 1, 1, 1]),  # every role kept once
        ([1, 4, 2, 1], 5, [1, 2, 1, 1]),  # spare place to the pool that lost most (workers first)
        ([1, 4, 2, 1], 6, [1, 3, 1, 1]),  # a tie (half lost each) goes to workers
        ([1, 7, 0, 0], 3, [1, 2, 0, 0]),
        ([1, 0, 0, 3], 2, [1, 0, 0, 1]),
    ],
)
def test_shrink_counts(counts: list[int], limit: int, expected: list[int]) -> None:
    assert localenv.shrink_counts(counts, limit) == expected


def test_shrink_below_the_roles_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        localenv.shrink_counts([1, 4, 2, 0], 2)


def test_plan_shrinks_the_job_it_runs_and_says_so(tmp_path: Path) -> None:
    job = job_for(tmp_path, """  chief: {machine_type: n1-standard-4}
          workers: {replicas: 4}
          parameter_servers: {replicas: 2}
          evaluator: {}""")
    before = json.dumps(job)
    plan = localenv.plan(job, max_replicas=5)
    assert json.dumps(job) == before  # the caller's dict is not touched
    assert [r.label for r in plan.replicas] == ["chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0"]
    assert [p["replicaCount"] for p in plan.pools] == ["1", "2", "1", "1"]
    assert plan.notices == ("--max-replicas 5: shrank workers 4 → 2, parameter_servers 2 → 1 (8 → 5 replicas)",)
    with pytest.raises(UsageError, match="--max-replicas 3 is too small: this job needs at least 4"):
        localenv.plan(job, max_replicas=3)


def test_reduction_server_is_not_started(tmp_path: Path) -> None:
    job = job_for(tmp_path, """  chief: {machine_type: a2-highgpu-1g, accelerator: a100, accelerator_count: 1}
          workers: {replicas: 1}
          reduction_server: {replicas: 2}""", "distribution_strategy: multi_worker_mirrored")
    plan = localenv.plan(job)
    assert [r.label for r in plan.replicas] == ["chief-0", "worker-0"]
    assert "not started" in plan.notices[0] and "plain all-reduce" in plan.notices[0]
    tf = localenv.tf_config(plan, ports_for(plan), plan.replicas[0])
    assert tf is not None and set(tf["cluster"]) == {"chief", "worker"}
    spec = localenv.cluster_spec(plan, ports_for(plan), plan.replicas[1])
    assert set(spec["cluster"]) == {"workerpool0", "workerpool1"}
    assert spec["job"]["workerPoolSpecs"][2]["containerSpec"]["imageUri"].endswith("reductionserver:latest")


def test_single_replica_has_cluster_spec_but_no_tf_config(tmp_path: Path) -> None:
    plan = localenv.plan(job_for(tmp_path, "  chief: {machine_type: n1-standard-4}"))
    chief = plan.replicas[0]
    env = localenv.vertex_env(plan, chief, {chief: 23456}, "/out", "local-1")
    assert "TF_CONFIG" not in env
    assert json.loads(env["CLUSTER_SPEC"]) == {
        "cluster": {"workerpool0": ["127.0.0.1:23456"]},
        "environment": "cloud",
        "task": {"type": "workerpool0", "index": 0},
        "job": plan.job["jobSpec"],
    }
    assert env["CLOUD_ML_JOB_ID"] == "local-1"
    assert env["AIP_MODEL_DIR"] == "/out/model/"
    assert env["AIP_CHECKPOINT_DIR"] == "/out/checkpoints/"
    assert env["AIP_TENSORBOARD_LOG_DIR"] == "/out/logs/"


def test_tf_config_roles_and_the_evaluator_outside_the_cluster(tmp_path: Path) -> None:
    plan = localenv.plan(job_for(tmp_path, """  chief: {machine_type: n1-standard-4}
          workers: {replicas: 2}
          parameter_servers: {replicas: 1}
          evaluator: {}"""))
    ports = ports_for(plan)
    by_label = {r.label: r for r in plan.replicas}
    tf = localenv.tf_config(plan, ports, by_label["worker-1"])
    assert tf == {
        "cluster": {"chief": ["127.0.0.1:20000"], "worker": ["127.0.0.1:20001", "127.0.0.1:20002"],
                    "ps": ["127.0.0.1:20003"]},
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
        "job": plan.job["jobSpec"],
    }
    evaluator = localenv.tf_config(plan, ports, by_label["evaluator-0"])
    assert evaluator is not None and evaluator["task"] == {"type": "evaluator", "index": 0}
    assert "evaluator" not in evaluator["cluster"]
    spec = localenv.cluster_spec(plan, ports, by_label["evaluator-0"])
    assert spec["cluster"]["workerpool3"] == ["127.0.0.1:20004"]
    assert spec["task"] == {"type": "workerpool3", "index": 0}
    assert len(set(ports.values())) == len(ports)


def test_compose_env_merge_order() -> None:
    host = {"PATH": "/usr/bin", "HOME": "/root", "PYTHONPATH": "/dev/src", "TF_CONFIG": "{stale}",
            "AIP_MODEL_DIR": "/stale", "CUDA_VISIBLE_DEVICES": "0,1", "MY_VAR": "host", "VIRTUAL_ENV": "/dev/venv"}
    env = localenv.compose_env(
        host,
        vertex={"CLUSTER_SPEC": "{}", "AIP_MODEL_DIR": "/out/model/"},
        job={"MY_VAR": "job", "AIP_MODEL_DIR": "/job/wins/not", "PYTHONUNBUFFERED": "0"},
        venv="/cache/env",
        gpus="1",
    )
    assert env == {
        "PATH": "/cache/env/bin:/usr/bin",
        "HOME": "/root",
        "VIRTUAL_ENV": "/cache/env",
        "CUDA_VISIBLE_DEVICES": "1",
        "MY_VAR": "job",  # the job's env beats the host's
        "CLUSTER_SPEC": "{}",
        "AIP_MODEL_DIR": "/out/model/",  # what Vertex sets beats the job's env
        "PYTHONUNBUFFERED": "1",  # the launcher streams logs line by line
    }


def test_pool_env_holds_the_job_env_and_the_strategy(tmp_path: Path) -> None:
    plan = localenv.plan(job_for(tmp_path, "  chief: {machine_type: n1-standard-4}"))
    assert localenv.pool_env(plan.pools[0]) == {"MY_VAR": "hello", "AIP_MODEL_DIR": "/not/this",
                                                "VTRAIN_DISTRIBUTION_STRATEGY": "auto"}
    assert localenv.python_argv("/env/bin/python", plan.pools[0]) == ["/env/bin/python", "-m", "trainer.task",
                                                                        "--x=1"]


R = [Replica(0, 0), Replica(1, 0), Replica(1, 1), Replica(2, 0)]


@pytest.mark.parametrize(
    ("gpus", "asks", "expected", "notice"),
    [
        ([], [1, 1, 1, 0], ["", "", "", ""], "has none"),
        (["0", "1", "2", "3"], [0, 0, 0, 0], ["", "", "", ""], None),
        (["0", "1", "2", "3"], [1, 1, 1, 0], ["0", "1", "2", ""], None),
        (["0", "1", "2", "3", "4", "5"], [2, 2, 2, 0], ["0,1", "2,3", "4,5", ""], None),
        (["0", "1"], [1, 1, 1, 0], ["0", "1", "0", ""], "shared"),
        (["0", "1", "2", "3"], [4, 4, 0, 0], ["0,1", "2,3", "", ""], "split"),
    ],
)
def test_assign_gpus(gpus: list[str], asks: list[int], expected: list[str], notice: str | None) -> None:
    out, notices = localenv.assign_gpus(gpus, dict(zip(R, asks, strict=True)))
    assert [out[r] for r in R] == expected
    assert (notice in notices[0]) if notice else notices == []


def test_docker_argv_passes_env_by_name_and_command_as_entrypoint() -> None:
    pool = {"containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/img:1", "command": ["python", "-m", "t.task"],
                              "args": ["--epochs=1"], "env": [{"name": "SECRET", "value": "s3cr3t"}]}}
    argv = localenv.docker_argv(pool, "vtrain-x-chief-0", ["SECRET", "TF_CONFIG"], ["/out"], "0")
    assert argv == ["docker", "run", "--rm", "--init", "--name", "vtrain-x-chief-0", "--network", "host",
                    "-v", "/out:/out", "-e", "SECRET", "-e", "TF_CONFIG", "--gpus", '"device=0"',
                    "--entrypoint", "python", "us-docker.pkg.dev/p/r/img:1", "-m", "t.task", "--epochs=1"]
    assert "s3cr3t" not in " ".join(argv)


@pytest.mark.parametrize(
    ("requires", "installed", "install", "noticed"),
    [
        (["tf-keras~=2.17.0"], {"tf-keras": "2.21.0"}, [], "tf-keras 2.21.0, kept"),
        (["tf_keras>=2.15"], {"tf-keras": "2.21.0"}, [], None),
        (["Requests>=2"], {}, ["Requests>=2"], None),
        (["pywin32; sys_platform == 'win32'"], {}, [], None),
        (["numpy", "einops==0.8"], {"numpy": "2.1"}, ["einops==0.8"], None),
    ],
)
def test_check_requirements(requires: list[str], installed: dict[str, str], install: list[str],
                            noticed: str | None) -> None:
    got, notices = check_requirements(requires, installed)
    assert got == install
    assert (noticed in notices[0]) if noticed else notices == []


def test_env_key_follows_contents(tmp_path: Path) -> None:
    a = tmp_path / "a.tar.gz"
    a.write_bytes(b"one")
    first = env_key([a], "/usr/bin/python3", ["/site"])
    assert env_key([a], "/usr/bin/python3", ["/site"]) == first
    a.write_bytes(b"two")
    assert env_key([a], "/usr/bin/python3", ["/site"]) != first


def _sdist(path: Path, members: list[tuple[str, bytes, int]], mtime: int) -> Path:
    """A gzipped tar of (name, contents, mode), every member and the gzip header stamped `mtime`."""
    import gzip
    import io
    import tarfile

    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, mtime
            tar.addfile(info, io.BytesIO(data))
    return path


def test_an_sdist_built_again_from_the_same_files_names_the_same_environment(tmp_path: Path) -> None:
    """A rebuild differs in its gzip header and mtimes only: the environment is reused, not installed again."""
    files = [("t-0.1/PKG-INFO", b"Name: t\n", 0o644), ("t-0.1/trainer/task.py", b"print(1)\n", 0o644)]
    first = _sdist(tmp_path / "first.tar.gz", files, mtime=1_700_000_000)
    again = _sdist(tmp_path / "again.tar.gz", files[::-1], mtime=1_800_000_000)  # another time, another order
    assert first.read_bytes() != again.read_bytes()
    key = env_key([first], "/usr/bin/python3", ["/site"])
    assert env_key([again], "/usr/bin/python3", ["/site"]) == key
    assert package_digest(first).startswith("members:")
    changed = [
        [files[0], ("t-0.1/trainer/task.py", b"print(2)\n", 0o644)],  # contents
        [files[0], ("t-0.1/trainer/task.py", b"print(1)\n", 0o755)],  # mode
        [files[0], ("t-0.1/trainer/main.py", b"print(1)\n", 0o644)],  # name
        files[:1],  # a member less
    ]
    for n, members in enumerate(changed):
        assert env_key([_sdist(tmp_path / f"c{n}.tar.gz", members, 1_700_000_000)], "/usr/bin/python3",
                       ["/site"]) != key, members


def test_a_package_that_is_no_tar_is_named_by_its_bytes(tmp_path: Path) -> None:
    """A wheel in packageUris, or a tar cut short: its bytes, and no traceback."""
    import hashlib
    import zipfile

    wheel = tmp_path / "t-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("trainer/task.py", "print(1)\n")
    assert package_digest(wheel) == "bytes:" + hashlib.sha256(wheel.read_bytes()).hexdigest()
    whole = _sdist(tmp_path / "whole.tar.gz", [("t-0.1/big", bytes(range(256)) * 4096, 0o644)], 1_700_000_000)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    assert package_digest(cut) == "bytes:" + hashlib.sha256(cut.read_bytes()).hexdigest()


def test_a_venv_layered_on_another_by_a_pth_file_has_its_packages_as_the_image(tmp_path: Path) -> None:
    """A venv whose packages come from another's site-packages through a .pth (as a worktree's does): what
    it imports is the stand-in for the image, so a trainer's pin it satisfies is not installed again."""
    import subprocess
    import sys

    base = tmp_path / "base" / "lib" / "site-packages"
    (base / "fakepkg-1.0.dist-info").mkdir(parents=True)
    (base / "fakepkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n")
    venv = tmp_path / "layered"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "layer.pth").write_text(f"{base}\n{REPO}\n")
    code = ("from vtrain.local.envcache import host_site_dirs, installed_versions; d = host_site_dirs(); "
            "print(d[-1]); print(installed_versions(d).get('fakepkg'))")  # fmt: skip
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(base), "1.0"], out.stderr


def test_default_cache_dir() -> None:
    assert default_cache_dir({"VTRAIN_CACHE_DIR": "/c"}) == Path("/c")
    assert default_cache_dir({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/vtrain")


@pytest.mark.parametrize(
    ("image", "host", "expected"),
    [
        ("tf-cpu.2-17", "2.21.0", "the job's image has TensorFlow 2.17; this machine runs 2.21.0"),
        ("tf-cpu.2-21", "2.21.0", None),
        ("tf-gpu.2-17", None, "the job's image has TensorFlow 2.17; this machine has none installed"),
        ("us-docker.pkg.dev/my/own/image:1", "2.21.0", None),
    ],
)
def test_image_tf_notice(tmp_path: Path, image: str, host: str | None, expected: str | None) -> None:
    plan = localenv.plan(job_for(tmp_path, "  chief: {machine_type: n1-standard-4}"))
    pools = plan.job["jobSpec"]["workerPoolSpecs"]
    uri = image if "/" in image else f"us-docker.pkg.dev/vertex-ai/training/{image}.py310:latest"
    pools[0]["pythonPackageSpec"]["executorImageUri"] = uri
    notice = localenv.image_tf_notice(plan, host)
    assert (notice or "").startswith(expected or "") and (notice is None) == (expected is None)
