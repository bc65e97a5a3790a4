"""Build a trainer image on a base image and push it: the whole step, and its offline plan.

:func:`planned_image` names the image (``REPOSITORY:TAG``) from the files alone: ``vtrain render``
can show it with no network. :func:`build_image` reads the base's manifest and config (never a
base layer), checks the trainer as ``vtrain package`` does (entry module, secrets), writes the
layers (trainer, runtime, requirements from the cache or pip) and the config and manifest.
:func:`push_image` sends what the target lacks, in an order that never leaves a manifest naming a
missing blob: base layers first (already there, mounted from the base's repository when the base
is on the same registry, else streamed from the base's registry to the target), vtrain's layers,
the config, and the manifest last.
"""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from vtrain.errors import PackagingError
from vtrain.trainer.image.answers import MAX_BLOB, digest_problem, size_problem
from vtrain.trainer.image.auth import default_credentials
from vtrain.trainer.image.config import (
    INDEXES,
    MANIFESTS,
    ImageSpec,
    canonical,
    image_config,
    image_manifest,
    image_tag,
    pick_platform,
    python_version,
)
from vtrain.trainer.image.layers import (
    Layer,
    runtime_digest,
    runtime_layer,
    scan_trainer,
    src_layout,
    trainer_layer,
)
from vtrain.trainer.image.libc import arch_of, platform_tags, read_libc
from vtrain.trainer.image.mirrors import pull_client
from vtrain.trainer.image.reference import ImageRef, parse_reference, parse_repository
from vtrain.trainer.image.registry import CONFIG_LIMIT, Credentials, RegistryClient
from vtrain.trainer.image.requirements import declared_requirements
from vtrain.trainer.image.settings import ImageSettings
from vtrain.trainer.image.wheels import requirements_layer
from vtrain.trainer.packaging import check_module, refuse_credentials, scan_package
from vtrain.trainer.select import Scan


@dataclass(frozen=True)
class BaseImage:
    ref: ImageRef
    media_type: str
    manifest: dict[str, Any]
    config: dict[str, Any]
    digest: str  # of the platform's manifest


@dataclass
class BuiltImage:
    spec: ImageSpec
    target: ImageRef  # repository:tag
    base: BaseImage
    layers: list[Layer]
    config: bytes
    manifest: bytes
    media_type: str
    python_version: str

    @property
    def digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.manifest).hexdigest()}"

    @property
    def config_digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.config).hexdigest()}"


@dataclass
class Pushed:
    """What a push did: the image by tag and digest, and each blob's fate."""

    image: str  # REPOSITORY:TAG@DIGEST
    digest: str
    sent: int  # blob bytes sent by the target's client (copied base layers included)
    blobs: list[dict[str, object]] = field(default_factory=list)  # role, digest, size, action

    def layer_bytes(self, *roles: str) -> int:
        """Bytes sent for blobs of these roles (all when none given)."""
        return sum(int(b["size"]) for b in self.blobs  # type: ignore[call-overload]
                   if b["action"] in ("uploaded", "copied") and (not roles or b["role"] in roles))


def planned_image(spec: ImageSpec, package_dir: Path, *, skip: Iterable[Path] = ()) -> str:
    """``REPOSITORY:TAG`` the image will have: reads the trainer's files (the sdist's, as
    :func:`~vtrain.trainer.packaging.scan_package` selects them), builds and sends nothing."""
    check_names(spec)
    return image_name(spec, scan_package(package_dir, skip=skip))


def check_names(spec: ImageSpec) -> None:
    """The target repository and the base are image references (PackagingError, one line, if not)."""
    parse_repository(spec.repository)
    parse_reference(spec.base, what="base image")


def image_name(spec: ImageSpec, scan: Scan) -> str:
    """``REPOSITORY:TAG`` of the image on `spec` for the trainer files of `scan` (hashed)."""
    target = parse_repository(spec.repository)
    return str(target.with_tag(image_tag(spec, scan.digest, runtime_digest(), src_layout=src_layout(scan))))


