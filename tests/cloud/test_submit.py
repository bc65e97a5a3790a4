"""The submit flow (vtrain.cloud.submit) against the Vertex emulator and the Cloud Storage emulator.

Real clients throughout: aiplatform_v1's REST JobServiceClient against vtrain.emulator, and
google-cloud-storage against gcp-storage-emulator (STORAGE_EMULATOR_HOST, from the `gcs` fixture).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf import json_format

import vtrain
from tests.conftest import REPO
from tests.helpers import planned, write_job
from vtrain.cloud.dryrun import dry_run_plan
from vtrain.cloud.jobs import watch
from vtrain.cloud.submit import (
    HASH_LABEL,
    VERSION_LABEL,
    config_hash,
    plan_submit,
    submit_job,
    version_label,
)
from vtrain.cloud.target import Target, Where
from vtrain.cloud.vertex import SUBMIT_LABEL, VertexJob, replica_label, task_name
from vtrain.emulator import Emulator, GatedRunner, RunContext, RunResult
from vtrain.errors import BackendError, ConfigError
from vtrain.handle import JobHandle, WaitTimeout

SUBMIT = importlib.import_module("vtrain.cloud.submit")  # the module (vtrain.cloud.submit is the function)
BASIC = REPO / "tests" / "data" / "trainers" / "basic"
POLL = 0.02
PROJECT = "test-project"


def no_gcloud(prop: str) -> str | None:
    return None


def job_text(name: str = "tiny", trainer: Path = BASIC, extra: str = "") -> str:
    return f"""
name: {name}
region: us-central1
staging_bucket: gs://stage-bkt/s
labels: {{team: ml}}
trainer:
  package: {trainer}
  module: trainer.task
  image: tf-cpu.2-17
