"""VertexBackend and VertexJob against the emulator, through the real aiplatform_v1 REST client."""

from __future__ import annotations

from typing import Any

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1 as v1

from vtrain.cloud.target import resolve_project, resolve_region
from vtrain.cloud.vertex import SUBMIT_LABEL, VertexBackend, VertexJob
from vtrain.cloud.vertex.retry import RetryPolicy
from vtrain.emulator import Emulator, GatedRunner, RunContext, RunResult, sleep_runner
from vtrain.errors import BackendError, CreateOutcomeUnknown, JobFailed
from vtrain.handle import EXIT_CODES, WaitTimeout, exit_code, raise_for_state

FAST_RETRY = RetryPolicy(attempts=4, initial=0.01, maximum=0.02)
POLL = 0.02


def _runner(job: v1.CustomJob, ctx: RunContext) -> RunResult:
    """Succeeds after 0.3 s, fails when asked to by its display name, honours cancel."""
    ctx.log(f"start {job.display_name}")
    ctx.log("replica 1 up", task="workerpool1-0")
    if ctx.sleep(0.3):
        return RunResult("JOB_STATE_CANCELLED")
    if job.display_name.startswith("fail"):
        return RunResult("JOB_STATE_FAILED", "workerpool1-0 exited with status 3")
    ctx.log("done")
    return RunResult()


pytestmark = pytest.mark.emulator(runner=_runner)


def backend_for(
    emu: Emulator, project: str = "test-project", retry: RetryPolicy = FAST_RETRY
) -> VertexBackend:
    return VertexBackend(
        emu.client(),
        project,
        "us-central1",
        retry=retry,
        credentials=AnonymousCredentials(),
        logging_endpoint=emu.url,
    )


@pytest.fixture
def backend(emu: Emulator) -> VertexBackend:
    return backend_for(emu)


def make_job(name: str = "train", labels: dict[str, str] | None = None) -> v1.CustomJob:
    pool = v1.WorkerPoolSpec(
        machine_spec=v1.MachineSpec(machine_type="n1-standard-4"),
        replica_count=1,
        container_spec=v1.ContainerSpec(image_uri="gcr.io/p/trainer:1"),
    )
    return v1.CustomJob(
        display_name=name, labels=labels or {}, job_spec=v1.CustomJobSpec(worker_pool_specs=[pool])
    )


# ---- create / get / wait -------------------------------------------------------------
def test_create_get_wait_succeeded(emu: Emulator, backend: VertexBackend) -> None:
    sent = make_job(labels={"team": "ml"})
    job = backend.create(sent)
    assert isinstance(job, VertexJob) and job.state == "JOB_STATE_PENDING"
    number = Emulator.project_number("test-project")  # Vertex names projects by number in what it returns
    assert job.name == f"projects/{number}/locations/us-central1/customJobs/{job.job_id}"
    assert SUBMIT_LABEL not in sent.labels  # the caller's job is untouched
    assert job.proto.labels["team"] == "ml" and len(job.proto.labels[SUBMIT_LABEL]) == 32
    assert job.wait(poll=POLL) == "JOB_STATE_SUCCEEDED"
    assert (
        job.done
        and job.exit_code == 0
        and job.error is None
        and job.result(poll=POLL) == "JOB_STATE_SUCCEEDED"
    )
    for ref in (job.job_id, job.name, f"  {job.job_id} "):
        again = backend.get(ref)
        assert again.name == job.name and again.state == "JOB_STATE_SUCCEEDED"
    assert job.console_url.endswith(f"/locations/us-central1/training/{job.job_id}/cpu?project=test-project")
    assert repr(job) == f"VertexJob('{job.name}', state=JOB_STATE_SUCCEEDED)"


def test_failed_job_maps_to_exit_code_and_jobfailed(backend: VertexBackend) -> None:
    job = backend.create(make_job("fail-me"))
    assert job.wait(poll=POLL) == "JOB_STATE_FAILED"
    assert job.error == "workerpool1-0 exited with status 3" and job.exit_code == 10
    with pytest.raises(JobFailed) as failed:
        job.result(poll=POLL)
    assert failed.value.exit_code == 10 and failed.value.state == "JOB_STATE_FAILED"
    assert str(failed.value) == f"job {job.name} ended JOB_STATE_FAILED: workerpool1-0 exited with status 3"


