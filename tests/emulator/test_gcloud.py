"""The real `gcloud ai custom-jobs` against the emulator (skipped where gcloud is not installed).

gcloud reaches it through CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM (and _LOGGING for
stream-logs) with CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true, as the README says. Each call takes
2-3 s (gcloud's own start-up), so the tests are few and slow-marked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from google.cloud import aiplatform_v1 as v1

from tests.helpers import MakeEmulator
from vtrain.emulator import Emulator, GatedRunner, RunContext, RunResult

GCLOUD = shutil.which("gcloud")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(GCLOUD is None, reason="gcloud is not installed here")]
POOL = "machine-type=n1-standard-4,replica-count=1,container-image-uri=gcr.io/p/t:1"


def gcloud_env(emu: Emulator, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSDK_", "GOOGLE_"))}
    env.update(CLOUDSDK_CONFIG=str(config), CLOUDSDK_CORE_PROJECT="test-project", CLOUDSDK_CORE_DISABLE_PROMPTS="1",
               CLOUDSDK_AUTH_DISABLE_CREDENTIALS="true", CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM=emu.url + "/",
               CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING=emu.url + "/")
    return env


def gcloud(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    assert GCLOUD is not None
    return subprocess.run([GCLOUD, "ai", "custom-jobs", *args, "--region=us-central1"], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def gated(make_emulator: MakeEmulator) -> tuple[Emulator, GatedRunner]:
    runner = GatedRunner(honour_cancel=True)
    return make_emulator(runner, pending_seconds=0, cancel_seconds=0, token="ci-" + "t" * 20), runner


def test_create_list_describe_cancel(gated: tuple[Emulator, GatedRunner], tmp_path: Path) -> None:
    emu, _ = gated  # with --token: gcloud keeps the endpoint's path
    env = gcloud_env(emu, tmp_path / "gcloud")
    made = gcloud(env, "create", "--display-name=from-gcloud", f"--worker-pool-spec={POOL}", "--format=value(name)")
    assert made.returncode == 0, made.stderr
    name = made.stdout.strip().splitlines()[-1]
    assert name.startswith("projects/") and "/customJobs/" in name
    listed = gcloud(env, "list", "--format=json")
    assert listed.returncode == 0, listed.stderr
    assert [j["displayName"] for j in json.loads(listed.stdout)] == ["from-gcloud"]
    assert gcloud(env, "cancel", name).returncode == 0
    deadline = time.monotonic() + 30
    while (state := gcloud(env, "describe", name, "--format=value(state)").stdout.strip()) != "JOB_STATE_CANCELLED":
        assert time.monotonic() < deadline, state
    bad = gcloud(env, "describe", name.rsplit("/", 1)[0] + "/123")
    assert bad.returncode == 1 and "NOT_FOUND" in bad.stderr


def chatty(job: object, ctx: RunContext) -> RunResult:
    ctx.log("the runner's own notice", task="")
    ctx.log("a replica's line")
    return RunResult()


def test_stream_logs_prints_the_tasks_and_severities(tmp_path: Path) -> None:
    with Emulator(runner=chatty, pending_seconds=0) as emu:
        body = {"displayName": "logs", "jobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "containerSpec": {"imageUri": "x"}}]}}
        job = emu.client().create_custom_job(parent=emu.parent(), custom_job=v1.CustomJob.from_json(json.dumps(body)))
        deadline = time.monotonic() + 10
        while emu.jobs()[0].state.name != "JOB_STATE_SUCCEEDED":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert GCLOUD is not None
        err = tmp_path / "stderr"
        with open(err, "w") as err_file:
            proc = subprocess.Popen([GCLOUD, "ai", "custom-jobs", "stream-logs", job.name, "--region=us-central1"],
                                    env=gcloud_env(emu, tmp_path / "gcloud"), stdout=subprocess.PIPE,
                                    stderr=err_file, text=True)
        # gcloud keeps polling after the last line: read until two lines came, then stop it and take what else
        # it had printed. No fixed wait (a slow start on a busy machine is no failure); the watchdog only
        # ends a gcloud that never prints.
        watchdog = threading.Timer(120, proc.kill)
        watchdog.start()
        out: list[str] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                out += [line] if line.strip() else []
                if len(out) == 2:
                    break
        finally:
            watchdog.cancel()
            proc.kill()
            rest, _ = proc.communicate()
    lines = [line.rstrip("\n").split("\t") for line in out + rest.splitlines() if line.strip()]
    assert all(len(line) == 4 for line in lines), (lines, err.read_text())
    assert [(severity, task, text) for severity, _, task, text in lines] == [
        ("INFO", "service", "the runner's own notice"), ("INFO", "workerpool0-0", "a replica's line")]
