"""Issue 46, class 2: registry blobs read with a bound. A base layer that never ended kept `package` (the base's
C library scan) running and growing (60 s, 568 MB and rising); `trainer.container` pulls wrote past the
declared size; the scanned layer's digest was not checked before its answer was cached. Every blob (manifest,
config, a layer scanned, pulled into the cache or streamed to another registry) is now read by one
`BlobReader`: at most its declared size, within a time bound, its digest checked before its last byte is
handed over. Here against a hostile server on 127.0.0.1 (a layer that never ends, one longer than declared,
one with the wrong digest, one that trickles, descriptors that lie) and a real docker-registry (a blob
corrupted in its storage), with the peak memory and time of the CLI measured."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.helpers import write_job
from tests.trainer.fake_servers import API, Answer, Fake, fake_server
from tests.trainer.image_helpers import FAKE_LIBC, Registry, make_trainer, needs_registry, push_base
from vtrain.errors import PackagingError
from vtrain.local.rootfs import fetch_blob
from vtrain.trainer.image.answers import MAX_BLOB
from vtrain.trainer.image.build import base_platform, read_base
from vtrain.trainer.image.config import OCI_CONFIG, OCI_MANIFEST, canonical
from vtrain.trainer.image.layers import write_layer
from vtrain.trainer.image.reference import parse_reference
from vtrain.trainer.image.registry import CONFIG_LIMIT, RegistryClient


def _layer(tmp_path: Path) -> bytes:
    """A base layer that holds a glibc 2.36 (what the C library scan looks for), as a registry stores it."""
    return write_layer([FAKE_LIBC], tmp_path / "base.tar.gz", role="base").path.read_bytes()


def _forever(first: bytes) -> Iterator[bytes]:
    yield first
    while True:
        yield b"\0" * (1 << 20)


def _endless_tar() -> Iterator[bytes]:
    """A tar that never ends and never holds a C library: empty files, 2,048 a MiB (tarfile kept each one it
    read, so the scan grew ~600 MB a minute)."""
    header = tarfile.TarInfo("usr/share/doc/x").tobuf(tarfile.USTAR_FORMAT)
    chunk = header * ((1 << 20) // len(header))
    while True:
        yield chunk


class Hostile:
    """A registry on 127.0.0.1 whose base image `base/python:base` has one layer served by `layer` (its body, or
    a function that makes one for each request, and headers), under the descriptor `declared` (digest, size);
    the config is honest unless `config` says."""

    def __init__(self, layer: tuple[Any, dict[str, str]], declared: tuple[str, int],
                 config: tuple[Any, dict[str, Any]] | None = None) -> None:
        self.layer, self.declared = layer, declared
        body = canonical({"architecture": "amd64", "os": "linux", "config": {"Env": ["PYTHON_VERSION=3.11.2"]},
                          "rootfs": {"type": "layers", "diff_ids": []}})
        self.config_body = body
        descriptor = {"mediaType": OCI_CONFIG, "digest": f"sha256:{hashlib.sha256(body).hexdigest()}",
                      "size": len(body)}
        self.config = config or (body, descriptor)
        self.manifest = canonical({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": self.config[1],
                                   "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                               "digest": declared[0], "size": declared[1]}]})

    def __call__(self, method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
        if path == "/v2/":
            return 200, API, b"{}"
        if "/manifests/" in path:
            return 200, {**API, "Content-Type": OCI_MANIFEST}, self.manifest
        if path.endswith(str(self.config[1].get("digest"))):
            return 200, API, self.config[0]() if callable(self.config[0]) else self.config[0]
        if path.endswith(self.declared[0]):
            return 200, {**API, **self.layer[1]}, self.layer[0]() if callable(self.layer[0]) else self.layer[0]
        return 404, API, b""


def _scan(server: Fake, cache: Path) -> str:
    client = RegistryClient(server.host)
    return base_platform(read_base(client, parse_reference(f"{server.host}/base/python:base")), client, cache=cache)


def test_a_layer_that_never_ends_is_read_to_its_declared_size_and_refused(tmp_path: Path) -> None:
    layer = _layer(tmp_path)
    digest = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    with fake_server(Hostile((lambda: _forever(layer), {}), (digest, 4 << 20))) as server, \
            pytest.raises(PackagingError) as err:
        _scan(server, tmp_path / "cache")
    assert str(err.value).startswith(f"registry {server.host}: blob {digest[:19]} of base/python is not what its "
                                     f"digest says (its 4,194,304 bytes hash to sha256:")
    assert not (tmp_path / "cache" / "image-bases").exists()  # found libc early, but cached nothing unverified


def test_a_layer_with_the_wrong_digest_gives_no_answer_and_caches_none(tmp_path: Path) -> None:
    layer = _layer(tmp_path)
    wrong = "sha256:" + hashlib.sha256(b"another layer").hexdigest()
    with fake_server(Hostile((layer, {}), (wrong, len(layer)))) as server:
        with pytest.raises(PackagingError, match="is not what its digest says"):
            _scan(server, tmp_path / "cache")
        with pytest.raises(PackagingError, match="is not what its digest says"):
            fetch_blob(RegistryClient(server.host), "base/python", wrong, len(layer), tmp_path / "blobs")
    assert not (tmp_path / "cache").exists() and list((tmp_path / "blobs").iterdir()) == []  # no .part either


def test_a_layer_longer_than_declared_is_refused_unread_or_read_to_its_size(tmp_path: Path) -> None:
    layer = _layer(tmp_path)
    digest = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    refused = pytest.raises(PackagingError, match=f"answered {len(layer) + 13:,} bytes for a blob its descriptor "
                                                  f"says is {len(layer):,}")
    with fake_server(Hostile((layer + b"trailing junk", {}), (digest, len(layer)))) as server, refused:
        _scan(server, tmp_path / "cache")
    # chunked (no Content-Length): the declared bytes are read and checked; the rest is never read
    with fake_server(Hostile((lambda: _forever(layer), {}), (digest, len(layer)))) as server:
        assert _scan(server, tmp_path / "cache") == "manylinux_2_36_x86_64"
        path = fetch_blob(RegistryClient(server.host), "base/python", digest, len(layer), tmp_path / "blobs")
    assert path.read_bytes() == layer
    [entry] = (tmp_path / "cache" / "image-bases").iterdir()  # verified: cached
    assert json.loads(entry.read_text()) == {"family": "glibc", "major": 2, "minor": 36}


def test_a_layer_cut_short_is_refused_and_a_pull_tries_again(tmp_path: Path) -> None:
    layer = _layer(tmp_path)
    digest = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    gets: list[int] = []

    def half(method: str, path: str, headers: dict[str, str], fake: Fake) -> Answer:
        if path.endswith(digest):
            gets.append(1)
            return 200, API, iter([layer[:100]] if len(gets) == 1 else [layer])  # the first transfer breaks
        return Hostile((layer, {}), (digest, len(layer)))(method, path, headers, fake)

    with fake_server(half) as server:
        assert fetch_blob(RegistryClient(server.host), "base/python", digest, len(layer),
                          tmp_path / "blobs").read_bytes() == layer
        assert len(gets) == 2
        gets.clear()  # the scan streams the layer: a transfer that breaks is one line (the command is run again)
        with pytest.raises(PackagingError, match=f"ended after 100 of the {len(layer):,} bytes its descriptor "
                                                 "declares; try again"):
            _scan(server, tmp_path / "cache")


def test_a_layer_that_trickles_stops_at_its_time_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTRAIN_NETWORK_TIMEOUT", "0.5")  # the deadline: 1.5 s, plus the size at 256 KiB/s
    layer = _layer(tmp_path)
    digest = f"sha256:{hashlib.sha256(layer).hexdigest()}"

    def trickle() -> Iterator[bytes]:
        for byte in layer:  # a byte every 0.1 s: each read gets something, the whole would take ~30 s
            time.sleep(0.1)
            yield bytes([byte])

    with fake_server(Hostile((trickle, {}), (digest, len(layer)))) as server:
        start = time.monotonic()
        with pytest.raises(PackagingError, match=r"took longer than 2 s to read \([0-9]+ of [0-9,]+ bytes\)"):
            fetch_blob(RegistryClient(server.host), "base/python", digest, len(layer), tmp_path / "blobs")
        assert time.monotonic() - start < 10


def test_a_container_jobs_pull_of_a_layer_that_never_ends_writes_its_declared_size_then_nothing(
        tmp_path: Path) -> None:
    """`vtrain local` of a `trainer.container` job pulls the image's layers into the blob cache: the endless layer
    stops at its declared 4 MiB, fails its digest, and leaves no file (before: written on past the declared size)."""
    from vtrain.errors import BackendError
    from vtrain.jobfile.load import load_config
    from vtrain.local.containers import find_runtime
    from vtrain.local.runner import prepare_images

    if find_runtime(tmp_path / "probe")[0] is None:
        pytest.skip("no OCI runtime here: the pull is the container path's")
    digest = "sha256:" + hashlib.sha256(b"the layer it claims to be").hexdigest()
    with fake_server(Hostile((lambda: _forever(b"\0"), {}), (digest, 4 << 20))) as server:
        job = write_job(tmp_path, f"""
            name: pulled
            trainer: {{container: {{image_uri: "{server.host}/base/python:base", command: [python3]}}}}
            cluster:
              chief: {{machine_type: n1-standard-4}}
            """)
        with pytest.raises(BackendError) as err:
            prepare_images(load_config(job, target="local"), tmp_path / "cache", False, lambda text: None, "always")
    assert str(err.value) == (f"cannot run this job's image in a container here: cannot make the image here: registry "
                              f"{server.host}: blob {digest[:19]} of base/python is not what its digest says (its "
                              f"4,194,304 bytes hash to sha256:bb9f8df61474…, not {digest[:19]}…); refused")
    assert [p.name for p in (tmp_path / "cache" / "image-blobs").iterdir()] == [".in-use"]  # its lock alone


@pytest.mark.parametrize(("descriptor", "said"), [
    ({"digest": "sha256:../../../../etc/passwd", "size": 10}, "its layer 1's digest 'sha256:../../../../etc/passwd' is"
                                                               " not sha256:<64 hex>"),
    ({"digest": "md5:" + "0" * 32, "size": 10}, "is not sha256:<64 hex> (or sha512:<128 hex>)"),
    ({"digest": "sha256:" + "0" * 64, "size": "10"}, "its layer 1's size '10' is not a whole number of bytes"),
    ({"digest": "sha256:" + "0" * 64, "size": -1}, "its layer 1's size '-1' is not a whole number of bytes"),
    ({"digest": "sha256:" + "0" * 64, "size": True}, "its layer 1's size 'True' is not a whole number of bytes"),
    ({"digest": "sha256:" + "0" * 64, "size": MAX_BLOB + 1}, f"declares {MAX_BLOB + 1:,} bytes, over the "
                                                              f"{MAX_BLOB:,} a blob may have; refused unread"),
    ({"digest": "sha256:" + "0" * 64}, "its layer 1's size 'None' is not a whole number of bytes"),
])
def test_a_descriptor_that_lies_about_a_layer_is_one_line_before_any_blob_is_read(descriptor: dict[str, Any],
                                                                                   said: str) -> None:
    hostile = Hostile((b"", {}), ("sha256:" + "0" * 64, 1))
    manifest = json.loads(hostile.manifest)
    manifest["layers"] = [descriptor]
    hostile.manifest = canonical(manifest)
    with fake_server(hostile) as server, pytest.raises(PackagingError) as err:
        read_base(RegistryClient(server.host), parse_reference(f"{server.host}/base/python:base"))
    assert said in str(err.value) and str(err.value).startswith(f"registry {server.host}: the manifest of base image ")
    assert not [s for s in server.seen if "/blobs/" in s.path and "sha256:" + "0" * 64 in s.path]


def test_a_config_that_never_ends_or_declares_too_much_is_bounded(tmp_path: Path) -> None:
    layer = _layer(tmp_path)
    digest = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    honest = Hostile((layer, {}), (digest, len(layer)))
    for first, refused in ((honest.config_body, False), (b"{", True)):  # its declared bytes, then no end
        endless = Hostile((layer, {}), (digest, len(layer)), config=(lambda f=first: _forever(f), honest.config[1]))
        with fake_server(endless) as server:
            if refused:
                with pytest.raises(PackagingError, match=f"is not what its digest says \\(its "
                                                         f"{len(honest.config_body)} bytes hash to"):
                    read_base(RegistryClient(server.host), parse_reference(f"{server.host}/base/python:base"))
            else:
                base = read_base(RegistryClient(server.host), parse_reference(f"{server.host}/base/python:base"))
                assert base.config["config"] == {"Env": ["PYTHON_VERSION=3.11.2"]}
    huge = Hostile((layer, {}), (digest, len(layer)),
                   config=(b"{}", {**honest.config[1], "size": CONFIG_LIMIT + 1}))
    with fake_server(huge) as server, pytest.raises(PackagingError, match="its config's declares"):
        read_base(RegistryClient(server.host), parse_reference(f"{server.host}/base/python:base"))
    assert not [s for s in server.seen if "/blobs/" in s.path]  # refused unread


# --------------------------------------------------------------------------- the CLI, measured

_MEASURE = textwrap.dedent("""
    import atexit, runpy, sys, time
    start = time.monotonic()
    def said():
        peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
        print(f"MEASURED {int(peak.split()[1]) // 1024} {time.monotonic() - start:.1f}", file=sys.stderr)
    atexit.register(said)
    sys.argv = ["vtrain", *sys.argv[1:]]
    runpy.run_module("vtrain", run_name="__main__")
