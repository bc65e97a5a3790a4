"""No network, a dead or silent endpoint (issue 10, class 4): every Google call vtrain makes waits a
bounded time, says so before each retry, and ends in one line naming the endpoint and what to
check — never minutes of silence or a RetryError traceback. Endpoints here are a closed port and
a "blackhole" (a listener on 127.0.0.1 that never accepts, so requests get no answer)."""

from __future__ import annotations

import importlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.cloud.test_submit import job_text
from tests.helpers import FAST_RETRY, write_job
from vtrain import network
from vtrain.cli import cli
from vtrain.emulator import Emulator, sleep_runner
from vtrain.errors import PackagingError, UsageError
from vtrain.trainer.staging import check_target, lookup, parse_staging, stage

SUBMIT = importlib.import_module("vtrain.cloud.submit")
TIMEOUT = "0.4"


@pytest.fixture
def blackhole() -> Iterator[str]:
    """http://127.0.0.1:PORT that takes connections into its backlog and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def closed() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # bound, then closed: nothing listens there


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(network.TIMEOUT_ENV, TIMEOUT)
    monkeypatch.setattr(SUBMIT, "DEFAULT_RETRY", FAST_RETRY)
    monkeypatch.setenv("VTRAIN_PROJECT", "test-project")
    monkeypatch.setenv("VTRAIN_REGION", "us-central1")


def run(*args: str) -> tuple[int, str, str, float]:
    start = time.monotonic()
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr, time.monotonic() - start


def error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and err.rstrip().endswith(lines[0]), err
    return lines[0]


# ---- Vertex AI ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["blackhole", "closed"])
@pytest.mark.parametrize(
    "command", [["list"], ["status", "1234"], ["logs", "1234"], ["cancel", "1234"]], ids=lambda c: c[0]
)
def test_vertex_calls_end_in_one_line_naming_the_endpoint(
    request: pytest.FixtureRequest, kind: str, command: list[str]
) -> None:
    url = request.getfixturevalue(kind)
    code, out, err, _ = run(*command, "--api-endpoint", url)
    assert code == 1 and out == ""
    why = f"no answer within {TIMEOUT} s" if kind == "blackhole" else "connection refused"
    line = error_line(err)
    assert f"cannot reach {url} ({why}; " in line
    assert "is the emulator running there? check the network connection, any proxy (HTTPS_PROXY)" in line
    assert "(--api-endpoint, VTRAIN_API_ENDPOINT); VTRAIN_NETWORK_TIMEOUT sets the seconds" in line
    progress = [x for x in err.splitlines() if not x.startswith("error: ")]
    assert progress and all(x.startswith(f"Vertex AI at {url}: {why}; retrying in ") for x in progress)


def test_the_wait_is_bounded_by_the_timeout(blackhole: str) -> None:
    # 4 attempts of 0.4 s at most, within a deadline of 1.2 s: the call ends well before 10 s.
    code, _, err, took = run("list", "--api-endpoint", blackhole)
    assert code == 1 and took < 10, err


def test_a_bad_timeout_setting_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("abc", "0", "-1", "inf", "nan", "1e9"):
        monkeypatch.setenv(network.TIMEOUT_ENV, value)
        with pytest.raises(UsageError, match="VTRAIN_NETWORK_TIMEOUT must be seconds between 0 and 3600"):
            network.attempt_timeout()
        code, _, err, _ = run("list", "--api-endpoint", "http://127.0.0.1:9")
        assert code == 2 and "VTRAIN_NETWORK_TIMEOUT must be" in error_line(err)


# ---- Cloud Storage --------------------------------------------------------------------------
def _storage_client(url: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(project="p", credentials=AnonymousCredentials(), client_options={"api_endpoint": url})


@pytest.mark.parametrize("kind", ["blackhole", "closed"])
@pytest.mark.slow
def test_storage_calls_end_in_one_line_naming_the_endpoint(
    request: pytest.FixtureRequest, kind: str, tmp_path: Path
) -> None:
    url = request.getfixturevalue(kind)
    client = _storage_client(url)
    target = parse_staging("gs://stage-bkt/s")
    sdist = tmp_path / "trainer-0.1.tar.gz"
    sdist.write_bytes(b"x" * 100)
    why = f"no answer within {TIMEOUT} s" if kind == "blackhole" else "connection refused"
    calls = {
        "cannot check staging bucket gs://stage-bkt": lambda: check_target(target, client),
        "cannot read gs://stage-bkt/s/vtrain/trainer-0.1.tar.gz": lambda: lookup(target, sdist.name, client),
        # stage() looks for the object first: that is where it stops
        "cannot read gs://stage-bkt/s/vtrain/trainer-0.1.tar.gz ": lambda: stage(sdist, target, client=client),
    }
    for what, call in calls.items():
        what = what.strip()
        with pytest.raises(PackagingError) as err:
            call()
        message = str(err.value)
        assert message.startswith(f"{what}: cannot reach Cloud Storage at {url} ({why}; gave up after 1.2 s)")
        assert "(STORAGE_EMULATOR_HOST, or the bucket's location)" in message and "\n" not in message


def test_submit_with_storage_unreachable_is_one_line_and_creates_nothing(
    tmp_path: Path, blackhole: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", blackhole)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test-project")
    with Emulator(runner=sleep_runner(0.1)) as emu:
        monkeypatch.setenv("VTRAIN_API_ENDPOINT", emu.url)
        code, out, err, _ = run("submit", str(write_job(tmp_path, job_text())))
        assert emu.jobs() == []
    assert code == 1 and out == ""
    line = error_line(err)
    assert line.startswith(  # preflight finds it first, before anything is built
        "error: preflight: staging bucket: cannot check gs://stage-bkt/s: cannot reach Cloud Storage at "
        f"{blackhole}"
    )
    retrying = f"Cloud Storage at {blackhole}: no answer within {TIMEOUT} s; retrying"
    assert any(x.startswith(retrying) for x in err.splitlines())
