"""`vtrain validate` and `vtrain render` through click, with exact output and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

from tests.conftest import REPO
from tests.helpers import write_job
from vtrain import __version__
from vtrain.cli import cli

JOB = """
name: demo
trainer:
  package_uris: [gs://my-bucket/t.tar.gz]
  module: trainer.task
  image: tf-cpu.2-17
  env: {API_TOKEN: s3cr3t}
cluster:
  chief: {machine_type: n1-standard-4}
  workers: {replicas: 2}
"""

BAD = """
name: demo
trainer:
  package_uris: [gs://my-bucket/t.tar.gz]
  module: trainer.task
cluster:
  chief: {machine_type: n1-standard-4, replicas: 2}
  workerz: {replicas: 2}
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_version() -> None:
    assert run("--version") == (0, f"vtrain, version {__version__}\n", "")


def test_validate_ok(tmp_path: Path) -> None:
    job = write_job(tmp_path, JOB)
    code, out, err = run("validate", str(job))
    assert (code, err) == (0, "")
    assert out == f"{job}: valid: chief 1 × n1-standard-4; workers 2 × n1-standard-4\n"


def test_validate_reports_every_problem_with_position(tmp_path: Path) -> None:
    job = write_job(tmp_path, BAD)
    code, out, err = run("validate", str(job))
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"{job}:6:50: cluster.chief.replicas: the chief pool runs exactly 1 replica, got 2; "
        "put extra replicas under cluster.workers",
        f"{job}:7:3: cluster.workerz: unknown key 'workerz' in cluster; allowed: chief, workers, "
        "parameter_servers, reduction_server, evaluator; did you mean 'workers'?",
        "error: 2 problems in the job file",
    ]


def test_validate_json_lists_problems(tmp_path: Path) -> None:
    job = write_job(tmp_path, BAD)
    code, out, _ = run("validate", str(job), "-o", "json")
    assert code == 2
    problems = json.loads(out)
    assert problems[1] == {
        "path": "cluster.workerz",
        "message": "unknown key 'workerz' in cluster; allowed: chief, workers, parameter_servers, "
        "reduction_server, evaluator; did you mean 'workers'?",
        "file": str(job),
        "line": 7,
        "column": 3,
        "severity": "error",
    }
    assert [(p["path"], p["line"], p["column"]) for p in problems] == [
        ("cluster.chief.replicas", 6, 50),
        ("cluster.workerz", 7, 3),
    ]


def test_validate_missing_file(tmp_path: Path) -> None:
    code, out, err = run("validate", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert f"job file not found: {tmp_path / 'nope.yaml'}" in err


def test_render_json_redacts_secrets(tmp_path: Path) -> None:
    job = write_job(tmp_path, JOB)
    code, out, err = run("render", str(job))
    assert code == 0 and err == ""
    body = json.loads(out)
    env = body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["env"]
    assert env[0] == {"name": "API_TOKEN", "value": "<redacted>"}
    code, out, _ = run("render", str(job), "--show-secrets")
    assert "s3cr3t" in out


def test_render_set_overrides_and_formats(tmp_path: Path) -> None:
    job = write_job(tmp_path, JOB)
    code, out, _ = run("render", str(job), "-o", "yaml", "--set", "cluster.workers.replicas=5",
                       "--set", "scheduling.timeout=2h")
    assert code == 0
    body = yaml.safe_load(out)
    assert body["jobSpec"]["workerPoolSpecs"][1]["replicaCount"] == "5"
    assert body["jobSpec"]["scheduling"] == {"timeout": "7200s"}
    code, out, _ = run("render", str(job), "-o", "gcloud", "--project", "proj-one")
    assert code == 0
    assert out.splitlines()[1] == (
        "#   gcloud ai custom-jobs create --project=proj-one --region=us-central1 --display-name=demo --config=job.yaml"
    )
    # render checks the project as submit does: a name submit would refuse is not printed.
    code, out, err = run("render", str(job), "-o", "gcloud", "--project", "p1")
    assert (code, out) == (1, "") and err.startswith("error: project 'p1' (from --project) is not a project ID")


def test_render_bad_set_points_at_the_flag(tmp_path: Path) -> None:
    job = write_job(tmp_path, JOB)
    code, _, err = run("render", str(job), "--set", "cluster.workers.replicas=many")
    assert code == 2
    assert err.splitlines()[0] == (
        "--set cluster.workers.replicas=many: cluster.workers.replicas: expected a whole number, "
        "got the text 'many'"
    )


def test_subprocess_cli_has_no_traceback_and_no_tensorflow(tmp_path: Path) -> None:
    job = write_job(tmp_path, BAD)
    proc = subprocess.run(
        [sys.executable, "-m", "vtrain", "validate", str(job)],
        capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, vtrain.cli, vtrain.commands.render, vtrain.request.custom_job, "
         "vtrain.request.render;"
         "print(sorted(m for m in sys.modules if m.startswith(('tensorflow', 'google.cloud.', 'google.protobuf'))))"],
        capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO)}, check=True,
    )  # fmt: skip
    assert probe.stdout.strip() == "[]"


