"""Issue 29, item 3: the registry client trusts only the registry. A server must prove it is one (the
API version header on /v2/, digests that match); credentials go only to its own URLs and token service,
never over plain http but to this machine; every body is read bounded; error bodies of any shape are
one printable line (issue 30, class 4)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import write_job
from tests.trainer.fake_servers import API, Answer, Fake, fake_server, ok_to_everything
from tests.trainer.image_helpers import make_trainer
from vtrain.errors import PackagingError
from vtrain.trainer.image.reference import trusted_realm
from vtrain.trainer.image.registry import RegistryClient

USER, PASSWORD = "me", "pa55"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
DATA = b"layer bytes"
DIGEST = f"sha256:{hashlib.sha256(DATA).hexdigest()}"
REPO_ROOT = Path(__file__).resolve().parents[2]


def _basic_registry(location: str) -> object:
    """A registry with basic auth whose uploads go to `location`."""
    def answer(method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
        if headers.get("Authorization") != BASIC:
            return 401, {**API, "WWW-Authenticate": 'Basic realm="fake"'}, b'{"errors": []}'
        if path == "/v2/":
            return 200, API, b"{}"
        if method == "POST" and "/blobs/uploads/" in path:
            return 202, {**API, "Location": location}, b""
        return 404, API, b""
    return answer


def test_a_cross_host_upload_location_gets_no_authorization() -> None:
    def storage(method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
        return 201, {**API, "Docker-Content-Digest": DIGEST}, b""

    with fake_server(storage) as other, fake_server(
            _basic_registry(f"http://{other.host}/upload/1?state=x")) as reg:  # type: ignore[arg-type]
        client = RegistryClient(reg.host, lambda host: (USER, PASSWORD))
        client.upload("team/trainer", DIGEST, len(DATA), lambda: io.BytesIO(DATA))
    [put] = other.seen
    assert put.method == "PUT" and f"digest={DIGEST}" in put.path
    assert "Authorization" not in put.headers  # the registry's credentials stayed with the registry
    # ... which had them only once it asked (the first POST went without, was challenged, and was sent again)
    assert [s.headers.get("Authorization") for s in reg.seen if s.method == "POST"] == [None, BASIC]


def test_an_upload_location_over_plain_http_to_another_machine_is_refused() -> None:
    with fake_server(_basic_registry("http://storage.example.invalid/upload/1")) as reg:  # type: ignore[arg-type]
        client = RegistryClient(reg.host, lambda host: (USER, PASSWORD))
        with pytest.raises(PackagingError, match=r"the upload location http://storage\.example\.invalid/upload/1\?digest="
                                                 r"sha256:[0-9a-f]{64} is not https .*refusing to send anything"):
            client.upload("team/trainer", DIGEST, len(DATA), lambda: io.BytesIO(DATA))


@pytest.mark.parametrize(("registry", "realm", "trusted"), [
    ("us-docker.pkg.dev", "https://us-docker.pkg.dev/v2/token", True),
    ("registry-1.docker.io", "https://auth.docker.io/token", True),
    ("ghcr.io", "https://ghcr.io/token", True),
    ("ghcr.io", "https://token.example.com/token", False),
    ("registry.corp.example.com:5000", "https://auth.corp.example.com/token", True),
    ("registry.corp.example.com", "https://example.com.evil.io/token", False),
    ("10.0.0.1:5000", "https://10.0.0.2/token", False),
    ("127.0.0.1:5000", "http://127.0.0.1:6000/token", True),
    ("127.0.0.1:5000", "http://attacker.example/token", False),
])
def test_credentials_go_only_to_the_registrys_own_token_service(registry: str, realm: str, trusted: bool) -> None:
    assert trusted_realm(registry, realm) is trusted


def test_a_token_service_over_plain_http_is_refused() -> None:
    def answer(method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
        challenge = 'Bearer realm="http://auth.example.invalid/token",service="fake"'
        return 401, {**API, "WWW-Authenticate": challenge}, b""

    refused = pytest.raises(PackagingError, match="its token service http://auth.example.invalid/token is not https")
    with fake_server(answer) as reg, refused:
        RegistryClient(reg.host, lambda host: (USER, PASSWORD)).manifest("team/trainer", "v1")


def test_a_server_answering_200_to_everything_is_not_a_registry() -> None:
    with fake_server(ok_to_everything) as web:
        client = RegistryClient(web.host, lambda host: (USER, PASSWORD))
        with pytest.raises(PackagingError) as err:
            client.has_blob("team/trainer", DIGEST)
    assert str(err.value) == (f"{web.host} is not a registry: GET /v2/ answered 200 without the "
                              "Docker-Distribution-API-Version header every registry sends; check the host of the "
                              "image repository (nothing was sent)")
    assert [(s.method, s.path) for s in web.seen] == [("GET", "/v2/")]
    assert all("Authorization" not in s.headers for s in web.seen)


def _succeeds(job: object, ctx: object) -> object:
    from vtrain.emulator import RunResult

    return RunResult()


pytestmark = pytest.mark.emulator(runner=_succeeds, cancel_seconds=0.2)


@pytest.mark.slow
def test_submit_to_a_server_that_is_not_a_registry_creates_no_job(tmp_path: Path, emu: object,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from vtrain.cli import cli

    monkeypatch.setenv("VTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    make_trainer(tmp_path / "t")
    with fake_server(ok_to_everything) as web:
        job = write_job(tmp_path, f"""
            name: built
            trainer:
              package: t
              module: trainer.task
              image: {web.host}/base/python:base
              build: {{repository: {web.host}/team/trainer, python_version: '3.11'}}
            cluster:
              chief: {{machine_type: n1-standard-4}}
            """)
        done = CliRunner().invoke(cli, ["submit", str(job), "--project", "test-project", "--api-endpoint", emu.url])  # type: ignore[attr-defined]
    assert done.exit_code == 1, done.output
    # one error, last (a logging handler an earlier test in the same worker left on stderr may add lines above it)
    lines = done.stderr.splitlines()
    assert lines and lines[-1].startswith(f"error: {web.host} is not a registry: GET /v2/ answered 200 without"), \
        done.stderr
    assert [line for line in lines if line.startswith("error:")] == lines[-1:], done.stderr
    assert emu.jobs() == []  # type: ignore[attr-defined]
    assert {s.method for s in web.seen} == {"GET"} and {s.path for s in web.seen} == {"/v2/"}


def _digest_liar(method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
    wrong = {**API, "Docker-Content-Digest": "sha256:" + "0" * 64}
    if path == "/v2/":
        return 200, API, b"{}"
    if "/manifests/sha256:" in path:
        return 200, {**API, "Content-Type": "application/vnd.oci.image.manifest.v1+json"}, b'{"not": "it"}'
    if method == "PUT":
        return 201, wrong, b""
    return 200, wrong, b""


def test_digests_in_answers_must_be_the_ones_sent_or_asked_for() -> None:
    with fake_server(_digest_liar) as liar:
        client = RegistryClient(liar.host)
        with pytest.raises(PackagingError, match="it answered digest sha256:0000.*, not sha256:"):
            client.has_blob("team/trainer", DIGEST)
        with pytest.raises(PackagingError, match="putting manifest team/trainer:v1: it answered digest"):
            client.put_manifest("team/trainer", "v1", "application/vnd.oci.image.manifest.v1+json", b"{}")
        with pytest.raises(PackagingError, match="is not what its digest says"):
            client.manifest("team/trainer", DIGEST)


# VmHWM is this process's own peak: ru_maxrss would also hold the (large) pytest process it was forked from,
# since Linux keeps the pre-exec high-water mark in it.
_MEASURE = textwrap.dedent("""
    import sys
    from vtrain.errors import PackagingError
    from vtrain.trainer.image.registry import RegistryClient
    try:
        RegistryClient(sys.argv[1]).manifest("team/trainer", "v1")
        print("ACCEPTED")
    except PackagingError as err:
        print(err)
    peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(int(peak.split()[1]) // 1024)
""")


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_4_gib_manifest_is_refused_in_bounded_memory(declared: bool) -> None:
    size = 4 << 30

    def huge(method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
        if path == "/v2/":
            return 200, API, b"{}"
        kind = {**API, "Content-Type": "application/vnd.oci.image.manifest.v1+json"}
        if declared:
            return 200, {**kind, "Content-Length": str(size)}, (b"x" * (1 << 20) for _ in range(size >> 20))
        return 200, kind, (b"x" * (1 << 20) for _ in range(size >> 20))

    with fake_server(huge) as server:
        done = subprocess.run([sys.executable, "-c", _MEASURE, server.host], capture_output=True, text=True,
                              timeout=300, cwd=REPO_ROOT)
    *message, rss = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert message[0].startswith(f"registry {server.host}: manifest team/trainer:v1 is ")
    assert ("4,294,967,296 bytes, over the 4,194,304" in message[0]) is declared
    assert int(rss) < 300, f"peak RSS {rss} MB"


_SHAPES = {
    "oci": (b'{"errors": [{"code": "DENIED", "message": "no \\u001b[2J way"}]}', "no \\x1b[2J way"),
    "list": (b'[{"message": "listed"}, 2]', "listed"),
    "dict": (b'{"error": {"detail": {"x": 1}}, "code": "BAD"}', "BAD"),
    "errors-dict": (b'{"errors": {"message": "shaped oddly"}}', "shaped oddly"),
    "string": (b'"\\r[vtrain] forged\\u202eline"', "[vtrain] forged\\u202eline"),  # whitespace folded, bidi escaped
    "number": (b"1e999", ""),
    "deep": (b"[" * 100_000, ""),
    "html": (b"<!DOCTYPE html><html><head><title>502 \x1b]0;pwned\x07Bad Gateway</title>",
             "502 \\x1b]0;pwned\\x07Bad Gateway"),
    "text": (b"\n\nplain words\nsecond line\n", "plain words"),
    "binary": (bytes(range(256)) * 64, ""),
    "huge": (b"y" * (10 << 20), ""),
}


@pytest.mark.parametrize("shape", list(_SHAPES))
def test_error_bodies_of_any_shape_are_one_printable_line(shape: str) -> None:
    body, shown = _SHAPES[shape]

    def answer(method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
        if path == "/v2/":
            return 200, API, b"{}"
        return 400, {**API, "Content-Type": "application/json"}, body

    with fake_server(answer) as server, pytest.raises(PackagingError) as err:
        RegistryClient(server.host).manifest("team/trainer", "v1")
    message = str(err.value)
    assert message == f"registry {server.host}: reading manifest team/trainer:v1 failed: 400 {shown or 'Bad Request'}"
    assert "\n" not in message and "\x1b" not in message and "\x07" not in message and "\r" not in message


def test_a_registry_that_is_one_still_works_with_every_check(tmp_path: Path) -> None:
    """The checks cost a well-behaved registry nothing: a fake that does it right is accepted."""
    def good(method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
        if path == "/v2/":
            return 200, API, b"{}"
        body = json.dumps({"schemaVersion": 2}).encode()
        digest = f"sha256:{hashlib.sha256(body).hexdigest()}"
        return 200, {**API, "Docker-Content-Digest": digest,
                     "Content-Type": "application/vnd.oci.image.manifest.v1+json"}, body

    with fake_server(good) as server:
        kind, body, digest = RegistryClient(server.host).manifest("team/trainer", "v1")  # type: ignore[misc]
    assert json.loads(body) == {"schemaVersion": 2} and digest.startswith("sha256:")