def read_base(client: RegistryClient, ref: ImageRef, os_name: str = "linux", arch: str = "amd64") -> BaseImage:
    """The base's manifest for os/arch and its config; a missing image is one line."""
    found = client.manifest(ref.repository, ref.reference)
    if found is None:
        raise PackagingError(f"base image {ref} not found: the registry has no manifest {ref.reference!r} in "
                             f"repository {ref.repository!r}")
    kind, body, digest = found
    document = _json(body, f"the manifest of base image {ref}")
    kind = kind if kind in (*MANIFESTS, *INDEXES) else str(document.get("mediaType") or "")
    if kind in INDEXES or "manifests" in document:
        entry = pick_platform(document, str(ref), os_name, arch)
        found = client.manifest(ref.repository, str(entry["digest"]))
        if found is None:
            raise PackagingError(f"base image {ref}: its {os_name}/{arch} manifest {entry['digest']} is missing")
        kind, body, digest = found
        document = _json(body, f"the manifest of base image {ref}")
        kind = kind if kind in MANIFESTS else str(document.get("mediaType") or entry.get("mediaType") or "")
    if kind not in MANIFESTS:
        raise PackagingError(f"base image {ref}: manifest type {kind or 'unknown'!r} is neither OCI nor Docker v2 "
                             "schema 2")
    document.setdefault("mediaType", kind)
    check_descriptors(document, client.registry, f"the manifest of base image {ref}")
    config = _json(client.blob(ref.repository, document["config"]["digest"], document["config"]["size"]),
                   f"the config of base image {ref}")
    return BaseImage(ref=ref, media_type=kind, manifest=document, config=config, digest=digest)


def check_descriptors(manifest: dict[str, Any], registry: str, what: str) -> None:
    """The config and each layer of an image manifest (a registry's answer) name a digest vtrain can check and
    a size it reads (:func:`~vtrain.trainer.image.registry.size_problem`): what every reader of its blobs relies
    on. One PackagingError line for the first that does not."""
    layers = manifest.get("layers")
    if not isinstance(layers, list):
        raise PackagingError(f"registry {registry}: {what} has no list of layers")
    named = [("config", manifest.get("config")), *((f"layer {i + 1}", d) for i, d in enumerate(layers))]
    for where, descriptor in named:
        if not isinstance(descriptor, dict):
            raise PackagingError(f"registry {registry}: {what}: its {where} is not a descriptor")
        bad = digest_problem(descriptor.get("digest")) or size_problem(
            descriptor.get("size"), CONFIG_LIMIT if where == "config" else MAX_BLOB)
        if bad:
            raise PackagingError(f"registry {registry}: {what}: its {where}'s {bad}")


def base_platform(base: BaseImage, client: RegistryClient, *, cache: Path | None = None,
                  setting: str = ImageSettings.platform) -> str:
    """The newest wheel platform tag `base` runs, read from its C library (its layers, bottom-up, until
    one has it; cached by its config digest). `setting`: where to state it when it cannot be read."""
    layers = [(str(d.get("mediaType", "")), str(d["digest"]), partial(client.open_blob, base.ref.repository,
                                                                       str(d["digest"]), int(d["size"])))
              for d in base.manifest.get("layers", [])]
    found = read_libc(layers, str(base.ref), str(base.manifest["config"]["digest"]), cache=cache, setting=setting)
    return found.tag(arch_of(base.config))


