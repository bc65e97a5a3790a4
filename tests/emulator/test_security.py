"""Issue 20, class 1: a web page must not make `vtrain emulator --run-jobs` run code.

The class is "a request the browser lets a page send": cross-origin simple requests (text/plain,
form, multipart, no Content-Type: each carries `Origin`), fetch metadata (`Sec-Fetch-Site`), and
DNS rebinding (same-origin to the browser, but `Host` names the page's host). Each is refused
before the body is read, with a Google-style JSON error, and nothing is created; the real
clients (aiplatform_v1 REST, gcloud: see test_emulator.py and tests/commands) send none of them.
`--token` adds a path prefix all the real clients carry.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1 as v1

from tests.conftest import REPO
from tests.helpers import MakeEmulator
from vtrain.emulator import Emulator, GatedRunner, sleep_runner
from vtrain.emulator.guard import loopback_host

PARENT = "projects/test-project/locations/us-central1"
CREATE = f"/v1/{PARENT}/customJobs"
PROBE = REPO / "tests" / "data" / "trainers" / "probe"


def job_body(package: str = "file:///nowhere/trainer-0.1.tar.gz", args: list[str] | None = None) -> dict[str, Any]:
    return {"displayName": "evil", "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
        "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
                              "packageUris": [package], "pythonModule": "trainer.task", "args": args or []}}]}}


def as_job(body: dict[str, Any]) -> v1.CustomJob:
    return v1.CustomJob.from_json(json.dumps(body))


@pytest.fixture
def emu(make_emulator: MakeEmulator) -> Emulator:
    return make_emulator(GatedRunner(), pending_seconds=0, cancel_seconds=0.2)  # a runner per test

#: What a page can send: header sets a browser adds to a request it lets a page make.
BROWSER_REQUESTS = {
    "simple text/plain, cross-origin": {"Content-Type": "text/plain", "Origin": "https://evil.example"},
    "form post": {"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example"},
    "multipart": {"Content-Type": "multipart/form-data; boundary=x", "Origin": "null"},
    "blob without a type": {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
    "origin only, json": {"Content-Type": "application/json", "Origin": "http://127.0.0.1:9999"},
    "same-site fetch metadata": {"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
    "same-origin fetch metadata": {"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"},
    "dns rebinding": {"Content-Type": "application/json", "Host": "evil.example:8080"},
    "rebinding to a public ip": {"Content-Type": "application/json", "Host": "8.8.8.8"},
    "rebinding, a suffix": {"Content-Type": "application/json", "Host": "localhost.evil.example"},
    "text/plain, no origin (curl-like)": {"Content-Type": "text/plain"},
    "json lookalike": {"Content-Type": "application/json-patch+json"},
}


@pytest.mark.parametrize("headers", BROWSER_REQUESTS.values(), ids=list(BROWSER_REQUESTS))
def test_a_request_a_page_can_send_creates_nothing(emu: Emulator, headers: dict[str, str]) -> None:
    answer = requests.post(emu.url + CREATE, data=json.dumps(job_body()), headers=headers, timeout=10)
    assert answer.status_code in (400, 403), answer.text
    error = answer.json()["error"]
    assert error["code"] == answer.status_code and error["status"] in ("INVALID_ARGUMENT", "PERMISSION_DENIED")
    assert "Access-Control-Allow-Origin" not in answer.headers
    assert emu.jobs() == []
    assert emu.requests[-1]["body"] is None  # a refused body is not kept


@pytest.mark.parametrize("method", ["GET", "DELETE", "OPTIONS"])
def test_every_method_is_guarded_and_no_preflight_is_answered(emu: Emulator, method: str) -> None:
    answer = requests.request(method, emu.url + CREATE, headers={"Origin": "https://evil.example",
                                                                "Access-Control-Request-Method": "POST"}, timeout=10)
    assert answer.status_code == 403 and answer.json()["error"]["status"] == "PERMISSION_DENIED"
    assert not any(h.lower().startswith("access-control-") for h in answer.headers)


@pytest.mark.parametrize("host,ok", [
    ("127.0.0.1", True), ("127.0.0.1:8080", True), ("127.1.2.3:1", True), ("localhost", True),
    ("LOCALHOST:8080", True), ("localhost.", True), ("[::1]:8080", True), ("[::1]", True),
    ("evil.example", False), ("127.0.0.1.evil.example", False), ("10.0.0.1", False), ("[::2]", False),
    ("0.0.0.0", False), ("", False), ("127.0.0.1:8080:1", False), ("[::1", False),
])
def test_loopback_hosts(host: str, ok: bool) -> None:
    assert loopback_host(host) is ok


def test_the_real_client_and_plain_json_still_work(emu: Emulator) -> None:
    created = emu.client().create_custom_job(parent=PARENT, custom_job=as_job(job_body()))
    assert created.display_name == "evil"
    assert requests.post(emu.url + CREATE, json=job_body(), timeout=10).status_code == 200  # no Origin: a CLI
    assert len(emu.jobs()) == 2


def test_a_token_is_a_path_prefix_every_real_client_carries() -> None:
    token = "t0ken-" + "x" * 20
    with Emulator(runner=sleep_runner(0.1), pending_seconds=0, token=token) as emu:
        assert emu.url.endswith(f"/{token}")
        created = emu.client().create_custom_job(parent=PARENT, custom_job=as_job(job_body()))
        assert created.name.startswith(f"projects/{Emulator.project_number()}/")
        base = emu.url[: -len(token) - 1]
        for path in (CREATE, f"/wrong-token-xxxxxxxxxxx{CREATE}", f"/{token}x{CREATE}"):
            answer = requests.get(base + path, timeout=10)
            assert answer.status_code == 403 and answer.json()["error"]["status"] == "PERMISSION_DENIED"
        bare = v1.JobServiceClient(transport="rest", client_options={"api_endpoint": base},
                                   credentials=AnonymousCredentials())
        with pytest.raises(gexc.Forbidden):
            bare.list_custom_jobs(parent=PARENT)
    with pytest.raises(ValueError, match="token must be"):
        Emulator(token="short")


# ---- the acceptance: a real `vtrain emulator --run-jobs`, a job that would leave a marker ----------
def _serve(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "VTRAIN_"))}
    env.update(PYTHONPATH=str(REPO), VTRAIN_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "vtrain", "emulator", "--run-jobs", "--port", "0",
                             "--pending-seconds", "0", "-q", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


@pytest.mark.slow
def test_run_jobs_refuses_the_cross_origin_post_and_runs_nothing(tmp_path: Path) -> None:
    from vtrain.trainer.packaging import run_backend

    sdist = run_backend(PROBE, tmp_path / "dist")
    marker = tmp_path / "marker"
    body = json.dumps(job_body(sdist.as_uri(), ["--dump", str(marker)]))
    proc, url = _serve(tmp_path)
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        for headers in BROWSER_REQUESTS.values():
            answer = requests.post(url + CREATE, data=body, headers=headers, timeout=10)
            assert answer.status_code in (400, 403)
        # the raw form a page's fetch() takes on the wire (no `requests` defaults)
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10) as sock:
            sock.sendall(f"POST {CREATE} HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\n"
                         "Content-Type: text/plain;charset=UTF-8\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
            assert sock.recv(65536).split(b"\r\n", 1)[0] == b"HTTP/1.1 403 Forbidden"
        client = v1.JobServiceClient(transport="rest", client_options={"api_endpoint": url},
                                     credentials=AnonymousCredentials())
        assert list(client.list_custom_jobs(parent=PARENT)) == []
        time.sleep(1.0)
        assert not marker.exists()
        # the control: the same job from the real client runs, and leaves the marker
        created = client.create_custom_job(parent=PARENT, custom_job=as_job(json.loads(body)))
        deadline = time.monotonic() + 120
        while client.get_custom_job(name=created.name).state.name not in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"):
            assert time.monotonic() < deadline, "the control job did not end"
            time.sleep(0.2)
        assert client.get_custom_job(name=created.name).state.name == "JOB_STATE_SUCCEEDED"
        assert marker.is_dir() and any(marker.iterdir())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
