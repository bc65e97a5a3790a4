"""`vtrain submit/status/logs/cancel/list` through click against the Vertex and Cloud Storage emulators.

Exact output and exit codes; refusals must be one `error:` line with a non-zero exit, never a traceback.
"""

from __future__ import annotations

import importlib
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf import json_format

from tests.cloud.test_submit import job_text, runner
from tests.conftest import REPO
from tests.helpers import MakeEmulator, write_job
from vtrain.cli import cli
from vtrain.emulator import Emulator, GatedRunner, sleep_runner

SUBMIT = importlib.import_module("vtrain.cloud.submit")
PROJECT = "test-project"
PARENT = f"projects/{PROJECT}/locations/us-central1"
NAME_RE = rf"projects/{Emulator.project_number(PROJECT)}/locations/us-central1/customJobs/[0-9]+"  # by number


def _point_at(monkeypatch: pytest.MonkeyPatch, emu: Emulator) -> None:
    monkeypatch.setenv("VTRAIN_API_ENDPOINT", emu.url)
    monkeypatch.setenv("VTRAIN_PROJECT", PROJECT)
    monkeypatch.setenv("VTRAIN_REGION", "us-central1")  # so no test asks gcloud


pytestmark = [pytest.mark.emulator(runner=runner, point_at=PROJECT), pytest.mark.usefixtures("fast_retries")]


@pytest.fixture
def gated(make_emulator: MakeEmulator) -> tuple[Emulator, GatedRunner]:
    gate = GatedRunner()
    return make_emulator(gate, pending_seconds=0, cancel_seconds=0, point_at=PROJECT), gate


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def submit_json(job: Path, *extra: str, exit_code: int = 0) -> dict[str, Any]:
    code, out, err = run("submit", str(job), "-o", "json", *extra)
    assert code == exit_code, err
    return dict(json.loads(out))


# ---- submit -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_submit_wait_succeeds_and_sends_what_render_prints(tmp_path: Path, emu: Emulator, bucket: Any) -> None:
    job = write_job(tmp_path, job_text())
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.02")
    assert code == 0, err
    lines = out.splitlines()
    name = re.fullmatch(rf"Submitted ({NAME_RE}) \(tiny\)", lines[0]).group(1)  # type: ignore[union-attr]
    job_id = name.rsplit("/", 1)[1]
    assert lines[1:] == [
        f"  console: https://console.cloud.google.com/vertex-ai/locations/us-central1/training/{job_id}/cpu"
        f"?project={PROJECT}",
        "  next:",
        f"    vtrain status {name}",
        f"    vtrain logs {name} --follow",
        f"    vtrain cancel {name}",
        f"{name} ended JOB_STATE_SUCCEEDED after 0s",
    ]
    staged, states = err.splitlines()[:2], err.splitlines()[2:]
    assert [s.split()[:2] for s in staged] == [["trainer", "uploaded"], ["runtime", "uploaded"]]
    assert [s.split()[:2] for s in states if not s.startswith("[vtrain] progress")][-1] == [job_id, "SUCCEEDED"]
    # the view's last rows
    assert re.fullmatch(r"\[vtrain\] progress 0:00: chief-0 succeeded; worker-0 succeeded", states[-1]), err
    # The request sent equals `vtrain render` but for vtrain's labels.
    code, rendered, _ = run("render", str(job))
    [post] = [r for r in emu.requests if r["method"] == "POST" and r["path"].endswith("/customJobs")]
    sent = proto_dict(post["body"])
    assert sorted(k for k in sent["labels"] if k.startswith("vtrain-")) == [
        "vtrain-config-hash",
        "vtrain-submit-id",
        "vtrain-version",
    ]
    sent["labels"] = {k: v for k, v in sent["labels"].items() if not k.startswith("vtrain-")}
    assert sent == proto_dict(json.loads(rendered))


def proto_dict(body: dict[str, Any]) -> dict[str, Any]:
    """A REST body through the real CustomJob proto and back: one canonical form to compare."""
    from vtrain.request.custom_job import to_proto

    return dict(json_format.MessageToDict(to_proto(body)._pb))


