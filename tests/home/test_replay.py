"""Issue 43 part 2: `vtrain replay JOB` rehearses a job's ending here and says whether it was reproduced.

Jobs are submitted with `vtrain submit` to the Vertex emulator running them (`--run-jobs`: real processes), their
packages staged in gcp-storage-emulator; the probe trainer (tests/data/trainers/probe) reports steps and raises or
runs on as told, and keeps its step in AIP_CHECKPOINT_DIR when asked, so each job and its replay cost a few cheap
processes (no TensorFlow).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.emulator.test_emulated_run import run
from tests.helpers import MakeEmulator, write_job
from vtrain.emulator.jobfaults import JobFault, with_job_faults
from vtrain.emulator.local_jobs import EmulatedRunner

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "data" / "trainers" / "probe"
PROJECT = "test-project"


@pytest.fixture
def staged(gcs: Any, monkeypatch: pytest.MonkeyPatch, cache: Path) -> Path:
    gcs.create_bucket("stage-bkt")
    monkeypatch.setenv("VTRAIN_PROJECT", PROJECT)
    monkeypatch.setenv("VTRAIN_REGION", "us-central1")
    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(cache))
    return cache


def probe_job(tmp_path: Path, name: str, args: list[str], extra: str = "") -> Path:
    return write_job(tmp_path, f"""
        name: {name}
        staging_bucket: gs://stage-bkt/s
        trainer:
          package: {PROBE}
          module: trainer.task
          image: tf-cpu.2-17
          args: {json.dumps(args)}
          env: {{VTRAIN_STEP_LOG_EVERY: '0'}}
        cluster:
          chief: {{machine_type: n1-standard-4}}
        {extra}
        """, f"{name}.yaml")



def submitted(path: Path) -> str:
    code, out, err = run("submit", str(path), "--wait", "--poll", "0.05")
    match = re.search(r"customJobs/([0-9]+)", out)
    assert match, (code, out, err)
    return match.group(1)


@pytest.mark.slow
def test_a_chief_that_raises_at_step_7_is_reproduced_with_its_exception_and_step(
        tmp_path: Path, staged: Path, gcs: Any, make_emulator: MakeEmulator) -> None:
    make_emulator(EmulatedRunner(cache_dir=staged, output_root=tmp_path / "runs", kill_grace=2), point_at=PROJECT,
                  pending_seconds=0.05, cancel_seconds=0.05)
    job = probe_job(tmp_path, "raise-at-7", ["--steps=chief-0", "--count=10", "--step-seconds=0.01",
                                             "--checkpoint-at=5", "--raise-at=7"],
                    "scheduling: {disable_retries: true}\n        base_output_dir: gs://stage-bkt/out")
    job_id = submitted(job)
    code, out, _ = run("status", job_id, "-o", "json")
    assert json.loads(out)["state"] == "JOB_STATE_FAILED"
    # On Vertex the trainer writes AIP_CHECKPOINT_DIR (gs://stage-bkt/out/checkpoints/) itself; the emulator's
    # replicas wrote it on this machine: put it where Vertex would have.
    saved = tmp_path / "runs" / job_id / "checkpoints" / "chief-0.step"
    assert saved.read_text() == "5"
    gcs.client().bucket("stage-bkt").blob("out/checkpoints/chief-0.step").upload_from_filename(str(saved))
    code, out, err = run("replay", job_id, "--output-dir", str(tmp_path / "replay"), "--plain")
    assert code == 0, err
    assert out.splitlines()[-1] == ("replay: reproduced: chief-0 raised RuntimeError: probe chief-0 was told to raise "
                                    "at step 7 at step 7 (exit 1), as on Vertex")
    assert "[vtrain] on Vertex: FAILED: chief-0 raised RuntimeError" in err
    assert "on Vertex, chief-0's last error lines: RuntimeError: probe chief-0 was told to raise at step 7" in err
    # the job's checkpoint (step 5) came first, from its base_output_dir: the replay resumed at step 6
    assert "[vtrain] resuming from the job's checkpoints: 1 file(s) of gs://stage-bkt/out/checkpoints" in err
    assert (tmp_path / "replay" / "checkpoints" / "chief-0.step").read_text() == "5"
    run_dir = next((tmp_path / "replay" / "vtrain-local").glob("local-*"))
    assert (run_dir / "chief-0.log").read_text().count("probe chief-0 resuming at step 6") == 6
    # the same request ran here, with Vertex's restarts: 5 in place, then (disable_retries) the job failed
    result = json.loads((run_dir / "result.json").read_text())
    assert result["state"] == "JOB_STATE_FAILED" and result["restarts"]["restarts"] == {"chief-0": 5}


@pytest.mark.slow
def test_a_succeeded_job_replays_too_and_an_outside_failure_is_injected_again(
        tmp_path: Path, staged: Path, make_emulator: MakeEmulator) -> None:
    """A job that succeeds, then (a second emulator, `--fail-jobs preempted`) one preempted after 2 s of steps."""
    import vtrain

    runner = EmulatedRunner(cache_dir=staged, output_root=tmp_path / "runs", kill_grace=2)
    make_emulator(runner, point_at=PROJECT, pending_seconds=0.05, cancel_seconds=0.05)
    job = probe_job(tmp_path, "spot", ["--steps=chief-0", "--count=60", "--step-seconds=0.1"])
    verdict = vtrain.replay(submitted(job), output_dir=tmp_path / "r1")
    assert verdict.reproduced and verdict.faults == ()
    assert verdict.line == "replay: reproduced: on Vertex the job succeeded; here it succeeded"
    assert verdict.to_dict()["cloud"]["state"] == "JOB_STATE_SUCCEEDED"

    make_emulator(with_job_faults(runner, JobFault("preempted"), fail_after=2.0), point_at=PROJECT,
                  pending_seconds=0.05, cancel_seconds=0.05)  # its trainer is installed: it steps for 2 s
    verdict = vtrain.replay(submitted(job), output_dir=tmp_path / "r2")
    assert not verdict.reproduced
    assert verdict.cloud.state == "JOB_STATE_FAILED" and verdict.cloud.cause == "stock-out"  # the emulator's words
    assert verdict.cloud.replica == "chief-0" and verdict.cloud.step is not None and 1 <= verdict.cloud.step < 60
    assert verdict.faults == (f"chief-0:kill@step:{verdict.cloud.step}",)
    assert verdict.local.state == "JOB_STATE_SUCCEEDED"  # the probe restarts from step 1 and runs to the end
    assert verdict.line.startswith("replay: not reproduced: on Vertex chief-0 was stopped at step ")
    assert "with the same fault (chief-0:kill@step:" in verdict.line
    assert "a cloud-side cause: no capacity" in verdict.line
    summary = json.loads(Path(str(verdict.run_dir), "result.json").read_text())
    assert [f["spec"] for f in summary["faults"]] == list(verdict.faults)
    assert summary["restarts"]["restarts"] == {"chief-0": 1}
