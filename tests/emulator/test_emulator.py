"""The Vertex AI JobService emulator, driven by the real aiplatform_v1 REST client and raw HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1 as v1
from google.protobuf import empty_pb2

from tests.helpers import MakeEmulator
from vtrain.emulator import Emulator, GatedRunner, RunContext, RunResult, load_runner, sleep_runner
from vtrain.emulator.filters import compile_filter
from vtrain.errors import BackendError

pytest_plugins = ["vtrain.emulator.testing"]

ROOT = Path(__file__).resolve().parents[2]
PARENT = "projects/test-project/locations/us-central1"
NAMED = f"projects/{Emulator.project_number()}/locations/us-central1"  # what answers name: the project number


def make_job(name: str = "train", labels: dict[str, str] | None = None, pools: int = 1) -> v1.CustomJob:
    chief = v1.WorkerPoolSpec(
        machine_spec=v1.MachineSpec(
            machine_type="n1-standard-8", accelerator_type="NVIDIA_TESLA_T4", accelerator_count=1
        ),
        replica_count=1,
        disk_spec=v1.DiskSpec(boot_disk_type="pd-ssd", boot_disk_size_gb=100),
        python_package_spec=v1.PythonPackageSpec(
            executor_image_uri="us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest",
            package_uris=["gs://bucket/trainer-0.1.tar.gz"],
            python_module="trainer.task",
            args=["--epochs", "3"],
            env=[v1.EnvVar(name="A", value="1")],
        ),
    )
    worker = v1.WorkerPoolSpec(
        machine_spec=v1.MachineSpec(machine_type="n1-standard-8"),
        replica_count=3,
        container_spec=v1.ContainerSpec(image_uri="gcr.io/p/img:1"),
    )
    specs = [chief] + [worker] * (pools - 1)
    return v1.CustomJob(
        display_name=name,
        labels=labels or {},
        job_spec=v1.CustomJobSpec(
            worker_pool_specs=specs,
            scheduling=v1.Scheduling(timeout={"seconds": 3600}, strategy=v1.Scheduling.Strategy.SPOT),
            base_output_directory=v1.GcsDestination(output_uri_prefix="gs://bucket/out"),
        ),
    )


def wait_state(client: Any, name: str, state: str, timeout: float = 5.0) -> v1.CustomJob:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get_custom_job(name=name)
        if job.state.name == state or time.monotonic() > deadline:
            assert job.state.name == state
            return job
        time.sleep(0.02)


def rest_job(**overrides: Any) -> dict[str, Any]:
    """A valid REST body; `overrides` replace top-level keys (None removes one)."""
    body: dict[str, Any] = {
        "displayName": "raw",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "gcr.io/p/i"},
                }
            ]
        },
    }
    for key, value in overrides.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def post(emu: Emulator, body: Any, parent: str = PARENT) -> requests.Response:
    return requests.post(f"{emu.url}/v1/{parent}/customJobs", json=body, timeout=10)


# ---- create / get / lifecycle --------------------------------------------------------
@pytest.fixture
def gate() -> GatedRunner:
    return GatedRunner()


@pytest.fixture
def gated(make_emulator: MakeEmulator, gate: GatedRunner) -> Emulator:
    """An emulator whose jobs stay RUNNING until the test releases them."""
    return make_emulator(gate, pending_seconds=0, cancel_seconds=0)


def test_create_get_and_lifecycle(gated: Emulator, gate: GatedRunner) -> None:
    client = gated.client()
    sent = make_job(labels={"team": "ml"}, pools=2)
    created = client.create_custom_job(parent=PARENT, custom_job=sent)
    assert created.name.startswith(NAMED + "/customJobs/")
    job_id = created.name.rsplit("/", 1)[1]
    assert job_id.isdigit() and len(job_id) == 19
    assert created.state == v1.JobState.JOB_STATE_PENDING
    assert created.create_time and created.job_spec == sent.job_spec and created.labels == sent.labels
    running = wait_state(client, created.name, "JOB_STATE_RUNNING")
    assert running.start_time >= running.create_time and not running.end_time
    gate.release()
    done = wait_state(client, created.name, "JOB_STATE_SUCCEEDED")
    assert done.end_time >= done.start_time and not done.error.message
    assert [j.name for j in gated.jobs()] == [created.name]


def test_wire_encoding_follows_the_client(vertex_emulator: Emulator, vertex_client: Any) -> None:
    created = vertex_client.create_custom_job(parent=PARENT, custom_job=make_job())
    request = vertex_emulator.requests[0]
    assert request["query"] == {"$alt": "json;enum-encoding=int"}
    pool = request["body"]["jobSpec"]["workerPoolSpecs"][0]
    assert pool["machineSpec"]["acceleratorType"] == v1.AcceleratorType.NVIDIA_TESLA_T4.value
    assert pool["replicaCount"] == "1"  # int64 as a string, as proto3 JSON says
    with_ints = requests.get(
        f"{vertex_emulator.url}/v1/{created.name}", params={"$alt": "json;enum-encoding=int"}, timeout=10
    ).json()
    assert (
        isinstance(with_ints["state"], int)
        and with_ints["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] == "1"
    )
    plain = requests.get(f"{vertex_emulator.url}/v1/{created.name}", timeout=10).json()
    assert plain["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_T4"
    assert plain["jobSpec"]["scheduling"] == {"timeout": "3600s", "strategy": "SPOT"}


def test_output_only_fields_in_the_body_are_ignored(vertex_emulator: Emulator) -> None:
    answer = post(
        vertex_emulator, rest_job(name="projects/x/locations/y/customJobs/1", state="JOB_STATE_FAILED")
    )
    assert answer.status_code == 200
    assert answer.json()["state"] == "JOB_STATE_PENDING" and answer.json()["name"].startswith(NAMED)


# ---- rejected requests -----------------------------------------------------------------
def test_unknown_field_is_invalid_argument(vertex_emulator: Emulator) -> None:
    body = rest_job()
    body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machinType"] = "x"
    answer = post(vertex_emulator, body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == (
        'Invalid JSON payload received. Unknown name "machinType" at '
        "'custom_job.job_spec.worker_pool_specs[0].machine_spec': Cannot find field."
    )
    assert vertex_emulator.jobs() == []


def test_an_unknown_field_in_a_tuning_job_is_named_by_its_path_too() -> None:
    from vtrain.emulator.errors import ApiError
    from vtrain.emulator.tuning import parse_tuning_job

    with pytest.raises(ApiError, match=r"Unknown name \"machinSpec\" at "
                       r"'hyperparameter_tuning_job\.trial_job_spec\.worker_pool_specs\[0\]': Cannot find field"):
        parse_tuning_job(b'{"trialJobSpec": {"workerPoolSpecs": [{"machinSpec": {}}]}}')


POOL = {
    "machineSpec": {"machineType": "n1-standard-4"},
    "replicaCount": "1",
    "containerSpec": {"imageUri": "i"},
}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (rest_job(displayName=None), "display_name"),
        (rest_job(jobSpec={}), "job_spec.worker_pool_specs"),
        (rest_job(jobSpec={"workerPoolSpecs": [POOL] * 5}), "job_spec.worker_pool_specs"),
        (
            rest_job(jobSpec={"workerPoolSpecs": [{**POOL, "replicaCount": "2"}]}),
            "job_spec.worker_pool_specs[0].replica_count",
        ),
        (rest_job(jobSpec={"workerPoolSpecs": [{}, POOL]}), "job_spec.worker_pool_specs[0]"),
        (
            rest_job(jobSpec={"workerPoolSpecs": [{**POOL, "machineSpec": {}}]}),
            "job_spec.worker_pool_specs[0].machine_spec.machine_type",
        ),
        (
            rest_job(jobSpec={"workerPoolSpecs": [POOL, {**POOL, "replicaCount": "0"}]}),
            "job_spec.worker_pool_specs[1].replica_count",
        ),
        (
            rest_job(
                jobSpec={
                    "workerPoolSpecs": [
                        {
                            **POOL,
                            "machineSpec": {
                                "machineType": "a2-highgpu-1g",
                                "acceleratorType": "NVIDIA_TESLA_A100",
                            },
                        }
                    ]
                }
            ),
            "job_spec.worker_pool_specs[0].machine_spec.accelerator_type",  # as Vertex names it
        ),
        (
            rest_job(jobSpec={"workerPoolSpecs": [{**POOL, "containerSpec": {}}]}),
            "job_spec.worker_pool_specs[0].container_spec.image_uri",
        ),
        (
            rest_job(
                jobSpec={
                    "workerPoolSpecs": [
                        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}
                    ]
                }
            ),
            "job_spec.worker_pool_specs[0]",
        ),
        (
            rest_job(
                jobSpec={
                    "workerPoolSpecs": [
                        {
                            "machineSpec": {"machineType": "n1-standard-4"},
                            "replicaCount": "1",
                            "pythonPackageSpec": {"executorImageUri": "i", "packageUris": ["gs://b/p.tgz"]},
                        }
                    ]
                }
            ),
            "job_spec.worker_pool_specs[0].python_package_spec.python_module",
        ),
        (rest_job(labels={"Team": "x"}), "labels.Team"),
        (
            rest_job(
                jobSpec={
                    "workerPoolSpecs": [
                        {**POOL, "machineSpec": {"machineType": "x", "acceleratorType": "BOGUS"}}
                    ]
                }
            ),
            None,
        ),
    ],
    ids=[
        "no-display-name",
        "no-pools",
        "five-pools",
        "chief-replicas",
        "empty-chief",
        "no-machine-type",
        "zero-workers",
        "accelerator-without-count",
        "no-image",
        "no-task",
        "no-python-module",
        "bad-label",
        "bad-enum",
    ],
)
def test_invalid_jobs_are_rejected(
    vertex_emulator: Emulator, body: dict[str, Any], field: str | None
) -> None:
    answer = post(vertex_emulator, body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    if field is not None:
        hardware = ".machine_spec.accelerator" in field  # worded as Vertex words it, without the field
        assert error["message"].startswith("Both `accelerator_type`" if hardware else field + ": ")
        assert error["details"][0]["fieldViolations"][0]["field"] == field


def test_empty_middle_pool_is_accepted(vertex_emulator: Emulator) -> None:
    answer = post(
        vertex_emulator, rest_job(jobSpec={"workerPoolSpecs": [POOL, {}, {}, {**POOL, "replicaCount": "1"}]})
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["jobSpec"]["workerPoolSpecs"][1] == {}


@pytest.mark.parametrize(
    "parent", ["projects/Bad_Project/locations/us-central1", "projects/test-project/locations/uscentral"]
)
def test_malformed_parent_is_rejected(vertex_emulator: Emulator, vertex_client: Any, parent: str) -> None:
    with pytest.raises(gexc.BadRequest, match="Invalid resource field value"):
        vertex_client.create_custom_job(parent=parent, custom_job=make_job())


def test_unknown_route_and_missing_job_are_404(vertex_emulator: Emulator, vertex_client: Any) -> None:
    answer = requests.get(f"{vertex_emulator.url}/v1/{PARENT}/trainingPipelines", timeout=10)
    assert answer.status_code == 404 and answer.json()["error"]["status"] == "NOT_FOUND"
    with pytest.raises(gexc.NotFound, match="does not exist"):
        vertex_client.get_custom_job(name=f"{PARENT}/customJobs/123")


def test_denied_and_quota_projects(vertex_emulator: Emulator, vertex_client: Any) -> None:
    with pytest.raises(gexc.Forbidden) as denied:
        vertex_client.list_custom_jobs(parent="projects/denied-project/locations/us-central1")
    assert denied.value.reason == "IAM_PERMISSION_DENIED"
    assert denied.value.metadata["permission"] == "aiplatform.customJobs.list"
    with pytest.raises(gexc.TooManyRequests, match="exceed quota limits"):
        vertex_client.create_custom_job(
            parent="projects/quota-project/locations/us-central1", custom_job=make_job()
        )


# ---- cancel / delete -------------------------------------------------------------------
def test_cancel_then_delete(gated: Emulator, gate: GatedRunner) -> None:
    client = gated.client()
    created = client.create_custom_job(parent=PARENT, custom_job=make_job())
    assert gate.started.wait(5)
    with pytest.raises(gexc.BadRequest, match="cannot be deleted"):
        client.delete_custom_job(name=created.name)
    client.cancel_custom_job(name=created.name)
    client.cancel_custom_job(name=created.name)  # cancelling twice is harmless
    assert client.get_custom_job(name=created.name).state.name == "JOB_STATE_CANCELLING"
    gate.release()  # the job stops only now, as a slow real one would
    done = wait_state(client, created.name, "JOB_STATE_CANCELLED")
    assert done.error.code == 1 and done.error.message == "CANCELED"
    with pytest.raises(gexc.BadRequest, match="Cannot cancel"):
        client.cancel_custom_job(name=created.name)
    operation = client.delete_custom_job(name=created.name)
    assert operation.done() and operation.result(timeout=5) == empty_pb2.Empty()
    with pytest.raises(gexc.NotFound):
        client.get_custom_job(name=created.name)


def test_cancel_while_pending() -> None:
    with Emulator(pending_seconds=60, cancel_seconds=0) as emu:
        client = emu.client()
        created = client.create_custom_job(parent=PARENT, custom_job=make_job())
        client.cancel_custom_job(name=created.name)
        done = wait_state(client, created.name, "JOB_STATE_CANCELLED")
    assert not done.start_time and done.end_time


# ---- list --------------------------------------------------------------------------------
def test_list_filters_and_pages(vertex_emulator: Emulator, vertex_client: Any) -> None:
    names = [
        vertex_client.create_custom_job(
            parent=PARENT, custom_job=make_job(f"job-{i}", {"team": "a" if i % 2 else "b"})
        ).name
        for i in range(5)
    ]
    vertex_client.create_custom_job(
        parent="projects/other-project/locations/us-central1", custom_job=make_job()
    )
    vertex_client.cancel_custom_job(name=names[0])
    wait_state(vertex_client, names[0], "JOB_STATE_CANCELLED")

    def listed(filter: str = "", page_size: int = 0) -> list[str]:
        request = v1.ListCustomJobsRequest(parent=PARENT, filter=filter, page_size=page_size)
        return [j.name for j in vertex_client.list_custom_jobs(request=request)]

    assert listed() == names[::-1]  # newest first, other project excluded
    assert listed(page_size=2) == names[::-1]
    assert len([r for r in vertex_emulator.requests if r["query"].get("pageSize") == "2"]) == 3
    assert listed('state="JOB_STATE_CANCELLED"') == [names[0]]
    assert listed("state!=JOB_STATE_CANCELLED AND labels.team=a") == [names[3], names[1]]
    assert listed('display_name="job-2"') == [names[2]]
    assert listed('display_name:"job-*" AND NOT labels.team="a"') == [names[4], names[2], names[0]]
    assert listed("labels.team:* AND labels.other:*") == []
    past = "2000-01-01T00:00:00Z"
    assert len(listed(f'create_time>"{past}"')) == 5
    for bad in [
        'state="RUNNING"',
        'update_time>"2000-01-01T00:00:00Z"',  # undocumented for ListCustomJobs: only create_time
        "foo=bar",
    ]:
        with pytest.raises(gexc.BadRequest):
            listed(bad)


def test_filter_unit() -> None:
    job = v1.CustomJob.pb(v1.CustomJob(display_name='say "hi"', labels={"k": "v"}, state="JOB_STATE_RUNNING"))
    assert compile_filter(r'display_name="say \"hi\"" AND labels:k AND -labels.k=w')(job)
    assert not compile_filter("state=JOB_STATE_PENDING")(job)
    assert not compile_filter('create_time<"2100-01-01T00:00:00Z"')(job)  # unset time never matches


# ---- fault injection ---------------------------------------------------------------------
def test_fail_next_answers_unavailable_then_recovers(vertex_emulator: Emulator, vertex_client: Any) -> None:
    vertex_emulator.fail_next(2)
    for _ in range(2):
        answer = requests.get(f"{vertex_emulator.url}/v1/{PARENT}/customJobs", timeout=10)
        assert answer.status_code == 503
        assert answer.json() == {
            "error": {
                "code": 503,
                "message": "The service is currently unavailable.",
                "status": "UNAVAILABLE",
            }
        }
    assert list(vertex_client.list_custom_jobs(parent=PARENT)) == []


def test_fail_after_processing_and_reset(vertex_emulator: Emulator, vertex_client: Any) -> None:
    vertex_emulator.fail_next(1, code=500, mode="after")
    with pytest.raises(gexc.InternalServerError):
        vertex_client.create_custom_job(parent=PARENT, custom_job=make_job())
    assert len(vertex_emulator.jobs()) == 1  # done, answer lost
    vertex_emulator.fail_next(1, mode="reset")
    with pytest.raises(requests.exceptions.ConnectionError):
        vertex_client.list_custom_jobs(parent=PARENT)
    with pytest.raises(ValueError):
        vertex_emulator.fail_next(1, code=404)


# ---- runners -------------------------------------------------------------------------------
def test_custom_runner_sees_the_job_logs_and_fails_it() -> None:
    seen: list[v1.CustomJob] = []

    def runner(job: v1.CustomJob, ctx: RunContext) -> RunResult:
        seen.append(job)
        ctx.log("loss=0.5", task="workerpool1-2")
        return RunResult("JOB_STATE_FAILED", "replica workerpool1-2 exited with 1")

    with Emulator(runner=runner, pending_seconds=0) as emu:
        client = emu.client()
        created = client.create_custom_job(parent=PARENT, custom_job=make_job(pools=2))
        done = wait_state(client, created.name, "JOB_STATE_FAILED")
        job_id = created.name.rsplit("/", 1)[1]
        logs = requests.post(
            f"{emu.url}/v2/entries:list",
            timeout=10,
            json={
                "resourceNames": ["projects/test-project"],
                "filter": f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"',
            },
        ).json()
    assert done.error.message == "replica workerpool1-2 exited with 1"
    assert seen[0].name == created.name and seen[0].job_spec.worker_pool_specs[1].replica_count == 3
    [entry] = logs["entries"]
    assert entry["resource"]["labels"]["task_name"] == "workerpool1-2"
    assert entry["jsonPayload"] == {"message": "loss=0.5"}


def test_runner_errors_fail_the_job_and_cancel_reaches_the_runner() -> None:
    started = threading.Event()

    def runner(job: v1.CustomJob, ctx: RunContext) -> RunResult:
        if job.display_name == "crash":
            raise RuntimeError("boom")
        started.set()
        ctx.cancelled.wait(10)
        return RunResult()

    with Emulator(runner=runner, pending_seconds=0, cancel_seconds=0) as emu:
        client = emu.client()
        crash = client.create_custom_job(parent=PARENT, custom_job=make_job("crash"))
        assert (
            wait_state(client, crash.name, "JOB_STATE_FAILED").error.message
            == "job runner raised RuntimeError: boom"
        )
        slow = client.create_custom_job(parent=PARENT, custom_job=make_job("slow"))
        assert started.wait(5)
        client.cancel_custom_job(name=slow.name)
        wait_state(client, slow.name, "JOB_STATE_CANCELLED")


def test_stop_ends_live_jobs_promptly() -> None:
    emu = Emulator(runner=sleep_runner(60), pending_seconds=0).start()
    emu.client().create_custom_job(parent=PARENT, custom_job=make_job())
    started = time.monotonic()
    emu.stop()
    assert time.monotonic() - started < 3
    assert not [t for t in threading.enumerate() if t.name.startswith("job-")]


def test_load_runner() -> None:
    assert load_runner("vtrain.emulator.runner:sleep_runner") is sleep_runner
    for bad, why in [
        ("nocolon", "MODULE:ATTRIBUTE"),
        ("vtrain.nope:x", "cannot import"),
        ("vtrain.emulator:nope", "no callable"),
    ]:
        with pytest.raises(BackendError, match=why):
            load_runner(bad)


# ---- the command -------------------------------------------------------------------------
def test_command_run_jobs_without_local_runner_is_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import vtrain.emulator
    from vtrain.cli import cli

    monkeypatch.setattr(vtrain.emulator, "LOCAL_RUNNER", "vtrain.handle.missing:emulator_runner")
    result = CliRunner().invoke(cli, ["emulator", "--port", "0", "--run-jobs"])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert result.output.startswith(
        "error: --run-jobs needs the local runner vtrain.handle.missing:emulator_runner"
    )


def test_command_port_in_use_is_one_line_error() -> None:
    from vtrain.cli import cli

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(cli, ["emulator", "--port", str(port)])
    assert result.exit_code == 1
    assert result.output == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


@pytest.mark.alone
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_command_serves_the_real_client_and_stops_on_signal(sig: signal.Signals) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "VTRAIN_"))}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vtrain",
            "emulator",
            "--port",
            "0",
            "--fail-next",
            "1",
            "--pending-seconds",
            "0",
            "--run-seconds",
            "0.1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        client = v1.JobServiceClient(
            transport="rest", client_options={"api_endpoint": url}, credentials=AnonymousCredentials()
        )
        with pytest.raises(gexc.ServiceUnavailable):
            client.create_custom_job(parent=PARENT, custom_job=make_job())
        created = client.create_custom_job(parent=PARENT, custom_job=make_job())
        wait_state(client, created.name, "JOB_STATE_SUCCEEDED")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert err.rstrip().endswith("emulator stopped")
    assert "POST /v1/projects/test-project/locations/us-central1/customJobs" in err