@pytest.mark.slow
def test_failing_job_streams_logs_and_exits_10(tmp_path: Path, emu: Emulator, bucket: Any) -> None:
    code, out, err = run("submit", str(write_job(tmp_path, job_text("fail-me"))), "--stream-logs", "--poll", "0.02")
    assert code == 10
    assert "[chief-0] start fail-me\n[worker-0] worker up\n" in out
    assert re.search(rf"^error: job {NAME_RE} ended JOB_STATE_FAILED: workerpool0-0 exited with status 1$", err, re.M)
    assert "Traceback" not in err


@pytest.mark.slow
def test_wait_timeout_exits_12_and_the_job_keeps_running(tmp_path: Path, gated: Any, bucket: Any) -> None:
    emu, gate = gated
    args = ("--wait-timeout", "1s", "--poll", "0.05", "-o", "json")  # --wait-timeout implies --wait
    code, out, err = run("submit", str(write_job(tmp_path, job_text())), *args)
    assert code == 12 and out == ""
    assert re.search(rf"^error: job ({NAME_RE}) is still JOB_STATE_RUNNING after waiting 1 s", err, re.M)
    assert [j.state.name for j in emu.jobs()] == ["JOB_STATE_RUNNING"]
    code, _, err = run("submit", "x.yaml", "--wait", "--wait-timeout", "soon")
    assert code == 2 and "Invalid value for '--wait-timeout': expected a duration like 90s" in err


@pytest.mark.slow
def test_if_changed_skips_a_running_twin(tmp_path: Path, gated: Any, bucket: Any) -> None:
    emu, gate = gated
    job = write_job(tmp_path, job_text())
    first = submit_json(job, "--if-changed")
    code, out, err = run("submit", str(job), "--if-changed")
    assert code == 0
    assert out.splitlines()[0] == (
        f"Not submitted: {first['name']} (tiny) has the same config hash "
        f"{first['labels']['vtrain-config-hash']} and is JOB_STATE_RUNNING"
    )
    assert submit_json(job, "--if-changed")["name"] == first["name"] and len(emu.jobs()) == 1
    assert submit_json(job)["name"] != first["name"]  # without the flag: always a new job


