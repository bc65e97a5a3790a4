"""Build and push against a real CNCF distribution registry on 127.0.0.1 (skipped without it)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from tests.helpers import MakeRegistry
from tests.trainer.image_helpers import (
    PASSWORD,
    USER,
    Registry,
    free_port,
    make_sdist,
    make_trainer,
    make_wheel,
    needs_registry,
    push_base,
)
from vtrain.errors import PackagingError
from vtrain.trainer.image.build import build_and_push, build_image, planned_image, push_image, read_base
from vtrain.trainer.image.config import DOCKER_MANIFEST, OCI_INDEX, ImageSpec, canonical
from vtrain.trainer.image.reference import parse_reference
from vtrain.trainer.image.registry import RegistryClient

SKOPEO = shutil.which("skopeo")
BASE_FILES = [("etc/base-release", b"tiny base\n", False), ("usr/bin/hello", b"#!/bin/sh\necho hi\n", True)]


def _spec(reg: Registry, wheels: Path | None = None, **kw: object) -> ImageSpec:
    extra: dict[str, object] = {}
    if wheels is not None:
        extra = {"requirements": ("tinyreq==1.0",), "index_args": ("--no-index", "--find-links", str(wheels)),
                 "platform": "manylinux_2_17_x86_64"}  # the test bases hold no C library to read it from
    fields = {"base": f"{reg.host}/base/py:base", "repository": f"{reg.host}/team/trainer", "module": "trainer.task",
              "args": ("--epochs", "1"), **extra, **kw}
    return ImageSpec(**fields)  # type: ignore[arg-type]


def _inspect(image: str, *extra: str) -> dict[str, object]:
    done = subprocess.run([str(SKOPEO), "inspect", "--tls-verify=false", *extra, f"docker://{image}"],
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.slow
@needs_registry
def test_build_and_push_shows_the_base_layers_then_vtrains(registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    push_base(registry.client(), "base/py", BASE_FILES, tmp_path)
    base_layers = [d["digest"] for d in json.loads(registry.client().manifest("base/py", "base")[1])["layers"]]
    root = make_trainer(tmp_path / "t")
    spec = _spec(registry, make_wheel(tmp_path / "wheels").parent)
    pushed = build_and_push(spec, root, cache=tmp_path / "cache")
    assert pushed.image.split("@")[0] == planned_image(spec, root)  # the offline tag is the pushed one
    assert [b["role"] for b in pushed.blobs] == ["base", "requirements", "trainer", "runtime", "config"]
    assert pushed.blobs[0]["action"] == "mounted"  # same registry: linked, not sent
    assert pushed.sent == pushed.layer_bytes("requirements", "trainer", "runtime", "config")
    if SKOPEO is None:
        pytest.skip("skopeo is not installed: the push is checked, the skopeo view is not")
    seen = _inspect(pushed.image.split("@")[0])
    assert seen["Digest"] == pushed.digest
    assert seen["Layers"] == base_layers + [b["digest"] for b in pushed.blobs[1:4]]
    assert "PYTHONPATH=/opt/vtrain/trainer:/opt/vtrain/runtime:/opt/vtrain/deps/lib/python3.11/site-packages" in \
        seen["Env"]  # type: ignore[operator]
    assert "PYTHONUSERBASE=/opt/vtrain/deps" in seen["Env"]  # type: ignore[operator]
    config = _inspect(pushed.image.split("@")[0], "--config")["config"]
    assert config["Entrypoint"] == ["python3", "-m", "trainer.task"]  # type: ignore[index]
    assert config["Cmd"] == ["--epochs", "1"]  # type: ignore[index]


@pytest.mark.slow
@needs_registry
def test_same_inputs_send_nothing_and_one_changed_file_sends_only_the_trainer_layer(
        registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    push_base(registry.client(), "base/py", BASE_FILES, tmp_path)
    root = make_trainer(tmp_path / "t")
    spec = _spec(registry, make_wheel(tmp_path / "wheels").parent)
    first = build_and_push(spec, root, cache=tmp_path / "cache")
    again = build_and_push(spec, root, cache=tmp_path / "cache")
    assert again.digest == first.digest
    assert again.sent == 0
    assert {b["action"] for b in again.blobs} == {"present"}
    (root / "trainer" / "task.py").write_text("print('trained, one line changed')\n")
    changed = build_and_push(spec, root, cache=tmp_path / "cache")
    assert changed.digest != first.digest
    sent = {b["role"] for b in changed.blobs if b["action"] == "uploaded"}
    assert sent == {"trainer", "config"}
    trainer = next(b for b in changed.blobs if b["role"] == "trainer")
    assert changed.sent == int(trainer["size"]) + next(int(b["size"]) for b in changed.blobs if b["role"] == "config")


@needs_registry
def test_chunked_uploads_arrive_whole(registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    push_base(registry.client(), "base/py", BASE_FILES, tmp_path)
    root = make_trainer(tmp_path / "t")
    client = registry.client(chunk_size=4096)
    built = build_image(_spec(registry), root, tmp_path / "out", client)
    pushed = push_image(built, client, client)
    runtime = next(layer for layer in built.layers if layer.role == "runtime")
    assert runtime.size > 4096  # so it went in several PATCHes
    answer = requests.get(f"http://{registry.host}/v2/team/trainer/blobs/{runtime.digest}", timeout=10)
    assert answer.content == runtime.path.read_bytes()
    assert pushed.sent == sum(int(b["size"]) for b in pushed.blobs if b["action"] == "uploaded")


@needs_registry
def test_a_base_on_another_registry_is_streamed_across_and_only_its_config_read(
        registry: Registry, make_registry: MakeRegistry, tmp_path: Path) -> None:
    push_base(registry.client(), "base/py", BASE_FILES, tmp_path)
    other = make_registry("other")
    base_client = registry.client()
    seen: list[str] = []
    original = base_client.session.request

    def recording(method: str, url: str, **kw: object) -> requests.Response:
        seen.append(f"{method} {url.split('/v2/', 1)[-1]}")
        return original(method, url, **kw)  # type: ignore[arg-type]

    base_client.session.request = recording  # type: ignore[method-assign]
    spec = ImageSpec(base=f"{registry.host}/base/py:base", repository=f"{other.host}/team/trainer",
                     module="trainer.task")
    built = build_image(spec, make_trainer(tmp_path / "t"), tmp_path / "out", base_client)
    config_digest = built.base.manifest["config"]["digest"]
    # /v2/ first (is it a registry?), then the manifest and the config: never a base layer
    assert seen == ["GET ", "GET base/py/manifests/base", f"GET base/py/blobs/{config_digest}"]
    pushed = push_image(built, RegistryClient(other.host), base_client)
    base = pushed.blobs[0]
    assert base["action"] == "copied"
    assert pushed.layer_bytes("base") == base["size"]
    assert requests.head(f"http://{other.host}/v2/team/trainer/blobs/{base['digest']}", timeout=5).ok


@needs_registry
def test_a_docker_schema_2_base_gives_a_docker_schema_2_image(registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    push_base(registry.client(), "base/py", BASE_FILES, tmp_path, docker=True)
    client = registry.client()
    pushed = build_and_push(_spec(registry), make_trainer(tmp_path / "t"), cache=tmp_path / "cache")
    kind, body, digest = client.manifest("team/trainer", pushed.image.split("@")[0].rsplit(":", 1)[1])  # type: ignore[misc]
    manifest = json.loads(body)
    assert kind == manifest["mediaType"] == DOCKER_MANIFEST and digest == pushed.digest
    assert manifest["config"]["mediaType"] == "application/vnd.docker.container.image.v1+json"
    assert {layer["mediaType"] for layer in manifest["layers"]} == {"application/vnd.docker.image.rootfs.diff.tar.gzip"}


@needs_registry
def test_a_manifest_list_base_gives_its_linux_amd64_image(registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    client = registry.client()
    push_base(client, "base/py", [("etc/arch", b"arm64\n", False)], tmp_path / "arm", tag="arm64", arch="arm64")
    push_base(client, "base/py", BASE_FILES, tmp_path, tag="amd64")
    entries = []
    for tag, arch in (("arm64", "arm64"), ("amd64", "amd64")):
        kind, body, digest = client.manifest("base/py", tag)  # type: ignore[misc]
        entries.append({"mediaType": kind, "digest": digest, "size": len(body),
                        "platform": {"os": "linux", "architecture": arch}})
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
    client.put_manifest("base/py", "base", OCI_INDEX, canonical(index))
    built = build_image(_spec(registry), make_trainer(tmp_path / "t"), tmp_path / "out", client)
    assert built.base.digest == entries[1]["digest"]
    assert built.base.config["architecture"] == "amd64"
    # issue 44: a pool on an Arm machine (A4X) builds on the base's arm64 variant, under a tag of its own
    arm = build_image(_spec(registry, arch="arm64"), make_trainer(tmp_path / "t"), tmp_path / "out-arm", client)
    assert (arm.base.digest, arm.base.config["architecture"]) == (entries[0]["digest"], "arm64")
    assert json.loads(arm.config)["architecture"] == "arm64" and arm.target != built.target
    with pytest.raises(PackagingError, match=r"has no linux/s390x variant \(it has: linux/amd64, linux/arm64\)"):
        read_base(client, parse_reference(f"{registry.host}/base/py:base"), arch="s390x")


@needs_registry
def test_an_entry_module_that_is_not_there_stops_the_build(registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    push_base(registry.client(), "base/py", BASE_FILES, tmp_path)
    with pytest.raises(PackagingError, match="trainer module 'trainer.missing' not found"):
        build_and_push(_spec(registry, module="trainer.missing"), make_trainer(tmp_path / "t"),
                       cache=tmp_path / "cache")
    assert registry.client().manifest("team/trainer", "latest") is None


# --- what goes wrong: one line each ----------------------------------------------------------------


@needs_registry
def test_an_unreachable_registry_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_NETWORK_TIMEOUT", "0.5")
    host = f"127.0.0.1:{free_port()}"  # nothing listens there
    spec = ImageSpec(base=f"{host}/base/py:base", repository=f"{host}/team/trainer", module="trainer.task")
    with pytest.raises(PackagingError) as err:
        build_and_push(spec, make_trainer(tmp_path / "t"), cache=tmp_path / "cache")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"cannot reach registry {host} to read manifest base/py:base (")
    assert "VTRAIN_NETWORK_TIMEOUT" in message


@needs_registry
def test_a_base_image_that_does_not_exist_is_one_line(registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    with pytest.raises(PackagingError) as err:
        build_and_push(_spec(registry), make_trainer(tmp_path / "t"), cache=tmp_path / "cache")
    assert str(err.value) == (f"base image {registry.host}/base/py:base not found: the registry has no manifest "
                              "'base' in repository 'base/py'")


@needs_registry
def test_an_sdist_only_requirement_stops_the_build_before_anything_is_sent(
        registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    push_base(registry.client(), "base/py", BASE_FILES, tmp_path)
    spec = _spec(registry, requirements=("onlysdist",), platform="manylinux_2_17_x86_64",  # the base has no libc
                 index_args=("--no-index", "--find-links", str(make_sdist(tmp_path / "dists").parent)))
    with pytest.raises(PackagingError, match=r"^requirement 'onlysdist' has no wheel for Python 3\.11 "
                                             r"\(cp311\) on manylinux_2_17_x86_64 "):
        build_and_push(spec, make_trainer(tmp_path / "t"), cache=tmp_path / "cache")
    assert registry.client().manifest("team/trainer", "latest") is None
    assert requests.get(f"http://{registry.host}/v2/_catalog", timeout=5).json()["repositories"] == ["base/py"]


@needs_registry
def test_htpasswd_auth_refuses_without_or_with_wrong_credentials_and_pushes_with_them(
        auth_registry: Registry, tmp_path: Path) -> None:  # noqa: F811
    good = RegistryClient(auth_registry.host, lambda host: (USER, PASSWORD))
    push_base(good, "base/py", BASE_FILES, tmp_path)
    root = make_trainer(tmp_path / "t")
    spec = _spec(auth_registry)
    for credentials, why in ((None, "none were given"), (lambda host: (USER, "wrong"), "credentials were sent")):
        with pytest.raises(PackagingError) as err:
            build_and_push(spec, root, credentials=credentials, cache=tmp_path / "cache")
        message = str(err.value)
        assert "\n" not in message
        assert message.startswith(f"registry {auth_registry.host} refused access (401 unauthorized)")
        assert why in message
    asked: list[str] = []
    pushed = build_and_push(spec, root, credentials=lambda host: asked.append(host) or (USER, PASSWORD),
                            cache=tmp_path / "cache")
    assert asked == [auth_registry.host]  # asked once per client
    assert pushed.blobs[0]["action"] == "mounted"


@needs_registry
def test_a_registry_with_token_auth_gets_tokens_for_each_scope(tmp_path: Path, make_registry: MakeRegistry) -> None:
    from tests.trainer.image_token_server import token_service

    with token_service(tmp_path, USER, PASSWORD) as service:
        reg = make_registry("token-registry", token=(service.realm, service.cert_pem))
        good = lambda host: (USER, PASSWORD)  # noqa: E731
        push_base(RegistryClient(reg.host, good), "base/py", BASE_FILES, tmp_path)
        root = make_trainer(tmp_path / "t")
        spec = _spec(reg)
        pushed = build_and_push(spec, root, credentials=good, cache=tmp_path / "cache")
        assert pushed.blobs[0]["action"] == "mounted"  # the mount's token also has pull on the base's repository
        asked = {tuple(scopes) for who, scopes in service.asked if who == USER}
        assert ("repository:team/trainer:pull,push", "repository:base/py:pull") in asked
        for credentials, why in ((None, "(401 unauthorized): authentication required"),
                                 (lambda host: (USER, "wrong"), "the token service refused the credentials")):
            with pytest.raises(PackagingError) as err:
                build_and_push(spec, root, credentials=credentials, cache=tmp_path / "cache")
            assert str(err.value).startswith(f"registry {reg.host} refused access")
            assert why in str(err.value) and "\n" not in str(err.value)


class _TokenRegistry(BaseHTTPRequestHandler):
    """A registry front that wants a Bearer token, and the token service that hands it out."""

    scopes: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        port = self.server.server_address[1]
        if self.path.startswith("/token"):
            type(self).scopes.append(self.path)
            expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            if self.headers.get("Authorization") != expected:
                self._answer(401, b'{"details": "bad credentials"}')
            else:
                self._answer(200, b'{"token": "T0KEN"}')
        elif self.path.startswith("/v2/flaky/") and not type(self).scopes:
            type(self).scopes.append("failed once")
            self._answer(503, b'{"errors": [{"code": "UNAVAILABLE", "message": "try later"}]}')
        elif self.path.startswith("/v2/flaky/") or self.headers.get("Authorization") == "Bearer T0KEN":
            self._answer(200, b'{"schemaVersion": 2, "layers": []}',
                         {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        else:
            challenge = f'Bearer realm="http://127.0.0.1:{port}/token",service="fake-registry"'
            self._answer(401, b'{"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}',
                         {"WWW-Authenticate": challenge})

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def token_registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _TokenRegistry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _TokenRegistry.scopes = []
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_bearer_challenge_fetches_a_token_for_the_scope(token_registry: str) -> None:
    client = RegistryClient(token_registry, lambda host: (USER, PASSWORD))
    kind, body, _ = client.manifest("team/trainer", "v1")  # type: ignore[misc]
    assert kind == "application/vnd.oci.image.manifest.v1+json" and json.loads(body)["schemaVersion"] == 2
    assert _TokenRegistry.scopes == ["/token?service=fake-registry&scope=repository%3Ateam%2Ftrainer%3Apull"]
    client.manifest("team/trainer", "v2")
    assert len(_TokenRegistry.scopes) == 1  # the token is kept for its scope
    with pytest.raises(PackagingError, match="refused access .401 unauthorized.: the token service refused"):
        RegistryClient(token_registry, lambda host: (USER, "wrong")).manifest("team/trainer", "v1")


def test_a_transient_failure_is_retried_with_a_progress_line(token_registry: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from vtrain import network

    lines: list[str] = []
    monkeypatch.setattr(network, "_sink", lines.append)
    monkeypatch.setattr("vtrain.trainer.image.registry.time.sleep", lambda seconds: None)
    assert RegistryClient(token_registry).manifest("flaky/repo", "v1") is not None
    assert lines == [f"registry {token_registry}: read manifest flaky/repo:v1: 503 try later; retrying"]
    monkeypatch.setattr("vtrain.trainer.image.registry.MAX_ATTEMPTS", 1)
    _TokenRegistry.scopes = []  # fails once more
    with pytest.raises(PackagingError) as err:
        RegistryClient(token_registry).manifest("flaky/repo", "v1")
    assert str(err.value) == (f"registry {token_registry} could not read manifest flaky/repo:v1: it answered 503 try "
                              "later (gave up after 1 attempts in 0 s); try again later")


def test_references_to_docker_hub_use_its_api_host() -> None:
    assert parse_reference("python:3.11-slim").registry == "registry-1.docker.io"