""")


@pytest.mark.slow
def test_package_of_a_base_whose_layer_never_ends_is_one_line_in_bounded_memory_and_time(tmp_path: Path) -> None:
    """`vtrain package` reads the base's C library from its layer: a tar of empty files that never ends (no C
    library in it), its descriptor saying 64 MiB. The scan stops there, says so in one line, and the process's
    peak memory stays what the CLI's imports take (VmHWM: this process's own peak; ru_maxrss would hold the
    forked pytest's too). Before, it ran until killed, growing ~600 MB a minute."""
    digest = "sha256:" + hashlib.sha256(b"the layer it claims to be").hexdigest()
    root = make_trainer(tmp_path / "t")
    (root / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "1"\ndependencies = ["tinyreq"]\n')
    with fake_server(Hostile((_endless_tar, {}), (digest, 64 << 20))) as server:
        job = write_job(tmp_path, f"""
            name: endless
            trainer:
              package: t
              module: trainer.task
              image: {server.host}/base/python:base
              build: {{repository: {server.host}/team/trainer}}
            cluster:
              chief: {{machine_type: n1-standard-4}}
            """)
        done = subprocess.run([sys.executable, "-c", _MEASURE, "package", str(job)], capture_output=True, text=True,
                              timeout=300, cwd=REPO, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                                          "VTRAIN_CACHE_DIR": str(tmp_path / "cache")})
    *lines, measured = done.stderr.splitlines()
    peak, seconds = measured.split()[1:]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[-1].startswith(f"error: registry {server.host}: blob {digest[:19]} of base/python is not what its "
                                "digest says (its 67,108,864 bytes hash to"), done.stderr
    assert int(peak) < 200 and float(seconds) < 60, (peak, seconds)