def _json(body: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise PackagingError(f"{what} is not a JSON object")
    return data


def build_image(spec: ImageSpec, package_dir: Path, out_dir: Path, base_client: RegistryClient, *,
                allow_credentials: bool = False, cache: Path | None = None, refresh: bool = False,
                skip: Iterable[Path] = (), scan: Scan | None = None) -> BuiltImage:
    """Everything the push needs, on disk under `out_dir`; only the base's manifest and config are read.
    The trainer's files are checked (entry module, secrets) before the registry is asked anything. `scan`:
    the selection the image's name was planned from (:attr:`vtrain.jobfile.artifacts.Artifacts.selection`):
    its bytes are the trainer layer's, so the tag is the planned one; none: the folder is read now."""
    target = parse_repository(spec.repository)
    base_ref = parse_reference(spec.base, what="base image")
    if scan is None:
        scan = scan_trainer(package_dir, allow_credentials=allow_credentials, skip=skip)
    elif not allow_credentials:
        refuse_credentials(scan)
    check_module(scan, spec.module)
    base = read_base(base_client, base_ref, arch=spec.arch)
    version = python_version(base.config, str(base_ref), spec.python_version)
    layers = [trainer_layer(scan, out_dir), runtime_layer(out_dir)]
    declared = declared_requirements(scan.root, scan.files, scan.digest, cache=cache)
    if spec.requirements or declared:
        platforms = platform_tags(spec.platform or base_platform(base, base_client, cache=cache))
        deps = requirements_layer(spec.requirements, version, platforms=platforms, index_args=spec.index_args,
                                  cache=cache, refresh=refresh, dependencies=spec.dependencies, declared=declared,
                                  constraints=spec.constraints, provided=spec.provided)
        if deps is not None:
            layers.insert(0, deps)  # least often changed first: the trainer's layer, the most often, last
    src = src_layout(scan)
    config = canonical(image_config(base.config, spec, layers, src_layout=src, python_version=version))
    manifest = image_manifest(base.manifest, f"sha256:{hashlib.sha256(config).hexdigest()}", len(config), layers)
    tag = image_tag(spec, scan.digest, runtime_digest(), src_layout=src)
    return BuiltImage(spec=spec, target=target.with_tag(tag), base=base, layers=layers, config=config,
                      manifest=canonical(manifest), media_type=str(manifest["mediaType"]), python_version=version)


def push_image(built: BuiltImage, client: RegistryClient, base_client: RegistryClient, *,
               on_blob: Callable[[dict[str, object]], None] | None = None) -> Pushed:
    """Send what the target lacks; the manifest last. `client` speaks to the target's registry;
    `on_blob` hears of each blob (role, digest, size, action) once it is there: progress, layer by layer."""
    repo, base = built.target.repository, built.base
    same_registry = base.ref.registry == built.target.registry
    start = client.sent
    blobs: list[dict[str, object]] = []
    for descriptor in base.manifest.get("layers", []):
        digest, size = str(descriptor["digest"]), int(descriptor["size"])
        if client.has_blob(repo, digest):
            action = "present"
        elif same_registry and client.mount(repo, digest, base.ref.repository):
            action = "mounted"
        else:
            client.upload(repo, digest, size, _stream(base_client, base.ref.repository, digest, size))
            action = "copied"
        blobs.append({"role": "base", "digest": digest, "size": size, "action": action})
        if on_blob is not None:
            on_blob(blobs[-1])
    for layer in built.layers:
        blobs.append(_send(client, repo, layer.role, layer.digest, layer.size, partial(Path.open, layer.path, "rb")))
        if on_blob is not None:
            on_blob(blobs[-1])
    config = built.config
    blobs.append(_send(client, repo, "config", built.config_digest, len(config), partial(io.BytesIO, config)))
    if on_blob is not None:
        on_blob(blobs[-1])
    digest = client.put_manifest(repo, str(built.target.tag), built.media_type, built.manifest)
    return Pushed(image=f"{built.target}@{digest}", digest=digest, sent=client.sent - start, blobs=blobs)


def _send(client: RegistryClient, repo: str, role: str, digest: str, size: int,
          opener: Callable[[], Any]) -> dict[str, object]:
    action = "present" if client.has_blob(repo, digest) else "uploaded"
    if action == "uploaded":
        client.upload(repo, digest, size, opener)
    return {"role": role, "digest": digest, "size": size, "action": action}


def _stream(base_client: RegistryClient, repository: str, digest: str, size: int) -> Callable[[], Any]:
    return lambda: base_client.open_blob(repository, digest, size)


def build_and_push(spec: ImageSpec, package_dir: Path, *, credentials: Credentials | None = default_credentials,
                   base_credentials: Credentials | None = default_credentials, allow_credentials: bool = False,
                   cache: Path | None = None, chunk_size: int | None = None,
                   on_blob: Callable[[dict[str, object]], None] | None = None, skip: Iterable[Path] = (),
                   scan: Scan | None = None) -> Pushed:
    """The whole step: build the image on its base and push it. Nothing is sent before every layer is built.
    Credentials default to Google's for Google registries and none elsewhere (None: anonymous)."""
    target = parse_repository(spec.repository)
    base_ref = parse_reference(spec.base, what="base image")
    client = RegistryClient(target.registry, credentials, chunk_size=chunk_size)
    base_client = client if base_ref.registry == target.registry else pull_client(base_ref.registry, base_credentials)
    with tempfile.TemporaryDirectory(prefix="vtrain-image-") as tmp:
        built = build_image(spec, package_dir, Path(tmp), base_client, allow_credentials=allow_credentials,
                            cache=cache, skip=skip, scan=scan)
        return push_image(built, client, base_client, on_blob=on_blob)