def test_render_region_follows_submit_precedence(tmp_path: Path, monkeypatch) -> None:
    job = write_job(tmp_path, JOB)  # names no region
    monkeypatch.setenv("VTRAIN_REGION", "europe-west4")
    image = "europe-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"
    code, out, _ = run("render", str(job))
    assert code == 0
    assert json.loads(out)["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"] == image
    code, out, _ = run("render", str(job), "--region", "asia-east1", "-o", "gcloud")
    assert "--region=asia-east1" in out.splitlines()[1]
    assert "asia-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest" in out
    job.write_text("region: us-east1\n" + job.read_text())
    code, out, _ = run("render", str(job), "-o", "gcloud")
    assert "--region=us-east1" in out.splitlines()[1]  # the job file beats the environment


def test_set_null_removes_a_key(tmp_path: Path) -> None:
    job = write_job(tmp_path, JOB)
    code, out, err = run("render", str(job), "--set", "trainer.package_uris=null",
                         "--set", "trainer.container={image_uri: us-docker.pkg.dev/p/r/img:1}",
                         "--set", "trainer.module=null", "--set", "trainer.image=null")  # fmt: skip
    assert (code, err) == (0, "")
    pool = json.loads(out)["jobSpec"]["workerPoolSpecs"][0]
    assert "pythonPackageSpec" not in pool and pool["containerSpec"]["imageUri"] == "us-docker.pkg.dev/p/r/img:1"


def test_validate_reads_the_trainers_pyproject(tmp_path: Path) -> None:
    pkg = tmp_path / "trainer"
    (pkg / "trainer").mkdir(parents=True)
    (pkg / "trainer" / "task.py").write_text("print('hi')\n")
    (pkg / "pyproject.toml").write_text("[project\nname = 'x'\n")
    job = write_job(tmp_path, JOB.replace("package_uris: [gs://my-bucket/t.tar.gz]", "package: trainer")
                    .replace("name: demo", "name: demo\nstaging_bucket: gs://my-bucket/staging"))
    code, _, err = run("validate", str(job))
    assert code == 2
    assert f"trainer.package: {pkg / 'pyproject.toml'}: not valid TOML" in err


def test_render_on_a_cold_cache_builds_and_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    """Issue 32, "a pure request": the sdist's name is planned from the file selection, so a first render needs no
    build and leaves vtrain's cache as it was (not even made)."""
    from vtrain.trainer import packaging

    cache = tmp_path / "cache"
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(cache))

    def no_build(*_: object, **__: object) -> Path:
        raise AssertionError("render ran the build backend")

    monkeypatch.setattr(packaging, "run_backend", no_build)
    code, out, err = run("render", str(REPO / "configs" / "quickstart.yaml"))
    assert code == 0, err
    uris = json.loads(out)["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"]
    assert uris[0].startswith("gs://my-vtrain-bucket/staging/vtrain/trainer-") and uris[0].endswith(".tar.gz")
    assert not cache.exists()


def test_render_refuses_a_bad_project_before_reading_the_trainer(tmp_path: Path, monkeypatch) -> None:
    from vtrain.jobfile import artifacts

    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(tmp_path / "cache"))

    def no_plan(*_: object, **__: object) -> None:
        raise AssertionError("render planned the artifacts before checking --project")

    monkeypatch.setattr(artifacts, "plan_artifacts", no_plan)
    code, out, err = run("render", str(REPO / "configs" / "quickstart.yaml"), "--project", "BAD_")
    assert (code, out) == (1, "")
    assert "project 'BAD_' (from --project) is not a project ID" in err and "Traceback" not in err
    assert not (tmp_path / "cache").exists()


def test_render_plans_a_built_image_in_the_region_it_renders_for() -> None:
    """The image on each pool's base is planned for the region the request is built for (regional bases)."""
    code, out, err = run("render", str(REPO / "configs" / "build-image.yaml"), "--region", "europe-west4")
    assert code == 0, err
    pools = [p for p in json.loads(out)["jobSpec"]["workerPoolSpecs"] if p]
    assert pools and all(":" in p["containerSpec"]["imageUri"] for p in pools)
