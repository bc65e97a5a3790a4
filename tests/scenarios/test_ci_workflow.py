"""examples/ci/vtrain.yml, step by step: every `run:` step of the workflow (but the install, which
this environment has done) runs in order as a subprocess, with the workflow's environment on free
ports, as GitHub's runner would run it: validate, render, start both emulators, submit --wait."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

WORKFLOW = REPO / "examples" / "ci" / "vtrain.yml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_workflow_is_what_the_test_runs() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["job-file"]["steps"]
    names = [s.get("name") or s["uses"] for s in steps]
    assert names.index("Validate (annotates the pull request at file:line:col)") < names.index(
        "Render the exact request") < names.index("actions/upload-artifact@v4") < names.index(
        "Submit and wait (the trainer really runs)")  # fmt: skip
    assert any("upload-artifact" in s.get("uses", "") for s in steps)


@pytest.mark.slow
def test_the_workflow_steps_run_in_order(tmp_path: Path) -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    job = workflow["jobs"]["job-file"]
    vertex, gcs = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "VTRAIN_"))}
    env.update({k: str(v) for k, v in job["env"].items()})
    env.update(
        VERTEX_PORT=str(vertex), GCS_PORT=str(gcs), VTRAIN_API_ENDPOINT=f"http://127.0.0.1:{vertex}",
        STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{gcs}", RUNNER_TEMP=str(tmp_path), TMPDIR=str(tmp_path),
        VTRAIN_CACHE_DIR=str(tmp_path / "env-cache"), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        GITHUB_ACTIONS="true",
    )  # fmt: skip
    steps = [s for s in job["steps"] if "run" in s and s.get("id") != "install"]
    results: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        for step in steps:
            if step.get("if") == "always()":
                continue  # the cleanup, run in `finally`
            done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=REPO, env=env, capture_output=True,
                                  text=True, timeout=420)  # fmt: skip
            results[step["name"]] = done
            assert done.returncode == 0, f"{step['name']}:\n{done.stdout}\n{done.stderr}"
    finally:
        for pid in (tmp_path / "emulators.pid").read_text().split() if (tmp_path / "emulators.pid").exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
    validate = results["Validate (annotates the pull request at file:line:col)"]
    assert validate.stdout == "examples/ci/job.yaml: valid: chief 1 × n1-standard-4\n"
    request = json.loads((tmp_path / "request.json").read_text())
    assert request["displayName"] == "ci-smoke" and request["labels"] == {"pipeline": "ci"}
    submitted = results["Submit and wait (the trainer really runs)"]
    assert "[chief-0] replica workerpool0-0 of job " in submitted.stderr + submitted.stdout
    assert "[chief-0] done" in submitted.stdout
    assert "ended JOB_STATE_SUCCEEDED" in submitted.stdout
