"""The image's config and manifest, built on the base image's, and the tag that names them.

Nothing here touches the network. The base's manifest and config come in as parsed JSON (the
registry client fetches them: only the config blob of the base is read, never a base layer);
out come the new config (the base's, with vtrain's layers' diff_ids and history appended, the
job's environment appended to the base's, ``PYTHONPATH`` naming vtrain's directories,
``WorkingDir``, ``Entrypoint`` ``python3 -m MODULE`` and ``Cmd`` the arguments) and a manifest of
the base's flavour (OCI or Docker v2 schema 2) listing the base's layers and then vtrain's.

:func:`image_tag` is a hash of the inputs (the base reference as written, the trainer's and the
runtime's content hashes, the requirement list, the entry point, environment and platform), so
``vtrain render`` can show ``REPOSITORY:TAG`` offline. A base named by a moving tag does not
change the hash when it moves: pin the base by digest for an image that is truly reproducible.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from vtrain.constants import VERSION
from vtrain.errors import PackagingError
from vtrain.trainer.image.layers import DEPS_DIR, RUNTIME_DIR, TRAINER_DIR, Layer, source_date_epoch
from vtrain.trainer.image.settings import ImageSettings
from vtrain.trainer.image.wheels import normalized
from vtrain.trainer.select import hash_entries

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
MANIFESTS = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEXES = (OCI_INDEX, DOCKER_LIST)
#: Bumped when what vtrain puts in an image changes shape, so that old tags are not reused.
LAYOUT_VERSION = "2"  # 2: requirements in a site dir (/opt/vtrain/deps/lib/pythonX.Y/site-packages)

_LABEL = re.compile(r"(?:^|[./_-])python[._-]?version$", re.IGNORECASE)
_VERSION = re.compile(r"v?(3\.[0-9]+)(?:\.[0-9]+)?(?:[a-z]+[0-9]*)?")


@dataclass(frozen=True)
class ImageSpec:
    """What a trainer image is made of, besides the trainer's files."""

    base: str  # the base image reference, e.g. us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest
    repository: str  # where the image goes, e.g. us-central1-docker.pkg.dev/PROJECT/REPO/trainer
    module: str  # run as `python3 -m MODULE`
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    requirements: tuple[str, ...] = ()
    dependencies: bool = True  # False: install exactly the requirements (pip --no-deps)
    python_version: str | None = None  # only when the base's config does not say it
    platform: str | None = None  # the newest wheel platform tag the base runs; None: read from the base's libc
    constraints: tuple[str, ...] = ()  # -c lines: versions pip may pick, nothing installed for them
    provided: tuple[str, ...] = ()  # what the base already has (prebuilt: tensorflow==2.NN.*): not reinstalled
    python: str = "python3"
    workdir: str = f"/{TRAINER_DIR}"
    index_args: tuple[str, ...] = field(default=(), compare=False)  # pip's index options; not part of the tag
    settings: ImageSettings = field(default=ImageSettings(), compare=False)  # where errors say to set things
    arch: str = "amd64"  # the base's variant to build on (OCI name): arm64 for Arm machines (A4X)


def image_tag(spec: ImageSpec, trainer_digest: str, runtime_digest: str, *, src_layout: bool = False) -> str:
    """The tag: a hash of everything that goes into the image. Pure: no network, no file read."""
    inputs = {
        "layout": LAYOUT_VERSION,
        "base": spec.base.strip(),
        "trainer": trainer_digest,
        "runtime": runtime_digest,
        "requirements": normalized(spec.requirements),
        "dependencies": spec.dependencies,
        "python": spec.python_version or "",
        "platform": spec.platform or "",
        "constraints": normalized(spec.constraints),
        "provided": normalized(spec.provided),
        "entrypoint": [spec.python, "-m", spec.module, *spec.args],
        "env": [list(pair) for pair in spec.env],
        "workdir": spec.workdir,
        "src": src_layout,
        **({"arch": spec.arch} if spec.arch != "amd64" else {}),  # amd64 tags stay what they were
    }
    return hash_entries([("image", json.dumps(inputs, sort_keys=True).encode())])


def pick_platform(index: dict[str, Any], image: str, os_name: str = "linux", arch: str = "amd64") -> dict[str, Any]:
    """The manifest descriptor for os/arch in a manifest list or OCI index."""
    for entry in index.get("manifests", []):
        platform = entry.get("platform") or {}
        if platform.get("os") == os_name and platform.get("architecture") == arch:
            return dict(entry)
    have = sorted({f"{(e.get('platform') or {}).get('os')}/{(e.get('platform') or {}).get('architecture')}"
                   for e in index.get("manifests", [])})
    raise PackagingError(f"base image {image} has no {os_name}/{arch} variant (it has: {', '.join(have) or 'none'})")