def test_wait_timeout_is_distinct() -> None:
    with Emulator(runner=GatedRunner(), pending_seconds=0) as emu:
        job = backend_for(emu).create(make_job())
        with pytest.raises(WaitTimeout) as timeout:
            job.wait(timeout=0.1, poll=POLL)
    assert timeout.value.exit_code == 12 and timeout.value.state in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING")
    assert str(timeout.value).startswith(f"job {job.name} is still JOB_STATE_")
    assert "keeps running" in str(timeout.value)


def test_exit_code_table() -> None:
    assert EXIT_CODES == {
        "JOB_STATE_SUCCEEDED": 0,
        "JOB_STATE_FAILED": 10,
        "JOB_STATE_CANCELLED": 11,
        "JOB_STATE_EXPIRED": 13,
        "JOB_STATE_PARTIALLY_SUCCEEDED": 14,
    }
    assert exit_code("JOB_STATE_RUNNING") == 12
    raise_for_state("j", "JOB_STATE_SUCCEEDED")
    with pytest.raises(JobFailed) as err:
        raise_for_state("j", "JOB_STATE_CANCELLED")
    assert err.value.exit_code == 11 and str(err.value) == "job j ended JOB_STATE_CANCELLED"


# ---- cancel / delete ---------------------------------------------------------------------
def test_cancel_reaches_cancelled() -> None:
    gate = GatedRunner()
    with Emulator(runner=gate, pending_seconds=0, cancel_seconds=0) as emu:
        backend = backend_for(emu)
        job = backend.create(make_job())
        assert gate.started.wait(5)
        cancelled = backend.cancel(job.job_id)
        assert cancelled.state == "JOB_STATE_CANCELLING" and not cancelled.done
        gate.release()
        assert cancelled.wait(poll=POLL) == "JOB_STATE_CANCELLED" and cancelled.exit_code == 11
        calls = len(emu.requests)
        job.cancel()  # already over: refreshed, nothing sent
        assert job.state == "JOB_STATE_CANCELLED" and [r["method"] for r in emu.requests[calls:]] == ["GET"]
        backend.delete(job)
        with pytest.raises(BackendError, match="not found"):
            backend.get(job.name)


def test_job_references(backend: VertexBackend) -> None:
    assert backend.job_name("42") == "projects/test-project/locations/us-central1/customJobs/42"
    assert backend.job_name("projects/123/locations/us-central1/customJobs/42").startswith("projects/123/")
    with pytest.raises(
        BackendError, match="in region europe-west4, not us-central1; pass --region europe-west4"
    ):
        backend.job_name("projects/p/locations/europe-west4/customJobs/42")
    with pytest.raises(BackendError, match="neither a job ID"):
        backend.get("my-job")


# ---- list ----------------------------------------------------------------------------------
def test_list_filters_limits_and_pages(emu: Emulator, backend: VertexBackend) -> None:
    jobs = [backend.create(make_job(f"job-{i}", {"team": "a" if i % 2 else "b"})) for i in range(5)]
    backend.cancel(jobs[0]).wait(poll=POLL)
    names = [j.name for j in jobs]
    assert [j.name for j in backend.list(limit=None)] == names[::-1]
    before = len(emu.requests)
    assert [j.name for j in backend.list(limit=3)] == names[:1:-1]
    assert [r["query"]["pageSize"] for r in emu.requests[before:]] == ["3"]
    assert [j.name for j in backend.list(state="cancelled")] == [names[0]]
    assert [j.name for j in backend.list(state="JOB_STATE_CANCELLED", filter="labels.team=b")] == [names[0]]
    assert [j.name for j in backend.list(filter='labels.team="a"')] == [names[3], names[1]]
    with pytest.raises(BackendError, match="unknown job state 'done'; use one of QUEUED, PENDING"):
        backend.list(state="done")
    with pytest.raises(BackendError, match="Vertex AI answered 400 INVALID_ARGUMENT: Invalid filter"):
        backend.list(filter='update_time>"2000-01-01T00:00:00Z"')  # undocumented for ListCustomJobs