# --------------------------------------------------------------------------- a real registry


@needs_registry
def test_a_real_registrys_blobs_read_verified_and_a_corrupted_one_refused(registry: Registry,  # noqa: F811
                                                                          tmp_path: Path) -> None:
    push_base(registry.client(), "base/python", [FAKE_LIBC], tmp_path)
    client = registry.client()
    base = read_base(client, parse_reference(f"{registry.host}/base/python:base"))
    [layer] = base.manifest["layers"]
    path = fetch_blob(client, "base/python", layer["digest"], layer["size"], tmp_path / "blobs")
    assert f"sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}" == layer["digest"]
    with client.open_blob("base/python", layer["digest"], layer["size"]) as stream:
        assert stream.read_all() == path.read_bytes() and stream.verified
    # the registry's own storage corrupted under the blob's name: it serves the wrong bytes, same length
    hexdigest = layer["digest"].split(":")[1]
    stored = registry.root / "data/docker/registry/v2/blobs/sha256" / hexdigest[:2] / hexdigest / "data"
    data = bytearray(stored.read_bytes())
    data[-1] ^= 0xFF
    stored.write_bytes(bytes(data))
    with pytest.raises(PackagingError, match=f"blob {layer['digest'][:19]} of base/python is not what its digest"):
        base_platform(base, client, cache=tmp_path / "cache")
    with pytest.raises(PackagingError, match="is not what its digest says"):
        fetch_blob(client, "base/python", layer["digest"], layer["size"], tmp_path / "again")
    assert not (tmp_path / "cache" / "image-bases").exists() and list((tmp_path / "again").iterdir()) == []
