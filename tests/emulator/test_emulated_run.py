"""`vtrain emulator --run-jobs`: jobs submitted to the emulator run as real processes (vtrain.emulator.local_jobs).

The Vertex emulator runs in this process with the emulated runner. Packages are staged to
gcp-storage-emulator, and the probe trainer (tests/data/trainers/probe) prints, raises or sleeps
as told. The CLI talks to both through the real clients.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import REPO
from tests.helpers import MakeEmulator, write_job
from tests.local.test_local_run import alive
from vtrain.cli import cli
from vtrain.emulator import Emulator
from vtrain.emulator.local_jobs import EmulatedRunner

PROBE = REPO / "tests" / "data" / "trainers" / "probe"
PROJECT = "test-project"  # the bucket fixture (tests/emulator/conftest.py) names it
NAME_RE = rf"projects/{Emulator.project_number(PROJECT)}/locations/us-central1/customJobs/([0-9]+)"


@pytest.fixture
def emu(make_emulator: MakeEmulator, tmp_path: Path, cache: Path, bucket: Any) -> Emulator:
    runner = EmulatedRunner(cache_dir=cache, output_root=tmp_path / "runs", kill_grace=2)
    return make_emulator(runner, pending_seconds=0.05, cancel_seconds=0.05)


def probe_job(tmp_path: Path, name: str, args: list[str], cluster: str = "workers: {replicas: 1}",
              extra: str = "") -> Path:
    return write_job(tmp_path, f"""
        name: {name}
        region: us-central1
        staging_bucket: gs://stage-bkt/s
        base_output_dir: gs://stage-bkt/out
        trainer:
          package: {PROBE}
          module: trainer.task
          image: tf-cpu.2-17
          args: {json.dumps(args)}
        cluster:
          chief: {{machine_type: n1-standard-4}}
          {cluster}
        {extra}
        """, f"{name}.yaml")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def until(check: Callable[[], Any], timeout: float = 90.0, what: str = "condition") -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def printed_pids(log: str) -> list[int]:
    """What the probe replicas report: their own pids and those of the children they forked."""
    return [int(p) for p in re.findall(r"(?:starting, pid|forked) (\d+)$", log, re.M)]


@pytest.mark.slow
def test_submit_wait_runs_the_trainer_and_logs_its_lines(tmp_path: Path, emu: Emulator) -> None:
    dump = tmp_path / "seen"
    job = probe_job(tmp_path, "probe-ok", ["--dump", str(dump)])
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.05", "--api-endpoint", emu.url)
    assert code == 0, err
    job_id = re.search(rf"^Submitted {NAME_RE} \(probe-ok\)$", out, re.M).group(1)  # type: ignore[union-attr]
    assert re.search(rf"{NAME_RE} ended JOB_STATE_SUCCEEDED after", out)

    code, log, _ = run("logs", job_id, "--api-endpoint", emu.url)
    lines = log.splitlines()
    assert code == 0
    for replica in ("chief-0", "worker-0"):
        assert any(re.fullmatch(rf"\[{replica}\] probe {replica} starting, pid \d+", line) for line in lines), log
        assert f"[{replica}] probe {replica} done" in lines
    runs = tmp_path / "runs" / job_id
    assert f"[vertex] baseOutputDirectory gs://stage-bkt/out is not on this machine: outputs go to {runs}" in lines
    # Each replica saw Vertex's environment, with the emulator's job ID.
    chief = json.loads((dump / "chief-0.json").read_text())["env"]
    assert chief["CLOUD_ML_JOB_ID"] == job_id and chief["AIP_MODEL_DIR"] == f"{runs}/model/"
    assert json.loads(chief["TF_CONFIG"])["task"] == {"type": "chief", "index": 0}
    assert json.loads((dump / "worker-0.json").read_text())["env"]["CLOUD_ML_JOB_ID"] == job_id
    code, out, _ = run("list", "--api-endpoint", emu.url)
    assert code == 0 and out.splitlines()[1].split()[:2] == [job_id, "SUCCEEDED"]


@pytest.mark.slow
def test_a_raising_trainer_fails_the_job_with_its_traceback(tmp_path: Path, emu: Emulator) -> None:
    """As on Vertex, the chief is restarted in place 5 times; disable_retries: then the job fails."""
    job = probe_job(tmp_path, "probe-raise", ["--raise", "chief-0"], cluster="",
                    extra="scheduling: {disable_retries: true}")
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.05", "--api-endpoint", emu.url)
    assert code == 10, err
    job_id = re.search(NAME_RE, out).group(1)  # type: ignore[union-attr]
    assert re.search(rf"^error: job {NAME_RE} ended JOB_STATE_FAILED: chief-0 exited 1 after 5 restarts$", err, re.M)
    code, out, _ = run("status", job_id, "--api-endpoint", emu.url, "--exit-code")
    assert code == 10
    assert "error         chief-0 exited 1 after 5 restarts\n" in out
    assert "  | Traceback (most recent call last):\n" in out
    assert "  | RuntimeError: probe chief-0 was told to raise\n" in out
    # Cloud Logging's severity, as Vertex writes it: the replica's stderr (the traceback) at ERROR, its
    # stdout at INFO (issue 21, item 5).
    numeric = job_id.rsplit("/", 1)[-1]
    ask = urllib.request.Request(f"{emu.url}/v2/entries:list", method="POST",
                                 headers={"Content-Type": "application/json"},
                                 data=json.dumps({"filter": f'resource.labels.job_id="{numeric}"',
                                                  "pageSize": 1000}).encode())
    with urllib.request.urlopen(ask, timeout=30) as answer:
        entries = json.loads(answer.read()).get("entries", [])
    severity = {e.get("textPayload", e.get("jsonPayload", {}).get("message", "")): e.get("severity") for e in entries}
    assert severity.get("RuntimeError: probe chief-0 was told to raise") == "ERROR", severity
    assert any(text.startswith("probe chief-0 starting") and s == "INFO" for text, s in severity.items()), severity


def test_a_container_job_fails_with_the_local_runners_docker_message(tmp_path: Path, emu: Emulator) -> None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "version"], capture_output=True, check=False).returncode == 0:
        pytest.skip("docker runs here: the container would really start")
    job = write_job(tmp_path, """
        name: boxed
        region: us-central1
        trainer: {container: {image_uri: us-docker.pkg.dev/p/r/trainer:1}}
        cluster: {chief: {machine_type: n1-standard-4}}
        """)
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.05", "--api-endpoint", emu.url)
    assert code == 10
    assert re.search(r"ended JOB_STATE_FAILED: this job runs image us-docker\.pkg\.dev/p/r/trainer:1 in a container, "
                     r"but docker cannot run it|runs containers with docker, which is not installed here", err), err


@pytest.mark.slow
def test_cancel_stops_every_replica(tmp_path: Path, emu: Emulator) -> None:
    job = probe_job(tmp_path, "probe-sleep", ["--sleep", "all", "--fork", "chief-0"])
    code, out, err = run("submit", str(job), "-o", "json", "--api-endpoint", emu.url)
    assert code == 0, err
    name = json.loads(out)["name"]

    def started() -> list[int]:
        pids = printed_pids(run("logs", name, "--api-endpoint", emu.url)[1])
        return pids if len(pids) == 3 else []

    pids = until(started, what="both replicas and the chief's child to start")
    assert all(alive(pid) for pid in pids)
    cancelled = run("cancel", name, "--api-endpoint", emu.url)
    assert cancelled == (0, f"Cancel requested: {name} is JOB_STATE_CANCELLING\n", "")
    until(lambda: run("status", name, "--api-endpoint", emu.url, "--exit-code")[0] == 11, timeout=30, what="CANCELLED")
    assert [pid for pid in pids if alive(pid)] == []
    job_id = name.rsplit("/", 1)[1]
    result = json.loads((tmp_path / "runs" / job_id / "vtrain-local" / job_id / "result.json").read_text())
    assert result["state"] == "JOB_STATE_CANCELLED" and sorted(result["replicas"]) == ["chief-0", "worker-0"]
    assert "[vertex] cancelled: stopping every replica" in run("logs", name, "--api-endpoint", emu.url)[1]


@pytest.mark.slow
def test_command_run_jobs_serves_runs_and_leaves_no_process_when_stopped(
    tmp_path: Path, cache: Path, bucket: Any
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "VTRAIN_"))}
    env.update(PYTHONPATH=str(REPO), VTRAIN_CACHE_DIR=str(cache), TMPDIR=str(tmp_path),
               STORAGE_EMULATOR_HOST=bucket.host, GOOGLE_CLOUD_PROJECT=PROJECT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "vtrain", "emulator", "--run-jobs", "--port", "0", "--pending-seconds", "0", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), proc.stderr.read() if proc.stderr else ""
        code, out, err = run("submit", str(probe_job(tmp_path, "served", ["--sleep", "all"])), "-o", "json",
                             "--api-endpoint", url)
        assert code == 0, err
        name = json.loads(out)["name"]
        pids = until(lambda: (p := printed_pids(run("logs", name, "--api-endpoint", url)[1])) and len(p) == 2 and p,
                     what="both replicas to start")
        assert run("status", name, "--api-endpoint", url, "--exit-code")[0] == 12  # RUNNING
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None and "emulator stopped" in proc.stderr.read()
    assert [pid for pid in pids if alive(pid)] == []


def test_runner_parts_and_a_missing_package(tmp_path: Path, cache: Path) -> None:
    """Called directly, as the emulator calls it: a job the REST body describes, a context to log to."""
    from google.cloud.aiplatform_v1 import CustomJob
    from google.protobuf import json_format

    from vtrain.emulator import RunContext
    from vtrain.emulator.local_jobs import package_uris
    from vtrain.local.runner import local_output_dir

    def spec(base: str | None) -> dict[str, Any]:
        return {"jobSpec": {"baseOutputDirectory": {"outputUriPrefix": base}} if base else {"jobSpec": {}}}

    assert [local_output_dir(spec(b)) for b in ("gs://b/out", "file:///srv/out", "/srv/out", None)] == [
        None, Path("/srv/out"), Path("/srv/out"), None]
    pool = {"pythonPackageSpec": {"packageUris": ["gs://b/t.tar.gz", "gs://b/v.tar.gz"]}}
    assert package_uris({"jobSpec": {"workerPoolSpecs": [pool, {}, pool]}}) == ["gs://b/t.tar.gz", "gs://b/v.tar.gz"]

    missing = tmp_path / "nowhere" / "trainer-0.1.tar.gz"
    body = {"displayName": "lost", "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
        "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
                              "packageUris": [missing.as_uri()], "pythonModule": "trainer.task"}}]}}
    job = CustomJob()
    json_format.ParseDict(body, job._pb)
    logged: list[tuple[str, str]] = []
    ctx = RunContext(job_id="123", _sink=lambda message, task, severity: logged.append((task, message)))
    result = EmulatedRunner(cache_dir=cache, output_root=tmp_path / "runs")(job, ctx)
    assert (result.state, result.error) == ("JOB_STATE_FAILED", f"trainer package {missing.as_uri()} not found")
    assert logged[-1] == ("", f"the job cannot run here: trainer package {missing.as_uri()} not found")


@pytest.mark.slow
def test_faults_from_the_jobs_labels_and_vertex_restarts(tmp_path: Path, emu: Emulator) -> None:
    """`vtrain-fault` labels: the emulator injects them, and restarts the replica as Vertex would."""
    job = probe_job(tmp_path, "probe-fault", ["--sleep", "all", "--seconds", "3"],
                    extra="labels: {vtrain-fault: worker-0_kill_1s}")
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.05", "--api-endpoint", emu.url)
    assert code == 0, err
    job_id = re.search(NAME_RE, out).group(1)  # type: ignore[union-attr]
    code, log, _ = run("logs", job_id, "--api-endpoint", emu.url)
    lines = log.splitlines()
    assert "[vertex] fault worker-0:kill@1s: SIGKILL worker-0" in lines
    assert "[vertex] worker-0 exited 137 (SIGKILL); restarting 1/5" in lines
    assert "[worker-0] worker-0 restart 1, job attempt 1" in lines
    assert "[vertex] restarts: worker-0 1 (attempt 1 of the job)" in lines


def test_a_malformed_fault_label_fails_the_job_before_it_runs(tmp_path: Path, cache: Path) -> None:
    from google.cloud.aiplatform_v1 import CustomJob
    from google.protobuf import json_format

    from vtrain.emulator import RunContext

    body = {"displayName": "bad-fault", "labels": {"vtrain-fault": "worker-0_explode_1s"}, "jobSpec": {
        "workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                             "pythonPackageSpec": {"executorImageUri": "x", "packageUris": ["gs://b/t.tar.gz"],
                                                   "pythonModule": "trainer.task"}}]}}
    job = CustomJob()
    json_format.ParseDict(body, job._pb)
    logged: list[tuple[str, str]] = []
    ctx = RunContext(job_id="7", _sink=lambda message, task, severity: logged.append((task, message)))
    result = EmulatedRunner(cache_dir=cache, output_root=tmp_path / "runs")(job, ctx)
    assert (result.state, result.code) == ("JOB_STATE_FAILED", 3)
    assert result.error == ("fault 'worker-0:explode@1s': kind 'explode' is not one of kill, preempt[:GRACE], "
                            "stop:SECONDS, late")
    assert logged == [("", f"the job's fault labels cannot be used: {result.error}")]  # nothing fetched


@pytest.mark.slow
def test_the_chief_logs_its_experiment_run_which_the_sdk_reads_back(tmp_path: Path, emu: Emulator) -> None:
    """issue 31 acceptance: `experiment` and `experiment_run: r1`, submitted with --wait to real processes:
    the run is in get_experiment_df() with the trainer's params and final metric."""
    job = probe_job(tmp_path, "probe-exp", ["--metric", "loss=0.5", "--metric", "loss=0.25", "--count", "7"],
                    cluster="", extra="experiment: churn\n        experiment_run: r1")  # fmt: skip
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.05", "--api-endpoint", emu.url)
    assert code == 0, err
    assert "experiment run 'r1' created" in err

    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(project=PROJECT, location="us-central1", api_transport="rest", api_endpoint=emu.url,
                    credentials=AnonymousCredentials())  # fmt: skip
    job_id = re.search(rf"^Submitted {NAME_RE}", out, re.M).group(1)  # type: ignore[union-attr]
    log = run("logs", job_id, "--api-endpoint", emu.url)[1]
    (row,) = aiplatform.get_experiment_df("churn").to_dict("records")
    assert "metric.loss" in row, log
    assert (row["run_name"], row["metric.loss"], row["param.count"], row["param.metric"]) == ("r1", 0.25, 7,
                                                                                             "loss=0.25")
