"""Preflight (`submit`, `submit --dry-run --preflight`, `vtrain doctor`) against gcp-storage-emulator and
vtrain's Vertex emulator (which answers IAM's serviceAccounts get and testIamPermissions too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cloud.test_submit import CLOUD, CLOUD_PROJECT, CLOUD_REGION, job_text, runner
from tests.commands.test_cli_vertex import PROJECT, run
from tests.helpers import write_job
from vtrain.emulator import Emulator

pytestmark = [pytest.mark.emulator(runner=runner, point_at=PROJECT), pytest.mark.usefixtures("fast_retries")]


SA = "trainer@test-project.iam.gserviceaccount.com"
ACT_AS = "iam.serviceAccounts.actAs"


def lines(err: str, prefix: str = "preflight: ") -> list[str]:
    return [line.removeprefix(prefix) for line in err.splitlines() if line.startswith(prefix)]


def creates(emu: Emulator) -> list[dict[str, Any]]:
    return [r for r in emu.requests if r["method"] == "POST" and r["path"].endswith("/customJobs")]


def test_bucket_in_another_region_is_refused_with_the_fix_nothing_uploaded_nothing_created(
    tmp_path: Path, emu: Emulator, gcs: Any
) -> None:
    gcs.create_bucket("stage-bkt", location="US-CENTRAL1")
    job = write_job(tmp_path, job_text(extra="region: europe-west4\n").replace("region: us-central1\n", ""))
    code, out, err = run("submit", str(job))
    assert code == 1 and out == "" and "Traceback" not in err
    assert err.splitlines() == [
        "error: preflight: staging bucket: gs://stage-bkt/s is in us-central1, the job runs in europe-west4: every "
        "replica would read across regions (slower, and charged as egress); use a bucket in europe-west4: "
        "`gcloud storage buckets create gs://stage-bkt --location=europe-west4`, then set staging_bucket to it "
        "(or run the job in us-central1)"
    ]
    assert gcs.object_names("stage-bkt") == [] and creates(emu) == [] and emu.jobs() == []


@pytest.mark.slow
def test_multi_region_bucket_is_a_warning_and_the_job_goes(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt", location="US")
    code, out, err = run("submit", str(write_job(tmp_path, job_text())))
    assert code == 0, err
    assert lines(err) == [
        "warn  staging bucket: gs://stage-bkt/s is in the multi-region location US; the job runs in us-central1: a "
        "bucket in us-central1 is faster and avoids cross-region charges (`gcloud storage buckets create "
        "gs://stage-bkt --location=us-central1`)"
    ]
    assert len(creates(emu)) == 1 and gcs.object_names("stage-bkt")


def test_missing_bucket_service_account_and_output_bucket_all_named(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    emu.set_service_accounts({})
    job = write_job(tmp_path, job_text(extra=f"service_account: {SA}\nbase_output_dir: gs://out-bkt/run\n"))
    code, out, err = run("submit", str(job))
    assert code == 1
    assert err.splitlines() == [
        "error: preflight: staging bucket: gs://stage-bkt/s: the bucket does not exist; create it in the job's "
        "region: `gcloud storage buckets create gs://stage-bkt --location=us-central1`",
        f"error: preflight: service account: {SA} does not exist; create it: `gcloud iam service-accounts create "
        "trainer --project test-project`",
        "error: preflight: output dir: gs://out-bkt/run: the bucket does not exist; create it in the job's region: "
        "`gcloud storage buckets create gs://out-bkt --location=us-central1`",
        "error: preflight: 3 of 6 checks failed; nothing was uploaded or created",
    ]
    assert creates(emu) == []


@pytest.mark.parametrize(
    ("accounts", "status", "fragment"),
    [
        ({SA: (ACT_AS,)}, "ok", f"{SA} exists and you may act as it ({ACT_AS})"),
        ({SA: ()}, "FAIL", f"you may not act as {SA} (no {ACT_AS})"),
        (None, "ok", "exists and you may act as it"),
    ],
)
def test_service_account_act_as(tmp_path: Path, emu: Emulator, gcs: Any, accounts: Any, status: str,
                                fragment: str) -> None:  # fmt: skip
    gcs.create_bucket("stage-bkt")
    gcs.create_bucket("out-bkt", location="EUROPE-WEST4")
    emu.set_service_accounts(accounts)
    job = write_job(tmp_path, job_text(extra=f"service_account: {SA}\nbase_output_dir: gs://out-bkt/run\n"))
    code, out, err = run("doctor", str(job))
    assert code == (0 if status == "ok" else 1), out + err
    checks = {line.split(":")[0][6:]: line for line in out.splitlines() if line[:4] in ("ok  ", "warn", "FAIL", "skip")}
    assert list(checks) == ["credentials", "vertex ai", "staging bucket", "service account", "output dir", "quota"]
    assert checks["service account"].startswith(status) and fragment in checks["service account"]
    assert checks["credentials"] == f"ok    credentials: none needed: {emu.url} is an emulator"
    assert checks["staging bucket"] == (
        "ok    staging bucket: gs://stage-bkt/s is writable and in us-central1, as the job"
    )
    assert checks["output dir"].startswith("warn  output dir: gs://out-bkt/run is in europe-west4, the job runs in")
    tested = [r for r in emu.requests if r["path"].endswith(":testIamPermissions")]
    assert tested and tested[-1]["body"] == {"permissions": [ACT_AS]}
    assert creates(emu) == []


def test_doctor_without_a_job_and_without_a_project(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run("doctor")
    assert code == 0, err
    assert f"project   {PROJECT}" in out and out.splitlines()[-1] == "all checks passed"
    code, out, _ = run("doctor", "-o", "json")
    data = json.loads(out)
    assert data["ok"] and [c["check"] for c in data["checks"]] == ["credentials", "vertex ai"]
    monkeypatch.delenv("VTRAIN_PROJECT")
    code, out, _ = run("doctor", "--region", "us-central1")
    assert code == 1 and "FAIL  project: no Google Cloud project set: pass --project" in out
    # Each setting under its own name (a bad region was reported as "project").
    code, out, _ = run("doctor", "--project", PROJECT, "--region", "us-central\u0661")
    assert code == 1 and "FAIL  region: region 'us-central\u0661' (from --region) is not a Vertex AI region" in out
    assert "skip  vertex ai: needs a region" in out and "project:" not in out
    code, out, _ = run("doctor", "--project", PROJECT, "--api-endpoint", "ftp://nowhere")
    assert code == 1 and "FAIL  endpoint: " in out, out


def test_doctor_without_credentials_says_how_to_get_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    code, out, _ = run("doctor", "--project", "some-project", "--region", "us-central1")
    assert code == 1
    assert "FAIL  credentials: none found" in out and "gcloud auth application-default login" in out
    assert "skip  vertex ai: needs credentials" in out


def test_denied_project_fails_at_vertex(emu: Emulator) -> None:
    code, out, _ = run("doctor", "--project", "denied-project")
    assert code == 1 and "FAIL  vertex ai: cannot list jobs: permission aiplatform.customJobs.list denied" in out


MODEL = "base_output_dir: gs://stage-bkt/out\nmodel: {{display_name: churn, serving_image: tf2-cpu.2-15{parent}}}\n"


def _upload_model(emu: Emulator, gcs: Any, model_id: str) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import ModelServiceClient

    gcs.client().bucket("stage-bkt").blob("old/model/saved_model.pb").upload_from_string(b"x")
    client = ModelServiceClient(transport="rest", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": emu.url})
    client.upload_model(request={"parent": f"projects/{PROJECT}/locations/us-central1", "model_id": model_id,
                                 "model": {"display_name": "churn", "artifact_uri": "gs://stage-bkt/old/model/",
                                           "container_spec": {"image_uri": "us-docker.pkg.dev/vertex-ai/prediction/"
                                                                           "tf2-cpu.2-15:latest"}}}).result(30)


@pytest.mark.parametrize("parent", ["churn_model", f"projects/{PROJECT}/locations/us-central1/models/churn_model"])
def test_a_parent_model_that_does_not_exist_fails_preflight_before_anything(tmp_path: Path, emu: Emulator, gcs: Any,
                                                                            parent: str) -> None:  # fmt: skip
    """Issue 46 class 11: the job ran, SUCCEEDED, and only then did `submit --wait` find the parent missing."""
    gcs.create_bucket("stage-bkt")
    job = write_job(tmp_path, job_text(extra=MODEL.format(parent=f", parent: '{parent}'")))
    name = f"projects/{PROJECT}/locations/us-central1/models/churn_model"
    code, out, err = run("submit", str(job), "--wait")
    assert code == 1 and out == "", err
    assert err.splitlines() == [
        f"error: preflight: model parent: {name} does not exist, so the job's model could not become a version of it "
        "after the job succeeds: name a model that exists in us-central1 (`gcloud ai models list "
        "--region=us-central1`), or leave model.parent out and the first upload creates the model"]
    assert gcs.object_names("stage-bkt") == [] and creates(emu) == []  # nothing staged, nothing created
    code, out, _ = run("doctor", str(job))
    assert code == 1 and f"FAIL  model parent: {name} does not exist" in out, out
    _upload_model(emu, gcs, "churn_model")
    code, out, _ = run("doctor", str(job))
    assert code == 0 and f"ok    model parent: {name} exists; the job's model becomes its next version" in out, out
    emu.deny_permissions("aiplatform.models.get")
    code, out, _ = run("doctor", str(job))
    assert code == 1 and "FAIL  model parent: cannot read the parent model " in out
    assert "permission aiplatform.models.get denied" in out


def test_no_parent_no_model_check(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt")
    job = write_job(tmp_path, job_text(extra=MODEL.format(parent="")))
    code, out, _ = run("doctor", str(job))
    assert code == 0 and "model parent" not in out, out
    assert not [r for r in emu.requests if "/models" in r["path"]]  # no Model Registry call at all


@pytest.mark.slow
def test_dry_run_preflight_prints_the_checks_and_the_plan(tmp_path: Path, emu: Emulator, gcs: Any) -> None:
    gcs.create_bucket("stage-bkt")
    job = write_job(tmp_path, job_text())
    code, out, err = run("submit", str(job), "--dry-run", "--preflight")
    assert code == 0, err
    assert [line.split()[0] for line in lines(err)] == ["ok"] * 4 + ["skip", "ok"]
    assert out.startswith("Dry run: nothing is uploaded")
    code, out, _ = run("submit", str(job), "--dry-run", "--preflight", "-o", "json", "--set", "region=europe-west4")
    assert code == 1 and json.loads(out)["preflight"]["ok"] is False
    assert gcs.object_names("stage-bkt") == [] and creates(emu) == []
    code, _, err = run("submit", str(job), "--dry-run")  # without --preflight: no credentials, no calls
    assert code == 0 and lines(err) == []


@pytest.mark.cloud
@pytest.mark.skipif(not (CLOUD and CLOUD_PROJECT), reason="set VTRAIN_CLOUD_TESTS=1 and VTRAIN_CLOUD_PROJECT")
def test_cloud_doctor_reaches_vertex() -> None:
    code, out, _ = run("doctor", "--project", str(CLOUD_PROJECT), "--region", CLOUD_REGION)
    assert "ok    credentials: " in out and "ok    vertex ai: " in out
