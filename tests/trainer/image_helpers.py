"""Real parts for the image tests: a CNCF distribution registry on 127.0.0.1 (``docker-registry
serve``, with or without htpasswd auth), a base image pushed to it, trainers, wheels and sdists.
Tests get a registry from the `make_registry` / `registry` / `auth_registry` fixtures (tests/conftest.py)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import requests

from vtrain.trainer.image.config import (
    DOCKER_CONFIG,
    DOCKER_LAYER,
    DOCKER_MANIFEST,
    OCI_CONFIG,
    OCI_MANIFEST,
    canonical,
)
from vtrain.trainer.image.layers import Entry, write_layer
from vtrain.trainer.image.registry import RegistryClient

REGISTRY_BIN = shutil.which("docker-registry")
needs_registry = pytest.mark.skipif(
    REGISTRY_BIN is None, reason="docker-registry (the CNCF distribution registry) is not installed: "
    "apt-get install docker-registry (.ci/run does)")
USER, PASSWORD = "vtrain", "s3cret-pass"
#: A base's C library as vtrain reads it (its banner): glibc 2.36, so wheels up to manylinux_2_36 fit.
FAKE_LIBC: Entry = ("usr/lib/x86_64-linux-gnu/libc.so.6",
                    b"\x7fELF...GNU C Library (Debian GLIBC 2.36-9+deb12u4) stable release version 2.36.\n", False)


@dataclass
class Registry:
    host: str  # 127.0.0.1:PORT
    root: Path
    process: subprocess.Popen[bytes]

    def client(self, **kwargs: object) -> RegistryClient:
        return RegistryClient(self.host, **kwargs)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _htpasswd(path: Path) -> None:
    tool = shutil.which("htpasswd")
    if tool is None:
        pytest.skip("htpasswd (apache2-utils) is not installed: the registry's htpasswd auth needs a bcrypt line")
    subprocess.run([tool, "-Bbc", str(path), USER, PASSWORD], check=True, capture_output=True)


def start_registry(root: Path, *, auth: bool = False, token: tuple[str, Path] | None = None) -> Registry:
    """`docker-registry serve` on a free loopback port; returns once /v2/ answers. `auth`: htpasswd
    (basic) auth; `token`: (realm, rootcertbundle) of a token service (Bearer auth). The port is picked
    before the registry binds it, so a port another process (a parallel test worker) took in between
    is tried again with a new one."""
    root.mkdir(parents=True, exist_ok=True)
    if auth:
        _htpasswd(root / "htpasswd")
    for _ in range(3):
        port = free_port()
        lines = ["version: 0.1", "log:", "  level: error", "  accesslog:", "    disabled: true", "storage:",
                 "  filesystem:", f"    rootdirectory: {root / 'data'}", "  delete:", "    enabled: true", "http:",
                 f"  addr: 127.0.0.1:{port}", "  secret: vtrain-test-secret"]
        if auth:
            lines += ["auth:", "  htpasswd:", "    realm: vtrain-test", f"    path: {root / 'htpasswd'}"]
        if token:
            lines += ["auth:", "  token:", f"    realm: {token[0]}", "    service: vtrain-test-registry",
                      "    issuer: vtrain-test-issuer", f"    rootcertbundle: {token[1]}"]
        config = root / "config.yml"
        config.write_text("\n".join(lines) + "\n")
        log = open(root / "registry.log", "wb")  # noqa: SIM115 (kept open for the process's life)
        process = subprocess.Popen([str(REGISTRY_BIN), "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if process.poll() is not None:
                said = (root / "registry.log").read_text()[-2000:]
                if "address already in use" in said:
                    break
                raise RuntimeError(f"docker-registry exited: {said}")
            try:
                answer = requests.get(f"http://127.0.0.1:{port}/v2/", timeout=1)
            except requests.RequestException:
                time.sleep(0.05)
                continue
            if answer.status_code in (200, 401) and process.poll() is None:
                return Registry(host=f"127.0.0.1:{port}", root=root, process=process)
            time.sleep(0.05)
        else:
            process.kill()
            raise RuntimeError("docker-registry did not answer within 15 s")
    raise RuntimeError("docker-registry found its port taken three times")


def stop_registry(registry: Registry) -> None:
    registry.process.terminate()
    try:
        registry.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        registry.process.kill()
        registry.process.wait()


# --- images, trainers, distributions ----------------------------------------------------------


def push_base(client: RegistryClient, repository: str, entries: list[Entry], work: Path, *,
              env: list[str] | None = None, tag: str = "base", docker: bool = False,
              arch: str = "amd64", user: str | None = None) -> dict[str, object]:
    """Push a one-layer base image (written with vtrain's layer writer), OCI or Docker v2 schema 2;
    returns its config. `user`: its config's User."""
    layer = write_layer(entries, work / f"base-{repository.replace('/', '_')}.tar.gz", role="base")
    config = {"architecture": arch, "os": "linux",
              "config": {"Env": env if env is not None else ["PATH=/usr/local/bin:/usr/bin:/bin",
                                                               "PYTHON_VERSION=3.11.2"],
                         "Cmd": ["python3"], **({"User": user} if user is not None else {})},
              "rootfs": {"type": "layers", "diff_ids": [layer.diff_id]},
              "history": [{"created_by": "test base"}]}
    body = canonical(config)
    digest = f"sha256:{hashlib.sha256(body).hexdigest()}"
    client.upload(repository, layer.digest, layer.size, partial(Path.open, layer.path, "rb"))
    client.upload(repository, digest, len(body), partial(io.BytesIO, body))
    kind = DOCKER_MANIFEST if docker else OCI_MANIFEST
    manifest = {"schemaVersion": 2, "mediaType": kind,
                "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG, "digest": digest, "size": len(body)},
                "layers": [layer.descriptor(DOCKER_LAYER if docker else None)]}
    client.put_manifest(repository, tag, kind, canonical(manifest))
    return config


def make_trainer(root: Path, *, body: str = "print('trained')\n") -> Path:
    (root / "trainer").mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "demo-trainer"\nversion = "0.1"\n')
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text(body)
    return root


def make_wheel(directory: Path, name: str = "tinyreq", version: str = "1.0", requires: tuple[str, ...] = (),
               extra: dict[str, str] | None = None) -> Path:
    """A pure-Python wheel, written by hand: a zip with the module, METADATA, WHEEL and RECORD (and
    `extra` files, such as a .pth file, at the wheel's root)."""
    directory.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    files = {
        **(extra or {}),
        f"{name}.py": f"VALUE = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: vtrain-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0)), text)
    return wheel


def make_sdist(directory: Path, name: str = "onlysdist", version: str = "1.0") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{name}-{version}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        data = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
        info = tarfile.TarInfo(f"{name}-{version}/PKG-INFO")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out


def python_rootfs_entries() -> list[Entry] | None:
    """This machine's /usr/bin/python3.11, the libraries ldd lists and the stdlib modules a bare start
    and vtrain.runtime import (os.py as the prefix landmark): a base that can run ``python3.11 -m``; None without it."""
    python = Path("/usr/bin/python3.11")
    if not python.is_file() or shutil.which("ldd") is None:
        return None
    # what a start and `from vtrain import runtime` import (the runtime from this checkout)
    probe = ("import sys, runpy, json, os, importlib.util, encodings.utf_8, encodings.latin_1, encodings.ascii\n"
             "import vtrain.runtime\n"
             "print(json.dumps(sorted({m.__file__ for m in list(sys.modules.values()) "
             "if getattr(m, '__file__', None)})))")
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    stdlib = [f for f in json.loads(done.stdout) if f.startswith("/usr/lib/python3.11/")]
    files = {Path(f) for f in stdlib} | {Path("/usr/lib/python3.11/os.py")}
    entries: list[Entry] = [("usr/bin/python3.11", python, True)]
    for line in subprocess.run(["ldd", str(python)], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 3 else parts[0]
        if path.startswith("/") and os.path.exists(path):
            entries.append((path.lstrip("/"), Path(path), os.access(path, os.X_OK)))  # ld.so must be executable
    entries += [(str(f).lstrip("/"), f, False) for f in sorted(files) if f.is_file()]
    return entries


def unpack_bundle(layout: Path, tag: str, bundle: Path, timeout: float = 300) -> Path:
    """An OCI image layout's image as a runtime bundle, as `umoci unpack` makes it (bundle/rootfs and umoci's own
    reading of the image config in bundle/config.json), without the mtree manifest of every file `umoci unpack`
    also writes for a later repack (more than half its time). Returns the rootfs."""
    rootfs = bundle / "rootfs"
    bundle.mkdir(parents=True, exist_ok=True)
    image = f"{layout}:{tag}"
    subprocess.run(["umoci", "raw", "unpack", "--image", image, str(rootfs)], check=True, capture_output=True,
                   timeout=timeout)
    subprocess.run(["umoci", "raw", "runtime-config", "--image", image, "--rootfs", str(rootfs),
                    str(bundle / "config.json")], check=True, capture_output=True, timeout=timeout)
    return rootfs


#: What the stand-in for a prebuilt training image says it is: a test reads it from inside a replica.
STANDIN_OS_RELEASE = b'PRETTY_NAME="vtrain stand-in for a Vertex AI prebuilt training image"\nID=vtrain-standin\n'


def prebuilt_standin_entries() -> list[Entry] | None:
    """A stand-in for a prebuilt training image, from this machine's files, offline: /usr/bin/python3.11 (and
    python3) with its whole standard library and the libraries its extension modules load, pip, setuptools and
    wheel (as the prebuilt images have them: they pip-install a job's packages) and an /etc/os-release of its
    own. None where this machine lacks Debian's python3.11."""
    import sysconfig

    base = python_rootfs_entries()
    if base is None:
        return None
    python = Path("/usr/bin/python3.11")
    stdlib = Path("/usr/lib/python3.11")
    entries: dict[str, Entry] = {path: (path, source, executable) for path, source, executable in base}
    entries["usr/bin/python3"] = ("usr/bin/python3", python, True)
    libraries: set[str] = set()
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", "test", "idlelib", "tkinter", "turtledemo")]
        for name in files:
            path = Path(root) / name
            if name == "EXTERNALLY-MANAGED" or not path.is_file() or path.is_symlink():
                continue  # PEP 668's marker would stop pip; a prebuilt image's Python takes pip installs
            entries[str(path).lstrip("/")] = (str(path).lstrip("/"), path, False)
            if name.endswith(".so"):
                libraries.add(str(path))
    for library in sorted(libraries):
        listed = subprocess.run(["ldd", library], capture_output=True, text=True, check=False).stdout
        for line in listed.splitlines():
            parts = line.split()
            found = parts[2] if "=>" in parts and len(parts) > 3 else ""
            if found.startswith("/") and os.path.isfile(found):
                entries.setdefault(found.lstrip("/"), (found.lstrip("/"), Path(found), False))
    here = Path(sysconfig.get_paths()["purelib"])
    names = ("pip", "setuptools", "_distutils_hack", "wheel", "pkg_resources", "packaging")
    for item in sorted(here.iterdir()):
        keep = item.name in names or item.name == "distutils-precedence.pth" or (
            item.name.endswith(".dist-info") and item.name.split("-")[0] in names)
        if not keep:
            continue
        files = [item] if item.is_file() else [p for p in item.rglob("*")
                                               if p.is_file() and "__pycache__" not in p.parts]
        for path in files:
            inside = f"usr/lib/python3/dist-packages/{path.relative_to(here).as_posix()}"
            entries[inside] = (inside, path, False)
    entries["etc/os-release"] = ("etc/os-release", STANDIN_OS_RELEASE, False)
    return list(entries.values())
