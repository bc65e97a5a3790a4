"""The emulator under load and bad input (issue 10, class 8): it answers what a real front end
answers (400/411/413/414/431, 500 for its own bugs), never drops a connection without an answer
or blocks a thread on a lying Content-Length, takes hundreds of connections at once, keeps a
bounded request log, and refuses durations it could not represent."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1 as v1
from google.protobuf.json_format import ParseError

from tests.helpers import MakeEmulator
from vtrain.cli import cli
from vtrain.emulator import MAX_SECONDS, Emulator, sleep_runner
from vtrain.emulator.server import REQUEST_LOG

PARENT = "projects/test-project/locations/us-central1"


@pytest.fixture
def logged(make_emulator: MakeEmulator) -> tuple[Emulator, list[str]]:
    """An emulator with its access log on, and the lines it wrote."""
    lines: list[str] = []
    return make_emulator(sleep_runner(0.1), pending_seconds=0, access_log=lines.append), lines


def exchange(emu: Emulator, raw: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes on a fresh connection; everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", emu.port), timeout=timeout) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1."), answer[:200]
    return int(answer.split(b" ", 2)[1])


def make_job(name: str = "train") -> v1.CustomJob:
    pool = v1.WorkerPoolSpec(
        machine_spec=v1.MachineSpec(machine_type="n1-standard-4"),
        replica_count=1,
        container_spec=v1.ContainerSpec(image_uri="gcr.io/p/trainer:1"),
    )
    return v1.CustomJob(display_name=name, job_spec=v1.CustomJobSpec(worker_pool_specs=[pool]))


# ---- the HTTP layer ------------------------------------------------------------------------
LIST = f"/v1/{PARENT}/customJobs"
BAD_REQUESTS = {
    "content-length not a number": (b"POST " + LIST.encode() + b" HTTP/1.1\r\nContent-Length: abc\r\n\r\n{}", 400),
    "negative content-length": (b"POST " + LIST.encode() + b" HTTP/1.1\r\nContent-Length: -5\r\n\r\n{}", 400),
    "two content-lengths": (
        b"POST " + LIST.encode() + b" HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        400,
    ),
    "post without a length": (b"POST " + LIST.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 411),
    "body over the limit": (b"POST " + LIST.encode() + b" HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413),
    "unknown transfer-encoding": (b"POST /v2/entries:list HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    "bad chunk size": (b"POST /v2/entries:list HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    "garbage request line": (b"GARBAGE\r\n\r\n", 400),
    "request line with spaces": (b"GET / HTTP/1.1 extra words\r\n\r\n", 400),
    "control bytes": (b"\x00\x01\x02 \x7f HTTP/1.1\r\n\r\n", 400),
    "bad http version": (b"GET / HTTP/x.y\r\n\r\n", 400),
    "request line too long": (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
    "header line too long": (b"GET / HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431),
}


@pytest.mark.parametrize("raw,code", BAD_REQUESTS.values(), ids=list(BAD_REQUESTS))
def test_malformed_requests_get_an_answer_with_the_access_log_on(
    logged: tuple[Emulator, list[str]], raw: bytes, code: int
) -> None:
    emu, lines = logged
    assert status_of(exchange(emu, raw)) == code
    assert lines and lines[-1].endswith(f"-> {code}") and "\n" not in lines[-1]
    assert len(lines[-1]) < 400  # the over-long target is cut, control bytes escaped
    assert requests.get(emu.url + LIST, timeout=10).status_code == 200  # still serving


def test_a_short_body_does_not_block_a_thread(logged: tuple[Emulator, list[str]]) -> None:
    emu, _ = logged
    # Content-Length promises 100 bytes, 2 arrive, then the client stops sending: no answer is
    # owed, and the handler must end with the connection instead of waiting forever.
    assert exchange(emu, b"POST " + LIST.encode() + b" HTTP/1.1\r\nContent-Length: 100\r\n\r\n{}") == b""
    assert requests.get(emu.url + LIST, timeout=10).status_code == 200


def test_chunked_bodies_are_read(logged: tuple[Emulator, list[str]]) -> None:
    emu, _ = logged
    body = json.dumps({"filter": 'resource.labels.job_id="1"'}).encode()
    raw = (
        b"POST /v2/entries:list HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    )
    answer = exchange(emu, raw)
    assert status_of(answer) == 200 and answer.endswith(b'{"entries": []}')


# ---- entries:list with wrong types ---------------------------------------------------------
WRONG_TYPES: list[Any] = [
    [],
    "text",
    5,
    {"resourceNames": "projects/test-project", "filter": 'resource.labels.job_id="1"'},
    {"resourceNames": [5], "filter": 'resource.labels.job_id="1"'},
    {"filter": 5},
    {"filter": ["a"]},
    {"filter": None},
    {"filter": 'resource.labels.job_id="1"', "pageSize": "ten"},
    {"filter": 'resource.labels.job_id="1"', "pageSize": True},
    {"filter": 'resource.labels.job_id="1"', "pageSize": 2**40},
    {"filter": 'resource.labels.job_id="1"', "pageToken": {}},
    {"filter": 'resource.labels.job_id="1"', "orderBy": 1.5},
    {"filter": 'resource.labels.job_id="1"', "bogus": 1},
    {"filter": 'resource.labels.job_id="1" AND timestamp>"yesterday"'},
    {"filter": 'resource.labels.job_id="1" AND timestamp>"2024-01-01T00:00:00"'},  # no zone
]


@pytest.mark.parametrize("body", WRONG_TYPES, ids=[json.dumps(b)[:40] for b in WRONG_TYPES])
def test_entries_list_checks_field_types(logged: tuple[Emulator, list[str]], body: Any) -> None:
    emu, _ = logged
    answer = requests.post(f"{emu.url}/v2/entries:list", json=body, timeout=10)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["message"]


def test_entries_list_accepts_the_real_clients_shapes(logged: tuple[Emulator, list[str]]) -> None:
    emu, _ = logged
    body = {
        "resourceNames": ["projects/test-project"],
        "filter": 'resource.labels.job_id="1" AND timestamp>="2024-01-01T00:00:00Z"',
        "orderBy": "timestamp asc",
        "pageSize": "1000",  # int32 may come as a JSON string
        "pageToken": "",
    }
    assert requests.post(f"{emu.url}/v2/entries:list", json=body, timeout=10).json() == {"entries": []}


# ---- load ----------------------------------------------------------------------------------
def test_five_hundred_connections_at_once_are_all_served() -> None:
    """The listen backlog takes a burst: 500 clients connect while the server is not yet
    accepting (the worst case: every one waits in the backlog), and every one is answered."""
    emu = Emulator(runner=sleep_runner(0.1))  # bound and listening, not serving yet
    socks: list[socket.socket] = []
    try:
        for _ in range(500):
            sock = socket.create_connection(("127.0.0.1", emu.port), timeout=5)  # no answer to a SYN: fails
            sock.sendall(f"GET {LIST} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            socks.append(sock)
        emu.start()
        codes = []
        for sock in socks:
            sock.settimeout(30)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
            codes.append(status_of(data))
        assert codes == [200] * 500
    finally:
        for sock in socks:
            sock.close()
        emu.stop()


def test_concurrent_real_clients_see_no_resets() -> None:
    with Emulator(runner=sleep_runner(0.1), pending_seconds=0) as emu:
        barrier = threading.Barrier(100)
        errors: list[BaseException] = []

        def client() -> None:
            try:
                barrier.wait()
                created = emu.client().create_custom_job(parent=PARENT, custom_job=make_job())
                emu.client().get_custom_job(name=created.name)
            except BaseException as err:  # noqa: BLE001 - collected and asserted below
                errors.append(err)

        threads = [threading.Thread(target=client) for _ in range(100)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert len(emu.jobs()) == 100


def test_the_request_log_is_bounded() -> None:
    with Emulator(runner=sleep_runner(0.1)) as emu:
        session = requests.Session()
        for i in range(REQUEST_LOG + 20):
            session.get(f"{emu.url}{LIST}?pageSize={i + 1}", timeout=10)
        kept = emu.requests
    assert len(kept) == REQUEST_LOG
    assert kept[0]["query"] == {"pageSize": "21"} and kept[-1]["query"] == {"pageSize": str(REQUEST_LOG + 20)}


# ---- durations ------------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["--run-seconds", "--pending-seconds"])
@pytest.mark.parametrize("value", ["1e300", "inf", "nan", "-1", str(MAX_SECONDS * 2)])
def test_durations_beyond_a_timestamp_are_usage_errors(option: str, value: str) -> None:
    result = CliRunner().invoke(cli, ["emulator", "--port", "0", option, value])
    assert result.exit_code == 2
    assert "is not between 0 and 1000000000 seconds" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("field", ["run_seconds", "pending_seconds", "cancel_seconds"])
def test_the_python_api_refuses_them_too(field: str) -> None:
    with pytest.raises(ValueError, match=f"{field} must be between 0 and"):
        Emulator(**{field: 1e300})


# ---- faults after the work --------------------------------------------------------------------
AFTER = [("after", gexc.ServiceUnavailable), ("reset-after", requests.ConnectionError), ("garble", ParseError)]


@pytest.mark.parametrize("mode,error", AFTER)
def test_faults_after_the_work_create_the_job_and_lose_the_answer(mode: str, error: type) -> None:
    with Emulator(runner=sleep_runner(0.1), pending_seconds=0) as emu:
        emu.fail_next(1, mode=mode)
        with pytest.raises(error):
            emu.client().create_custom_job(parent=PARENT, custom_job=make_job())
        assert len(emu.jobs()) == 1
        emu.fail_next(1, mode="reset")  # before the work: nothing happens
        with pytest.raises(requests.ConnectionError):
            emu.client().create_custom_job(parent=PARENT, custom_job=make_job())
        assert len(emu.jobs()) == 1
    with pytest.raises(ValueError, match="mode must be one of before, reset, after, reset-after, garble"):
        emu.fail_next(1, mode="sideways")