def python_version(config: dict[str, Any], image: str, override: str | None = None, *,
                   setting: str = ImageSettings.python_version) -> str:
    """MAJOR.MINOR of the base's Python, from its config: env PYTHON_VERSION, else a python-version
    label; `override` (the job's say) wins. Never guessed: unknown is a one-line error naming `setting`."""
    if override:
        found = _VERSION.fullmatch(override.strip())
        if not found:
            raise PackagingError(f"python version {override!r} is not MAJOR.MINOR such as 3.10")
        return found.group(1)
    inner = config.get("config") or {}
    for item in inner.get("Env") or []:
        name, _, value = item.partition("=")
        if name == "PYTHON_VERSION" and (found := _VERSION.fullmatch(value.strip())):
            return found.group(1)
    for name, value in sorted((inner.get("Labels") or {}).items()):
        if _LABEL.search(name) and (found := _VERSION.fullmatch(str(value).strip())):
            return found.group(1)
    raise PackagingError(f"cannot tell which Python base image {image} has: its config sets no PYTHON_VERSION and "
                         f"no python-version label; set {setting} (e.g. 3.10)")


def _merge_env(base: list[str], env: Sequence[tuple[str, str]], pythonpath: list[str], *,
               deps: bool = False) -> list[str]:
    values: dict[str, str] = {}
    for item in base:
        name, _, value = item.partition("=")
        values[name] = value
    for name, value in env:
        values.pop(name, None)
        values[name] = value
    earlier = values.pop("PYTHONPATH", "")
    values["PYTHONPATH"] = ":".join([*pythonpath, *([earlier] if earlier else [])])
    if deps:
        values.pop("PYTHONUSERBASE", None)
        values["PYTHONUSERBASE"] = f"/{DEPS_DIR}"  # its user site is the requirements' site dir (.pth files work)
        path = values.pop("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        values["PATH"] = f"/{DEPS_DIR}/bin:{path}"
    return [f"{name}={value}" for name, value in values.items()]


def python_path(src_layout: bool = False, python_version: str | None = None) -> list[str]:
    """The image's PYTHONPATH: the trainer, vtrain's runtime, and (with the requirements' Python version)
    their site dir, listed too so that it is found where user site dirs are off (a venv base, ``-s``)."""
    from vtrain.trainer.image.wheels import site_dir

    trainer = [f"/{TRAINER_DIR}/src"] if src_layout else [f"/{TRAINER_DIR}"]
    deps = [f"/{site_dir(python_version)}"] if python_version else []
    return [*trainer, f"/{RUNTIME_DIR}", *deps]


_HISTORY = {
    "trainer": f"vtrain: the trainer's files at /{TRAINER_DIR}",
    "runtime": f"vtrain: vtrain's runtime at /{RUNTIME_DIR}",
    "requirements": f"vtrain: the requirements' wheels in the site dir of PYTHONUSERBASE=/{DEPS_DIR}",
    "vtrain": f"vtrain: vtrain's own files in the site dir of PYTHONUSERBASE=/{DEPS_DIR} (a launcher image)",
    "job": "vtrain: the job file's folder at its absolute path (a launcher image)",
}


def created(epoch: int | None = None) -> str:
    when = source_date_epoch() if epoch is None else epoch
    return datetime.fromtimestamp(when, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def image_config(base_config: dict[str, Any], spec: ImageSpec, layers: Sequence[Layer], *,
                 src_layout: bool = False, epoch: int | None = None, python_version: str | None = None) -> dict[
                     str, Any]:
    """The new image config: the base's with vtrain's layers, environment and entry point. With a
    requirements layer, `python_version` names its site dir (PYTHONUSERBASE and PYTHONPATH)."""
    config: dict[str, Any] = json.loads(json.dumps(base_config))  # a deep copy: the base's stays as read
    inner = dict(config.get("config") or {})
    deps = any(layer.role == "requirements" for layer in layers)
    version = python_version or spec.python_version
    if deps and not version:
        raise ValueError("a requirements layer needs the image's Python version")
    inner["Env"] = _merge_env(list(inner.get("Env") or []), spec.env,
                              python_path(src_layout, version if deps else None), deps=deps)
    inner["WorkingDir"] = spec.workdir
    inner["Entrypoint"] = [spec.python, "-m", spec.module]
    if spec.args:
        inner["Cmd"] = list(spec.args)
    else:
        inner.pop("Cmd", None)  # the base's CMD (`python3`, `bash`) would become the trainer's arguments
    config["config"] = inner
    stamp = created(epoch)
    config["created"] = stamp
    rootfs = dict(config.get("rootfs") or {"type": "layers"})
    rootfs["diff_ids"] = [*(rootfs.get("diff_ids") or []), *(layer.diff_id for layer in layers)]
    config["rootfs"] = rootfs
    history = list(config.get("history") or [])
    history += [{"created": stamp, "created_by": _HISTORY.get(layer.role, f"vtrain: {layer.role}"),
                 "comment": f"vtrain {VERSION}"} for layer in layers]
    config["history"] = history
    config.setdefault("os", "linux")
    config.setdefault("architecture", "amd64")
    return config


def canonical(document: dict[str, Any]) -> bytes:
    """The bytes a config or manifest is pushed as: sorted keys, no spaces, so equal inputs hash equal."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def image_manifest(base_manifest: dict[str, Any], config_digest: str, config_size: int,
                   layers: Sequence[Layer]) -> dict[str, Any]:
    """A manifest of the base's flavour: its layers, then vtrain's; config as given."""
    docker = base_manifest.get("mediaType") == DOCKER_MANIFEST
    layer_type = DOCKER_LAYER if docker else None
    return {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
        "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG, "digest": config_digest,
                   "size": config_size},
        "layers": [*base_manifest.get("layers", []), *(layer.descriptor(layer_type) for layer in layers)],
    }