def test_list_follows_page_tokens(
    emu: Emulator, backend: VertexBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vtrain.emulator.store as store

    monkeypatch.setattr(store, "DEFAULT_PAGE_SIZE", 2)
    monkeypatch.setattr(store, "MAX_PAGE_SIZE", 2)  # the server caps pages: the client must follow tokens
    for i in range(5):
        backend.create(make_job(f"job-{i}"))
    before = len(emu.requests)
    assert len(backend.list(limit=None)) == 5
    assert [bool(r["query"].get("pageToken")) for r in emu.requests[before:]] == [False, True, True]


# ---- retries -------------------------------------------------------------------------------
def test_transient_errors_are_retried(emu: Emulator, backend: VertexBackend) -> None:
    emu.fail_next(3)  # the create, then the two look-ups for a job it may have created
    job = backend.create(make_job())
    assert len(emu.jobs()) == 1
    assert [r["method"] for r in emu.requests] == ["POST", "GET", "GET", "GET", "POST"]
    emu.fail_next(2, code=429)
    emu.fail_next(1, mode="reset")
    assert backend.get(job.job_id).name == job.name
    emu.fail_next(2, code=504)
    assert job.wait(poll=POLL) == "JOB_STATE_SUCCEEDED"


def test_too_many_transient_errors_is_one_line(emu: Emulator, backend: VertexBackend) -> None:
    emu.fail_next(10)
    with pytest.raises(BackendError) as err:
        backend.list()
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(
        "cannot list jobs: Vertex AI kept failing (503 UNAVAILABLE: The service is currently "
        "unavailable.) after 4 attempts over "
    )
    assert message.endswith(" s; try again later")
    assert len(emu.requests) == 4


def test_a_create_that_kept_failing_may_have_made_the_job(emu: Emulator, backend: VertexBackend) -> None:
    emu.fail_next(10)  # a 5xx may come after the work: the client cannot tell
    with pytest.raises(CreateOutcomeUnknown) as err:
        backend.create(make_job("stubborn"))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(
        "cannot create job 'stubborn': Vertex AI kept failing (503 UNAVAILABLE: The service is currently "
        "unavailable.) after 4 attempts over "
    )
    assert message.endswith(
        " s, after a create that may have reached Vertex AI: the job may exist (vtrain could not look for it); "
        f"find it with `vtrain list --label vtrain-submit-id={err.value.submit_id} --project test-project "
        "--region us-central1`"
    )
    assert emu.jobs() == [] and [r["method"] for r in emu.requests] == ["POST", "GET", "GET", "GET", "GET"]


@pytest.mark.parametrize("mode", ["after", "reset-after"])
def test_ambiguous_create_failure_never_creates_twice(
    emu: Emulator, backend: VertexBackend, mode: str
) -> None:
    if mode == "after":
        emu.fail_next(1, code=500, mode="after")  # the job is created, the answer is lost
    else:
        emu.fail_next(1, code=503, mode="after")
        emu.fail_next(1, mode="reset")  # and the look-up fails too, once
    job = backend.create(make_job())
    assert [j.name for j in emu.jobs()] == [job.name]
    assert [r["method"] for r in emu.requests].count("POST") == 1


def test_ambiguous_failure_before_work_creates_once(emu: Emulator, backend: VertexBackend) -> None:
    emu.fail_next(1, code=500, mode="before")
    job = backend.create(make_job())
    assert [j.name for j in emu.jobs()] == [job.name]
    assert [r["method"] for r in emu.requests] == ["POST", "GET", "POST"]


# ---- refusals ------------------------------------------------------------------------------
def test_permission_denied_is_one_line(emu: Emulator) -> None:
    backend = backend_for(emu, project="denied-project")
    with pytest.raises(BackendError) as err:
        backend.create(make_job("x"))
    assert str(err.value) == (
        "cannot create job 'x': permission aiplatform.customJobs.create denied on "
        "projects/denied-project/locations/us-central1 for the current credentials; grant them "
        "roles/aiplatform.user (or a role with aiplatform.customJobs.create) in project denied-project"
    )
    with pytest.raises(BackendError, match="permission aiplatform.customJobs.list denied"):
        backend.list()
    assert len(emu.requests) == 2  # not retried


def test_quota_is_explained_and_not_retried(emu: Emulator) -> None:
    backend = backend_for(emu, project="quota-project")
    with pytest.raises(BackendError) as err:
        backend.create(make_job("x"))
    assert str(err.value) == (
        "cannot create job 'x': quota aiplatform.googleapis.com/custom_model_training_cpus exceeded in "
        "project quota-project, region us-central1; request more at "
        "https://console.cloud.google.com/iam-admin/quotas?project=quota-project "
        "or use another region or machine"
    )
    assert len(emu.requests) == 1


def test_invalid_job_is_surfaced_cleanly(emu: Emulator, backend: VertexBackend) -> None:
    job = make_job("bad")
    job.job_spec.worker_pool_specs[0].replica_count = 2
    with pytest.raises(BackendError) as err:
        backend.create(job)
    assert str(err.value) == (
        "cannot create job 'bad': Vertex AI answered 400 INVALID_ARGUMENT: "
        "job_spec.worker_pool_specs[0].replica_count: The replica count of the first worker pool "
        "(the chief) must be 1, got 2."
    )


def test_missing_credentials_is_one_line(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(BackendError) as err:
        VertexBackend.from_endpoint("my-project", "us-central1")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("cannot connect to Vertex AI: no Google Cloud credentials found; run ")
    assert "gcloud auth application-default login" in message


def test_unreachable_endpoint_is_one_line() -> None:
    backend = VertexBackend.from_endpoint("p-project", "us-central1", "http://127.0.0.1:9", retry=FAST_RETRY)
    with pytest.raises(BackendError) as err:
        backend.list()
    assert str(err.value).startswith(
        "cannot list jobs: cannot reach http://127.0.0.1:9 (connection refused; 4 attempts over "
    )
    with pytest.raises(BackendError) as err:  # refused before sending: surely not created
        backend.create(make_job())
    assert not isinstance(err.value, CreateOutcomeUnknown)
    assert "cannot create job 'train': cannot reach http://127.0.0.1:9 (connection refused" in str(err.value)


def test_from_endpoint_talks_to_the_emulator_and_reads_logs(emu: Emulator) -> None:
    backend = VertexBackend.from_endpoint("test-project", "us-central1", emu.url, retry=FAST_RETRY)
    job = backend.create(make_job("logged"))
    assert job.wait(poll=POLL) == "JOB_STATE_SUCCEEDED"
    lines = list(job.logs())
    assert lines == ["[chief-0] start logged", "[worker-0] replica 1 up", "[chief-0] done"]
    stamped = list(job.logs(timestamps=True))
    assert [line.split(" ", 1)[1] for line in stamped] == lines
    assert stamped[0][:4].isdigit() and stamped[0].split(" ", 1)[0].endswith("Z")


def test_follow_logs_until_the_job_ends(emu: Emulator, backend: VertexBackend) -> None:
    job = backend.create(make_job("followed"))
    lines = list(job.logs(follow=True, poll=POLL))
    assert [line.split("] ", 1)[1] for line in lines] == ["start followed", "replica 1 up", "done"]
    assert job.state == "JOB_STATE_SUCCEEDED"


def test_logs_refusals_are_explained(emu: Emulator, backend: VertexBackend) -> None:
    job = backend.create(make_job())
    denied = VertexJob(backend_for(emu, project="denied-project"), job.proto)
    with pytest.raises(BackendError) as err:
        list(denied.logs())
    assert str(err.value) == (
        f"cannot read logs of job {job.job_id}: permission logging.logEntries.list denied on "
        "projects/denied-project for the current credentials; grant them roles/logging.viewer (or a role "
        "with logging.logEntries.list) in project denied-project"
    )
    backend.logging_endpoint = emu.url + "/nowhere"
    with pytest.raises(BackendError, match=rf"^cannot read logs of job {job.job_id}: .*not found"):
        list(job.logs())


# ---- project and region ---------------------------------------------------------------------
def no_gcloud(prop: str) -> str | None:
    return None


def test_project_precedence() -> None:
    env = {"VTRAIN_PROJECT": "env-project", "GOOGLE_CLOUD_PROJECT": "google-project"}
    assert resolve_project("flag-project", "file-project", env=env, gcloud=no_gcloud) == "flag-project"
    assert resolve_project(None, "file-project", env=env, gcloud=no_gcloud) == "file-project"
    assert resolve_project(env=env, gcloud=no_gcloud) == "env-project"
    assert (
        resolve_project(env={"GOOGLE_CLOUD_PROJECT": "google-project"}, gcloud=no_gcloud) == "google-project"
    )
    assert (
        resolve_project(env={}, gcloud=lambda prop: {"project": "gcloud-project"}[prop]) == "gcloud-project"
    )
    with pytest.raises(BackendError) as err:
        resolve_project(env={}, gcloud=no_gcloud)
    assert str(err.value) == (
        "no Google Cloud project set: pass --project, set `project:` in the job file, set VTRAIN_PROJECT "
        "(or GOOGLE_CLOUD_PROJECT), or run `gcloud config set project ID`"
    )
    with pytest.raises(
        BackendError, match=r"project 'My_Project' \(from VTRAIN_PROJECT\) is not a project ID"
    ):
        resolve_project(env={"VTRAIN_PROJECT": "My_Project"}, gcloud=no_gcloud)
    assert resolve_project(env={"VTRAIN_PROJECT": "123456789012"}, gcloud=no_gcloud) == "123456789012"


def test_region_precedence() -> None:
    assert resolve_region(env={}, gcloud=no_gcloud) == "us-central1"
    assert (
        resolve_region(env={}, gcloud=lambda prop: "europe-west4" if prop == "ai/region" else None)
        == "europe-west4"
    )
    assert resolve_region(env={"GOOGLE_CLOUD_REGION": "asia-east1"}, gcloud=no_gcloud) == "asia-east1"
    assert (
        resolve_region(None, "us-east1", env={"VTRAIN_REGION": "asia-east1"}, gcloud=no_gcloud) == "us-east1"
    )
    assert resolve_region("us-west1", "us-east1", env={}, gcloud=no_gcloud) == "us-west1"
    with pytest.raises(BackendError, match=r"region 'central' \(from --region\) is not a Vertex AI region"):
        resolve_region("central", env={}, gcloud=no_gcloud)


def test_gcloud_lookup_is_skipped_without_gcloud(monkeypatch: pytest.MonkeyPatch) -> None:
    from vtrain.cloud import target as settings

    monkeypatch.setenv("PATH", "/nonexistent")
    assert settings.gcloud_config_value("project") is None
    with pytest.raises(BackendError, match="no Google Cloud project set"):
        resolve_project(env={})


def test_default_runner_is_sleep_runner() -> None:
    with Emulator(runner=sleep_runner(0), pending_seconds=0) as emu:
        job = backend_for(emu).create(make_job())
        assert job.wait(poll=POLL) == "JOB_STATE_SUCCEEDED"


def test_refused_credentials_are_one_line(emu: Emulator) -> None:
    from google.oauth2.credentials import Credentials

    expired = Credentials(
        token=None,
        refresh_token="revoked",
        client_id="id",
        client_secret="secret",
        token_uri=f"{emu.url}/token",
    )
    backend = VertexBackend.from_endpoint("test-project", "us-central1", emu.url, credentials=expired)
    with pytest.raises(BackendError) as err:
        backend.list()
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("cannot list jobs: Google Cloud credentials were refused (")
    assert message.endswith(
        "; run `gcloud auth application-default login`, or set "
        "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file"
    )