@pytest.mark.slow
def test_dry_run_sends_nothing_and_needs_no_credentials(
    tmp_path: Path, emu: Emulator, bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    job = write_job(tmp_path, job_text())
    code, out, err = run("submit", str(job), "--dry-run", "-o", "json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["request"]["url"] == f"{emu.url}/v1/{PARENT}/customJobs"
    assert [p["role"] for p in report["packages"]] == ["trainer", "runtime"]
    code, out, err = run("submit", str(job), "--dry-run")
    assert code == 0
    assert out.splitlines()[:2] == [
        "Dry run: nothing is uploaded and no API is called.",
        f"POST {emu.url}/v1/{PARENT}/customJobs",
    ]
    assert f"->  {report['packages'][0]['uri']}  (built, " in out
    assert out.splitlines()[-1] == f"config hash {report['configHash']}; added when submitting: label vtrain-submit-id"
    assert emu.requests == [] and bucket.object_names("stage-bkt") == []


def test_dry_run_in_a_subprocess(tmp_path: Path) -> None:
    job = write_job(tmp_path, job_text())
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent"}
    done = subprocess.run(
        [sys.executable, "-m", "vtrain", "submit", str(job), "--dry-run", "-o", "json", "--project", "ci-project"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["request"]["url"].startswith(
        "https://us-central1-aiplatform.googleapis.com/v1/projects/ci-project/"
    )


# ---- status, logs, cancel, list -----------------------------------------------------------------
@pytest.mark.slow
def test_status_logs_and_list(tmp_path: Path, emu: Emulator, bucket: Any) -> None:
    ok = submit_json(write_job(tmp_path, job_text("ok-job")), "--wait", "--poll", "0.02")
    failed = submit_json(write_job(tmp_path, job_text("fail-job"), "f.yaml"), "--wait", "--poll", "0.02", exit_code=10)
    assert (ok["state"], failed["state"]) == ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED")
    ok_id, failed_id = ok["name"].rsplit("/", 1)[1], failed["name"].rsplit("/", 1)[1]

    code, out, _ = run("status", ok_id)
    rows = {line[:12].rstrip(): line[14:] for line in out.splitlines()}
    assert code == 0 and rows["id"] == ok_id and rows["name"] == ok["name"] and rows["state"] == "JOB_STATE_SUCCEEDED"
    code, out, _ = run("status", failed["name"], "-o", "json")
    assert code == 0 and json.loads(out)["error"]["message"] == "workerpool0-0 exited with status 1"
    code, out, _ = run("status", failed_id)
    assert code == 0 and "error         workerpool0-0 exited with status 1" in out
    # --exit-code: the state as the exit status, for scripts that branch on the outcome.
    assert run("status", failed_id, "--exit-code")[0] == 10
    assert run("status", ok_id, "--exit-code")[0] == 0

    assert run("logs", ok_id) == (0, "[chief-0] start ok-job\n[worker-0] worker up\n[chief-0] done\n", "")
    assert run("logs", ok["name"], "--replica", "worker-0") == (0, "[worker-0] worker up\n", "")
    code, out, _ = run("logs", ok_id, "--timestamps", "--replica", "chief-0")
    assert code == 0 and re.fullmatch(r"(\d{4}-\d\d-\d\dT[0-9:.]+Z \[chief-0\] \S+.*\n){2}", out)
    code, _, err = run("logs", ok_id, "--replica", "master-0")
    assert code == 2 and "Invalid value for '--replica': replica 'master-0' is not chief-0" in err
    code, out, err = run("logs", ok_id, "--replica", "worker-9")  # a replica the job lacks: said, not silence
    assert (code, out) == (2, "") and "has no replica worker-9 (it has chief-0, worker-0); did you mean" in err, err

    code, out, _ = run("list")
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["ID", "STATE"],
        [failed_id, "FAILED"],
        [ok_id, "SUCCEEDED"],
    ]
    assert out.splitlines()[1].endswith("  fail-job")
    assert [j["name"] for j in json.loads(run("list", "--state", "succeeded", "-o", "json")[1])] == [ok["name"]]
    assert [j["name"] for j in json.loads(run("list", "--limit", "1", "-o", "json")[1])] == [failed["name"]]
    assert json.loads(run("list", "--filter", 'display_name="ok-job"', "-o", "json")[1])[0]["name"] == ok["name"]
    assert run("list", "--state", "running") == (0, "no jobs\n", "")
    code, _, err = run("list", "--state", "done")
    assert code == 2 and "Invalid value for '--state': 'done' is not one of 'queued'" in err
    assert json.loads(run("list", "--state", "SUCCEEDED", "-o", "json")[1])[0]["name"] == ok["name"]


def test_state_choices_are_vertex_job_states() -> None:
    from google.cloud.aiplatform_v1 import JobState

    from vtrain.commands.jobs import JOB_STATES

    assert {f"JOB_STATE_{s.upper()}" for s in JOB_STATES} == set(JobState.__members__) - {"JOB_STATE_UNSPECIFIED"}


@pytest.mark.slow
def test_follow_logs_until_the_end(tmp_path: Path, emu: Emulator, bucket: Any) -> None:
    job = submit_json(write_job(tmp_path, job_text("followed")))
    code, out, _ = run("logs", job["name"], "--follow", "--poll", "0.02")
    assert (code, out) == (0, "[chief-0] start followed\n[worker-0] worker up\n[chief-0] done\n")


@pytest.mark.slow
def test_cancel(tmp_path: Path, gated: Any, bucket: Any) -> None:
    emu, gate = gated
    job = submit_json(write_job(tmp_path, job_text()))
    assert gate.started.wait(5)
    code, out, _ = run("status", job["name"])
    assert code == 0 and "JOB_STATE_RUNNING" in out  # the state was read: set -e scripts go on
    assert run("status", job["name"], "--exit-code")[0] == 12
    assert run("cancel", job["name"]) == (0, f"Cancel requested: {job['name']} is JOB_STATE_CANCELLING\n", "")
    gate.release()
    state = ""
    for _ in range(100):
        code, out, _ = run("status", job["name"], "-o", "json", "--exit-code")
        state = json.loads(out)["state"]
        if state == "JOB_STATE_CANCELLED":
            break
    assert (state, code) == ("JOB_STATE_CANCELLED", 11)
    assert run("cancel", job["name"].rsplit("/", 1)[1]) == (
        0,
        f"{job['name']} had already ended: JOB_STATE_CANCELLED\n",
        "",
    )
    code, out, _ = run("cancel", job["name"], "-o", "json")
    assert json.loads(out)["state"] == "JOB_STATE_CANCELLED"
    assert [r["path"].endswith(":cancel") for r in emu.requests].count(True) == 1


# ---- retries and refusals -------------------------------------------------------------------------
def test_transient_errors_are_retried_then_explained(emu: Emulator) -> None:
    emu.fail_next(2)
    emu.fail_next(1, code=429)
    code, out, err = run("list")
    assert (code, out) == (0, "no jobs\n")
    # One progress line per retry on stderr, naming the endpoint and what it answered.
    assert [re.sub(r"in [0-9.]+ s", "in N s", line) for line in err.splitlines()] == [
        f"Vertex AI at {emu.url} answered 503 UNAVAILABLE: The service is currently unavailable.; "
        "retrying in N s (attempt 2 of 4)",
        f"Vertex AI at {emu.url} answered 503 UNAVAILABLE: The service is currently unavailable.; "
        "retrying in N s (attempt 3 of 4)",
        f"Vertex AI at {emu.url} answered 429 RESOURCE_EXHAUSTED: Too many requests; please retry.; "
        "retrying in N s (attempt 4 of 4)",
    ]
    # three refused and one answered list of customJobs, then one of hyperparameterTuningJobs
    assert [r["path"].rsplit("/", 1)[1] for r in emu.requests] == ["customJobs"] * 4 + ["hyperparameterTuningJobs"]
    emu.fail_next(10)
    code, _, err = run("list")
    assert code == 1
    assert one_error_line(err.splitlines()[-1]).startswith(
        "error: cannot list jobs: Vertex AI kept failing (503 UNAVAILABLE: The service is currently unavailable.) "
        "after 4 attempts"
    )


@pytest.mark.slow
def test_permission_and_quota_errors_are_one_line(tmp_path: Path, emu: Emulator, bucket: Any) -> None:
    job = str(write_job(tmp_path, job_text()))
    code, _, err = run("submit", job, "--project", "denied-project")  # preflight's list is refused first
    assert code == 1 and one_error_line(err) == (
        "error: preflight: vertex ai: cannot list jobs: permission aiplatform.customJobs.list denied on "
        "projects/denied-project/locations/us-central1 for the current credentials; grant them "
        "roles/aiplatform.user (or a role with aiplatform.customJobs.list) in project denied-project"
    )
    code, _, err = run("submit", job, "--project", "denied-project", "--no-preflight")
    assert code == 1 and one_error_line(err) == (
        "error: cannot create job 'tiny': permission aiplatform.customJobs.create denied on "
        "projects/denied-project/locations/us-central1 for the current credentials; grant them "
        "roles/aiplatform.user (or a role with aiplatform.customJobs.create) in project denied-project"
    )
    code, _, err = run("status", "projects/denied-project/locations/us-central1/customJobs/1")
    assert code == 1 and "permission aiplatform.customJobs.get denied" in one_error_line(err)
    code, _, err = run("submit", job, "--project", "quota-project")
    assert code == 1 and one_error_line(err).startswith(
        "error: cannot create job 'tiny': quota aiplatform.googleapis.com/custom_model_training_cpus exceeded"
    )
    code, _, err = run("status", "projects/p-project/locations/europe-west4/customJobs/1", "--region", "us-east1")
    assert code == 1 and one_error_line(err) == (
        "error: job projects/p-project/locations/europe-west4/customJobs/1 is in region europe-west4, "
        "not us-east1 (from --region)"
    )


def test_missing_project_is_one_line(tmp_path: Path, emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VTRAIN_PROJECT")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # a gcloud on PATH finds nothing either
    code, _, err = run("list")
    assert code == 1 and one_error_line(err) == (
        "error: no Google Cloud project set: pass --project, set `project:` in the job file, set VTRAIN_PROJECT "
        "(or GOOGLE_CLOUD_PROJECT), or run `gcloud config set project ID`"
    )
    code, _, err = run("submit", str(write_job(tmp_path, job_text())))
    assert code == 1 and one_error_line(err).startswith("error: no Google Cloud project set")
    code, _, err = run("submit", str(write_job(tmp_path, job_text())), "--dry-run")  # a dry run needs none
    assert code == 0 and "no project set: the plan shows 'your-project-id'" in err
    assert emu.requests == []


def test_no_credentials_is_one_line(tmp_path: Path, bucket: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.setenv("VTRAIN_REGION", "us-central1")
    job = str(write_job(tmp_path, job_text()))
    for args in (
        ["submit", job, "--project", PROJECT],
        ["status", "42", "--project", PROJECT],
        ["list", "--project", PROJECT, "--api-endpoint", "private-aiplatform.example.com"],
    ):
        code, _, err = run(*args)
        assert code == 1 and one_error_line(err).startswith(
            "error: cannot connect to Vertex AI: no Google Cloud credentials found; run `gcloud auth "
            "application-default login`"
        ), args
    assert bucket.object_names("stage-bkt") == []


def test_refusal_in_a_subprocess_has_no_traceback(emu: Emulator) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "VTRAIN_API_ENDPOINT": emu.url}
    done = subprocess.run(
        [sys.executable, "-m", "vtrain", "list", "--project", "denied-project", "--region", "us-central1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert one_error_line(done.stderr).startswith(
        "error: cannot list jobs: permission aiplatform.customJobs.list denied"
    )


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code", "said"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_submit_wait_stopped_by_a_signal_exits_128_plus_it_and_names_it(tmp_path: Path, sig: int, code: int,
                                                                        said: str) -> None:
    """Issue 20, class 12: SIGTERM used to exit 130 (Ctrl-C's status) where the README says 143."""
    job = write_job(tmp_path, """
name: waited
trainer: {container: {image_uri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest}}
cluster:
  chief: {machine_type: n1-standard-4}
""")
    with Emulator(runner=sleep_runner(60), pending_seconds=0.05) as emu:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "VTRAIN_API_ENDPOINT": emu.url}
        proc = subprocess.Popen([sys.executable, "-m", "vtrain", "submit", str(job), "--wait", "--project", PROJECT,
                                 "--region", "us-central1", "--no-preflight"], env=env, stderr=subprocess.PIPE,
                                text=True)
        try:
            deadline = time.monotonic() + 60
            while not [j for j in emu.jobs() if j.state == 3] and time.monotonic() < deadline:  # RUNNING
                time.sleep(0.1)
            time.sleep(0.5)  # the CLI is in its wait loop
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == code, err
    assert f"interrupted ({said}): job projects/" in err and "keeps running" in err, err


def test_dry_run_with_no_project_plans_for_a_stand_in_and_says_so(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20 (a newcomer's first run): the README says a dry run needs no credentials, yet it needed a project."""
    from vtrain.cloud.dryrun import PLACEHOLDER_PROJECT

    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))  # no gcloud project either
    result = CliRunner().invoke(cli, ["submit", str(REPO / "configs" / "quickstart.yaml"), "--dry-run", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert f"/projects/{PLACEHOLDER_PROJECT}/locations/" in json.loads(result.stdout)["request"]["url"]
    assert "no project set" in result.stderr and "preflight skipped" in result.stderr


@pytest.mark.slow
def test_timeline_of_a_vertex_job_from_its_logs(tmp_path: Path, emu: Emulator, bucket: Any, monkeypatch: Any) -> None:
    ok = submit_json(write_job(tmp_path, job_text("ok-job")), "--wait", "--poll", "0.02")
    job_id = ok["name"].rsplit("/", 1)[1]
    monkeypatch.chdir(tmp_path)
    code, out, err = run("timeline", job_id)
    assert code == 0, err
    assert out.splitlines() == [f"timeline-{job_id}/timeline.html", f"timeline-{job_id}/timeline.png"]
    page = (tmp_path / f"timeline-{job_id}" / "timeline.html").read_text()
    assert re.findall(r'<text x="8" y="[^"]+">([^<]+)</text>', page) == ["chief-0", "worker-0"]  # a lane each
    assert "ok-job" in page and "JOB_STATE_SUCCEEDED" in page
    code, _, err = run("timeline", "123456789")
    assert code != 0 and "Traceback" not in err and err.startswith("error: "), err
