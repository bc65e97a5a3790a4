"""An image's root filesystem on this machine, unpacked once per image digest, for a container to run.

An image is a manifest, a config and layer blobs: a `trainer.build` image as `submit` would push it
(:func:`vtrain.trainer.image.build.build_image`, the same call: its layers built here, its base's
layers pulled from the base's registry), or a `trainer.container` image pulled from the registry
it names. Blobs are kept by digest (``CACHE/image-blobs``, each checked against its digest as it is
read); the image is laid out as an OCI image layout and ``umoci raw unpack`` (``--rootless`` when not
root) applies its layers in order, whiteouts, owners and modes included, into
``CACHE/containers/rootfs/DIGEST/rootfs`` beside the image's config (``image.json``). A second run
of the same image unpacks nothing; a half-done unpack is done again.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtrain.errors import BackendError
from vtrain.foreign import printable

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
_DOCKER_LAYERS = {"application/vnd.docker.image.rootfs.diff.tar.gzip": OCI_LAYER_GZIP,
                  "application/vnd.docker.image.rootfs.diff.tar": OCI_LAYER}
_DONE = ".vtrain-unpacked"


@dataclass(frozen=True)
class Unpacked:
    """An image ready to run: its rootfs (shared, read-only for containers) and its config."""

    uri: str
    digest: str  # of the manifest as the registry has it (or as `submit` would push it)
    rootfs: Path
    config: dict[str, Any]  # the OCI image config's "config": Entrypoint, Cmd, Env, WorkingDir, User

    @property
    def env(self) -> dict[str, str]:
        return dict(str(item).partition("=")[::2] for item in self.config.get("Env") or [])

    @property
    def workdir(self) -> str:
        """The image's WorkingDir, made absolute and normal (a registry's answer: `..` cannot climb out)."""
        return posixpath.normpath("/" + str(self.config.get("WorkingDir") or "/"))

    def inside(self, path: str) -> Path | None:
        """`path` of the image as a path here, None when it resolves outside the rootfs (an absolute or climbing
        symlink in the image would otherwise point at this machine's files)."""
        root = self.rootfs.resolve()
        found = (root / posixpath.normpath("/" + path).lstrip("/")).resolve()
        return found if found == root or found.is_relative_to(root) else None

    def argv(self, pool: Mapping[str, Any]) -> list[str]:
        """What the container runs, as Vertex (Kubernetes) reads a containerSpec: `command` replaces the
        image's Entrypoint and drops its Cmd; `args` replace the Cmd."""
        spec = pool.get("containerSpec") or {}
        command, args = list(spec.get("command") or []), list(spec.get("args") or [])
        if command:
            return command + args
        return self._words("Entrypoint") + (args or self._words("Cmd"))

    def _words(self, key: str) -> list[str]:
        value = self.config.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise BackendError(f"image {self.uri}: its config's {key} is not a list of strings")
        return list(value)

    def user(self) -> tuple[int, int]:
        """The image's User as uid:gid; names looked up in the rootfs's /etc/passwd and /etc/group."""
        raw = str(self.config.get("User") or "")
        name, _, group = raw.partition(":")
        passwd = self.inside("/etc/passwd")
        uid = _lookup(passwd, name, 2) if name else 0
        gid = _lookup(self.inside("/etc/group"), group, 2) if group else _primary_gid(passwd, uid)
        return uid, gid


def _table(path: Path | None) -> list[str]:
    """/etc/passwd or /etc/group of the image, read bounded (a regular file of the rootfs only)."""
    from vtrain.userpaths import read_bounded

    if path is None:
        return []
    try:
        return read_bounded(path, 4 << 20).decode(errors="replace").splitlines()
    except OSError:
        return []


def _lookup(table: Path | None, name: str, column: int) -> int:
    if name.isascii() and name.isdigit():
        if len(name) > 10 or int(name) > 0xFFFFFFFF:  # a uid is 32 bits (and int() of 5,000 digits raises)
            raise BackendError(f"the image's User {printable(name, limit=40)} is not a uid or gid (0 to 4294967295)")
        return int(name)
    for line in _table(table):
        fields = line.split(":")
        if len(fields) > column and fields[0] == name and fields[column].isdigit():
            return int(fields[column])
    raise BackendError(f"the image's User {printable(name)} is not in its {table.name if table else 'rootfs'}")


def _primary_gid(passwd: Path | None, uid: int) -> int:
    for line in _table(passwd):
        fields = line.split(":")
        if len(fields) > 3 and fields[2] == str(uid) and fields[3].isdigit():
            return int(fields[3])
    return 0 if uid == 0 else uid


def cached(cache: Path, uri: str, digest: str) -> Unpacked | None:
    """The image unpacked by an earlier run, if any."""
    root = _root(cache, digest)
    if not (root / _DONE).is_file():
        return None
    try:
        config = json.loads((root / "image.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Unpacked(uri, digest, root / "rootfs", dict(config.get("config") or {}))


def _root(cache: Path, digest: str) -> Path:
    from vtrain.userpaths import cache_folder

    return cache_folder("containers", cache) / "rootfs" / digest.replace(":", "-")


def unpack(cache: Path, uri: str, digest: str, manifest: Mapping[str, Any], config: bytes,
           blobs: Mapping[str, Path], *, rootless: bool, notice: Callable[[str], None] = lambda text: None) -> Unpacked:
    """The image's layers applied in order by umoci into CACHE/containers/rootfs/DIGEST (once)."""
    found = cached(cache, uri, digest)
    if found is not None:
        return found
    root = _root(cache, digest)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{digest[7:19]}-", dir=root.parent))
    try:
        layout = tmp / "layout"
        _write_layout(layout, manifest, config, blobs)
        notice(f"image {uri}: unpacking {len(manifest.get('layers') or [])} layer(s) (once per image digest)")
        # `raw unpack`: the rootfs alone. `umoci unpack` would also write a bundle's config and an mtree manifest
        # of every file (for a later repack), which took more than half its time: 8.9 s against 3.3 s for a
        # 270 MB Python image here, the same tree, owners and modes.
        argv = ["umoci", "raw", "unpack", *(["--rootless"] if rootless else []), "--image", f"{layout}:image",
                str(tmp / "rootfs")]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=3600, check=False)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:300]
            raise BackendError(f"umoci could not unpack image {uri}: {why}")
        _mkdir(root)
        try:
            os.replace(tmp / "rootfs", root / "rootfs")
        except OSError:  # a whole tree is there already (another run's, placed as atomically): use it
            if not (root / "rootfs").is_dir():
                raise
        (root / "image.json").write_bytes(config)
        (root / _DONE).write_text(uri + "\n", encoding="utf-8")
    except OSError as err:
        raise BackendError(f"cannot unpack image {uri} into {root}: {err}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    notice(f"image {uri}: unpacked in {root / 'rootfs'}")
    return Unpacked(uri, digest, root / "rootfs", dict(json.loads(config).get("config") or {}))


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_layout(layout: Path, manifest: Mapping[str, Any], config: bytes, blobs: Mapping[str, Path]) -> None:
    """An OCI image layout of one image tagged `image`: blobs linked (copied across file systems), the manifest
    rewritten with OCI media types (umoci reads OCI; a Docker v2 schema 2 image has the same content)."""
    import hashlib

    store = _mkdir(layout / "blobs" / "sha256")
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}', encoding="utf-8")

    def put(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        (store / digest).write_bytes(data)
        return f"sha256:{digest}"

    layers = []
    for descriptor in manifest.get("layers") or []:
        digest = str(descriptor["digest"])
        target = store / digest.split(":", 1)[1]
        if not target.exists():
            try:
                os.link(blobs[digest], target)
            except OSError:
                shutil.copyfile(blobs[digest], target)
        kind = str(descriptor.get("mediaType") or OCI_LAYER_GZIP)
        layers.append({"mediaType": _DOCKER_LAYERS.get(kind, kind), "digest": digest, "size": int(descriptor["size"])})
    config_digest = put(config)
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": layers,
                       "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)}}).encode()
    index = {"schemaVersion": 2, "manifests": [{"mediaType": OCI_MANIFEST, "digest": put(body), "size": len(body),
                                                "annotations": {"org.opencontainers.image.ref.name": "image"}}]}
    (layout / "index.json").write_text(json.dumps(index), encoding="utf-8")


def fetch_blob(client: Any, repository: str, digest: str, size: int, into: Path) -> Path:
    """A blob from the registry into the blob cache (once): the registry client's bounded reader, its bytes
    checked against its digest before the file is there (:meth:`~vtrain.trainer.image.registry.RegistryClient.
    save_blob`). A cached one is trusted by its name only when its size is the declared one."""
    path = into / digest.replace(":", "-")
    try:
        if path.is_file() and not path.is_symlink() and path.stat().st_size == size:
            return path
    except OSError:
        pass
    return Path(client.save_blob(repository, digest, size, path))


__all__ = ["Unpacked", "cached", "fetch_blob", "unpack"]