cluster:
  chief: {{machine_type: n1-standard-4}}
  workers: {{replicas: 1}}
{extra}"""


def runner(job: Any, ctx: RunContext) -> RunResult:
    """Logs from two replicas; fails when the display name says so; honours cancel."""
    ctx.log(f"start {job.display_name}")
    ctx.log("worker up", task="workerpool1-0")
    if ctx.sleep(0.2):
        return RunResult("JOB_STATE_CANCELLED")
    if job.display_name.startswith("fail"):
        return RunResult("JOB_STATE_FAILED", "workerpool0-0 exited with status 1")
    ctx.log("done")
    return RunResult()


pytestmark = [pytest.mark.emulator(runner=runner), pytest.mark.usefixtures("fast_retries")]


@pytest.fixture
def trainer(tmp_path: Path) -> Path:
    return Path(shutil.copytree(BASIC, tmp_path / "trainer"))


# ---- planning: the exact request, offline ------------------------------------------------------
def test_plan_is_render_plus_labels(tmp_path: Path, trainer: Path) -> None:
    from vtrain.jobfile.load import load_config
    from vtrain.request.custom_job import build_job_dict

    job = write_job(tmp_path, job_text(trainer=trainer))
    plan = plan_submit(job, where=Where(project=PROJECT, env={}, gcloud=no_gcloud))
    rendered = build_job_dict(*planned(load_config(job)))
    labels = dict(plan.body["labels"])
    assert labels.pop(VERSION_LABEL) == version_label() == vtrain.__version__.replace(".", "-")
    assert labels.pop(HASH_LABEL) == plan.config_hash == config_hash(rendered)
    assert {**plan.body, "labels": labels} == rendered
    assert (
        plan.url
        == f"https://us-central1-aiplatform.googleapis.com/v1/projects/{PROJECT}/locations/us-central1/customJobs"
    )
    assert [p.role for p in plan.packages] == ["trainer", "runtime"]
    assert [p.uri for p in plan.packages] == rendered["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"][
        "packageUris"
    ]
    # The hash follows the request: same file → same hash; new trainer code or args → new hash.
    assert plan_submit(job, where=Where(
        project="other-project", env={}, gcloud=no_gcloud)).config_hash == plan.config_hash
    (trainer / "trainer" / "task.py").write_text("print('v2')\n")
    changed = plan_submit(job, where=Where(project=PROJECT, env={}, gcloud=no_gcloud))
    assert changed.config_hash != plan.config_hash
    assert plan_submit(
        job, overrides=["trainer.args=[--x]"], where=Where(project=PROJECT, env={}, gcloud=no_gcloud)
    ).config_hash not in (plan.config_hash, changed.config_hash)


def test_region_precedence_and_regional_images(tmp_path: Path) -> None:
    without = write_job(tmp_path, job_text().replace("region: us-central1\n", ""), "no-region.yaml")
    env = {"VTRAIN_REGION": "europe-west4"}
    plan = plan_submit(without, where=Where(project=PROJECT, env=env, gcloud=no_gcloud))
    assert plan.target.region == "europe-west4" and plan.config.region == "europe-west4"
    image = plan.body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"]
    assert image.startswith("europe-docker.pkg.dev/")
    gcloud = {"project": "gcloud-project", "ai/region": "asia-east1"}.get
    plan = plan_submit(without, where=Where(env={}, gcloud=gcloud))
    assert (plan.target.project, plan.target.region) == ("gcloud-project", "asia-east1")
    assert plan_submit(without, where=Where(env={}, gcloud=no_gcloud, project=PROJECT)).target.region == "us-central1"
    named = write_job(tmp_path, job_text())  # the file names us-central1: it beats the environment
    assert plan_submit(named, where=Where(project=PROJECT, env=env, gcloud=no_gcloud)).target.region == "us-central1"
    assert plan_submit(named, where=Where(
        project=PROJECT, region="us-east1", env=env, gcloud=no_gcloud)).target.region == "us-east1"


def test_target_from_names_flags_and_environment() -> None:
    name = "projects/proj-one/locations/europe-west4/customJobs/42"
    assert Where(env={}, gcloud=no_gcloud).resolve(job=name) == Target("proj-one", "europe-west4")
    with pytest.raises(BackendError, match=r"^job .* is in project proj-one, not proj-two \(from --project\)$"):
        Where("proj-two", env={}, gcloud=no_gcloud).resolve(job=name)
    env = {"VTRAIN_PROJECT": "env-project", "VTRAIN_API_ENDPOINT": "http://127.0.0.1:9/"}
    target = Where(env=env, gcloud=no_gcloud).resolve(job="42")
    assert target == Target("env-project", "us-central1", "http://127.0.0.1:9") and target.local
    assert Where(api_endpoint="eu-aiplatform.example.com", env=env, gcloud=no_gcloud).resolve().endpoint == (
        "https://eu-aiplatform.example.com"
    )
    with pytest.raises(BackendError, match="must be HOST"):
        Where(api_endpoint="ftp://x", env=env, gcloud=no_gcloud).resolve()


def test_reserved_and_too_many_labels(tmp_path: Path) -> None:
    job = write_job(tmp_path, job_text().replace("{team: ml}", "{team: ml, vtrain-config-hash: x}"))
    with pytest.raises(ConfigError) as err:
        plan_submit(job, where=Where(project=PROJECT, env={}, gcloud=no_gcloud))
    assert str(err.value).endswith("labels.vtrain-config-hash: label 'vtrain-config-hash' is set by vtrain "
                                   "itself; use another key")
    assert str(err.value).startswith(f"{job}:4:")
    with pytest.raises(ConfigError, match="is set by vtrain itself"):  # validate refuses it first (class 6)
        vtrain.load_config(job)
    many = "{" + ", ".join(f"k{i}: v" for i in range(62)) + "}"
    with pytest.raises(ConfigError, match="at most 59 labels"):
        plan_submit(
            write_job(tmp_path, job_text().replace("{team: ml}", many)), where=Where(
                project=PROJECT, env={}, gcloud=no_gcloud)
        )


def test_replica_names() -> None:
    assert [replica_label(t) for t in ("workerpool0-0", "workerpool1-3", "workerpool2-1", "workerpool3-0", "")] == [
        "chief-0",
        "worker-3",
        "ps-1",
        "evaluator-0",
        "vertex",
    ]
    assert replica_label("workerpool2-1", reducers=True) == "reducer-1"
    assert [task_name(r) for r in ("chief-0", "worker-3", "ps-1", "reducer-2", "evaluator-0", "workerpool1-0")] == [
        "workerpool0-0",
        "workerpool1-3",
        "workerpool2-1",
        "workerpool2-2",
        "workerpool3-0",
        "workerpool1-0",
    ]
    for bad in ("chief-1", "worker", "master-0"):
        with pytest.raises(BackendError, match=f"replica '{bad}' is not chief-0"):
            task_name(bad)


# ---- dry run ----------------------------------------------------------------------------------
def test_dry_run_builds_but_sends_nothing(
    tmp_path: Path, emu: Emulator, gcs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gcs.create_bucket("stage-bkt")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))  # no credentials
    secret = job_text().replace("  image: tf-cpu.2-17\n", "  image: tf-cpu.2-17\n  env: {API_TOKEN: s3cr3t}\n")
    job = write_job(tmp_path, secret)
    plan = plan_submit(job, where=Where(project=PROJECT, api_endpoint=emu.url, env={}, gcloud=no_gcloud))
    report = dry_run_plan(plan)
    assert report["request"]["url"] == f"{emu.url}/v1/projects/{PROJECT}/locations/us-central1/customJobs"
    env = report["request"]["body"]["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["env"]
    assert {"name": "API_TOKEN", "value": "<redacted>"} in env
    assert report["packages"][0]["size"] > 0 and report["packages"][0]["uri"] == plan.packages[0].uri
    assert report["configHash"] == plan.config_hash and report["addedAtSubmit"] == {"labels": [SUBMIT_LABEL]}
    assert emu.requests == [] and gcs.object_names("stage-bkt") == []


def test_the_sdk_dry_run_is_the_cli_report_and_says_what_it_stands_in_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vtrain.cli import cli as vtrain_cli
    from vtrain.cloud.dryrun import PLACEHOLDER_PROJECT

    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))  # no project anywhere
    job = write_job(tmp_path, job_text())
    report = vtrain.dry_run(job, preflight=True)
    assert f"/projects/{PLACEHOLDER_PROJECT}/locations/" in report["request"]["url"]
    assert report["notices"] == [f"no project set: the plan shows '{PLACEHOLDER_PROJECT}' (submit needs --project, "
                                 "`project:` in the job file, VTRAIN_PROJECT or gcloud's project); preflight skipped"]
    assert "preflight" not in report and report["packages"][0]["size"] > 0
    cli = CliRunner().invoke(vtrain_cli, ["submit", str(job), "--dry-run", "-o", "json"])
    assert cli.exit_code == 0, cli.output
    def same(doc: dict[str, Any]) -> dict[str, Any]:  # an sdist built twice differs in size by its archive's header
        return {**doc, "packages": [{k: v for k, v in p.items() if k != "size"} for p in doc["packages"]]}

    assert same(json.loads(cli.stdout)) == same({k: v for k, v in report.items() if k != "notices"})


# ---- submitting -------------------------------------------------------------------------------
def test_submit_stages_creates_and_succeeds(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt")
    job_file = write_job(tmp_path, job_text())
    result = submit_job(job_file, where=Where(
        project=PROJECT, api_endpoint=emu.url, env={}, gcloud=no_gcloud), poll=POLL)
    job = result.job
    assert isinstance(job, VertexJob) and isinstance(job, JobHandle) and not result.skipped
    assert [(s.uri, s.uploaded) for s in result.staged] == [(p.uri, True) for p in result.plan.packages]
    assert gcs.object_names("stage-bkt") == sorted(p.uri.removeprefix("gs://stage-bkt/") for p in result.plan.packages)
    assert job.proto.labels[HASH_LABEL] == result.plan.config_hash and job.proto.labels["team"] == "ml"
    assert job.wait() == "JOB_STATE_SUCCEEDED" and job.exit_code == 0
    assert list(job.logs()) == ["[chief-0] start tiny", "[worker-0] worker up", "[chief-0] done"]
    # What was sent is what `render` prints, apart from vtrain's labels.
    from vtrain.jobfile.load import load_config
    from vtrain.request.custom_job import build_job_dict, to_proto
    from vtrain.request.render import render

    [post] = [r for r in emu.requests if r["method"] == "POST" and r["path"].endswith("/customJobs")]
    sent = json_format.MessageToDict(to_proto(post["body"])._pb)
    for key in (VERSION_LABEL, HASH_LABEL, SUBMIT_LABEL):
        del sent["labels"][key]
    rendered = json.loads(render(build_job_dict(*planned(load_config(job_file))), "json"))
    assert sent == json_format.MessageToDict(to_proto(rendered)._pb)
    # Unchanged packages are not uploaded again.
    again = submit_job(job_file, where=Where(project=PROJECT, api_endpoint=emu.url, env={}, gcloud=no_gcloud))
    assert [s.uploaded for s in again.staged] == [False, False] and again.job.name != job.name


def test_if_changed_skips_a_live_twin(tmp_path: Path, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt")
    gate = GatedRunner()
    job_file = write_job(tmp_path, job_text())
    with Emulator(runner=gate, pending_seconds=0) as emu:
        where = Where(project=PROJECT, api_endpoint=emu.url, env={}, gcloud=no_gcloud)
        first = submit_job(job_file, if_changed=True, where=where)
        assert not first.skipped
        twin = submit_job(job_file, if_changed=True, where=where)
        assert twin.skipped and twin.job.name == first.job.name and twin.staged == ()
        other = submit_job(job_file, overrides=["trainer.args=[--lr=0.1]"], if_changed=True, where=where)
        assert not other.skipped and other.job.name != first.job.name
        gate.release()
        first.job.wait(poll=POLL)
        after = submit_job(job_file, if_changed=True, where=where)  # the twin ended: submit again
        assert not after.skipped and len(emu.jobs()) == 3
        listed = [r["query"].get("filter") for r in emu.requests if r["method"] == "GET" and "filter" in r["query"]]
        assert f'labels.{HASH_LABEL}="{first.plan.config_hash}"' in listed


def test_sdk_submit_returns_a_handle(tmp_path: Path, emu: Emulator, gcs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    gcs.create_bucket("stage-bkt")
    monkeypatch.setenv("VTRAIN_API_ENDPOINT", emu.url)
    monkeypatch.setenv("VTRAIN_PROJECT", PROJECT)
    handle = vtrain.submit(write_job(tmp_path, job_text("fail-sdk")))
    assert isinstance(handle, VertexJob) and handle.state == "JOB_STATE_PENDING"
    assert handle.wait(poll=POLL) == "JOB_STATE_FAILED" and handle.exit_code == 10
    assert handle.error == "workerpool0-0 exited with status 1"
    assert list(handle.logs(replica="chief-0")) == ["[chief-0] start fail-sdk"]
    handle.cancel()  # over already: nothing happens
    assert handle.state == "JOB_STATE_FAILED"


def test_transient_errors_are_retried(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt")
    emu.fail_next(2)  # the create, then the look-up for a job it may have created
    result = submit_job(
        write_job(tmp_path, job_text()), where=Where(project=PROJECT, api_endpoint=emu.url, env={}, gcloud=no_gcloud),
        preflight=False,  # the create's own requests alone (preflight's are tested in test_preflight.py)
    )
    assert [r["method"] for r in emu.requests] == ["POST", "GET", "GET", "POST"]
    assert [j.name for j in emu.jobs()] == [result.job.name]


def test_refusals_before_any_upload(tmp_path: Path, emu: Emulator, gcs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    gcs.create_bucket("stage-bkt")
    job_file = write_job(tmp_path, job_text())
    with pytest.raises(BackendError, match="^no Google Cloud project set"):
        submit_job(job_file, where=Where(api_endpoint=emu.url, env={}, gcloud=no_gcloud))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(BackendError, match="^cannot connect to Vertex AI: no Google Cloud credentials found"):
        submit_job(job_file, where=Where(project=PROJECT, env={}, gcloud=no_gcloud))
    assert gcs.object_names("stage-bkt") == [] and emu.requests == []


# ---- waiting ----------------------------------------------------------------------------------
def test_watch_reports_states_streams_logs_and_times_out(tmp_path: Path, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt")
    gate = GatedRunner()
    with Emulator(runner=gate, pending_seconds=0) as emu:
        where = Where(project=PROJECT, api_endpoint=emu.url, env={}, gcloud=no_gcloud)
        job = submit_job(write_job(tmp_path, job_text()), where=where).job
        states: list[str] = []
        with pytest.raises(WaitTimeout) as timeout:
            watch(job, timeout=0.1, poll=POLL, on_state=lambda s, t: states.append(s))
        assert timeout.value.exit_code == 12 and set(states) <= {"JOB_STATE_PENDING", "JOB_STATE_RUNNING"}
        with pytest.raises(WaitTimeout):
            watch(job, timeout=0.1, poll=POLL, on_log=lambda line: None)
        assert job.default_poll == 10.0  # restored
        gate.release("JOB_STATE_FAILED", "boom")
        lines: list[str] = []
        assert watch(job, poll=POLL, on_state=lambda s, t: states.append(s), on_log=lines.append) == "JOB_STATE_FAILED"
        assert states[-1] == "JOB_STATE_FAILED" and lines == []


# ---- real Google Cloud: opt-in, never in CI ---------------------------------------------------
CLOUD = os.environ.get("VTRAIN_CLOUD_TESTS") == "1"
CLOUD_PROJECT = os.environ.get("VTRAIN_CLOUD_PROJECT") or os.environ.get("GOOGLE_CLOUD_PROJECT")
CLOUD_REGION = os.environ.get("VTRAIN_CLOUD_REGION", "us-central1")


@pytest.mark.cloud
@pytest.mark.skipif(not (CLOUD and CLOUD_PROJECT), reason="set VTRAIN_CLOUD_TESTS=1 and VTRAIN_CLOUD_PROJECT")
def test_cloud_list_and_dry_run(tmp_path: Path) -> None:
    from vtrain.cloud.jobs import list_jobs

    jobs = list_jobs(Where(CLOUD_PROJECT, CLOUD_REGION), limit=1)
    assert len(jobs) <= 1 and all(j.name.startswith("projects/") for j in jobs)
    plan = plan_submit(write_job(tmp_path, job_text()), where=Where(project=CLOUD_PROJECT, region=CLOUD_REGION))
    assert dry_run_plan(plan)["request"]["url"].startswith(f"https://{CLOUD_REGION}-aiplatform.googleapis.com/")
