"""An image job's images on this machine: whole, for a container (:func:`container_images`), or, where no
container can run, their vtrain layers on this machine's Python (host mode, below).

Container mode: a `trainer.build` image is built exactly as `submit` builds it (its layers here, its
base's layers pulled from the base's registry, nothing pushed), a `trainer.container` image is pulled
from the registry it names, and either is unpacked by digest (:mod:`vtrain.local.rootfs`) for an OCI
runtime (:mod:`vtrain.local.containers`). When that cannot be done (no runtime, the base out of reach),
:func:`container_images` says why in one line and the caller runs host mode.

Host mode:
An image vtrain builds (:mod:`vtrain.trainer.image`) adds only plain directories to its base, each on
``PYTHONPATH``: the trainer, vtrain's runtime and the requirements. So a replica runs what the image
runs (its entry point from the containerSpec, the image's ``PYTHONPATH`` and working directory
layout; each replica works in its own copy of the trainer's directory, the image's WorkingDir) with
this machine's interpreter standing in for the base's Python and its TensorFlow:

- `vtrain local` (:func:`build_local`) writes the same layers `submit` pushes (the trainer and runtime
  layers byte for byte; the requirements installed by the same pip call, for this machine's Python
  when it is not the base's), and unpacks them;
- the emulator's ``--run-jobs`` (:func:`pull_local`) reads the pushed image from a registry on
  127.0.0.1 and unpacks vtrain's layers from it (the base's are never downloaded), so it runs
  exactly what was pushed.

Unpacked trees are cached by the layers' digests (``CACHE/images/KEY``), so a second run unpacks nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from vtrain.errors import BackendError, PackagingError
from vtrain.trainer.image.layers import TRAINER_DIR
from vtrain.userpaths import CacheFolder, cache_folder

if TYPE_CHECKING:
    from vtrain.jobfile.artifacts import Artifacts
    from vtrain.jobfile.config import JobConfig
    from vtrain.local.cachefolders import Lease
    from vtrain.local.containers import ContainerImage
    from vtrain.local.rootfs import Unpacked
    from vtrain.trainer.image.layers import Layer

_DONE = ".vtrain-unpacked"
_Image = TypeVar("_Image", "LocalImage", "ContainerImage")


@dataclass(frozen=True)
class LocalImage:
    """An image's vtrain layers unpacked under `root`; `pythonpath` as the image sets it, made local."""

    uri: str
    root: Path
    pythonpath: tuple[str, ...]
    lease: Lease | None = field(default=None, compare=False, repr=False)  # `cache clear` keeps `root` meanwhile

    @property
    def trainer_dir(self) -> Path:
        return self.root / TRAINER_DIR

    def env(self, workdir: Path | None = None) -> dict[str, str]:
        """What the image's config adds to a replica's environment (the pool's env may still override it).
        With `workdir`, the trainer's directory is that replica's own copy there (see :meth:`working_copy`)."""
        paths = list(self.pythonpath)
        if workdir is not None:
            inside = str(self.trainer_dir)
            paths = [str(workdir) + p[len(inside):] if p == inside or p.startswith(inside + "/") else p
                     for p in paths]
        return {"PYTHONPATH": os.pathsep.join(paths)}

    def working_copy(self, workdir: Path) -> None:
        """The trainer's files copied into a replica's working directory: the image's WorkingDir is the
        trainer's directory, so relative paths read as they do on Vertex, and what a replica writes there
        stays in its own run (each container has its own file system), not in the cached tree."""
        try:
            shutil.copytree(self.trainer_dir, workdir, dirs_exist_ok=True)
        except OSError as err:
            raise BackendError(f"cannot copy the image's trainer into {workdir}: {err}") from None

    def argv(self, pool: Mapping[str, Any], python: str) -> list[str]:
        """The containerSpec's command and args, this machine's `python` in place of the image's."""
        spec = pool["containerSpec"]
        command = list(spec.get("command", []))
        if len(command) < 2 or command[1] != "-m":
            raise BackendError(f"image {self.uri}: vtrain runs its images here as `python -m MODULE`; the pool's "
                               f"command is {command!r}")
        return [python, *command[1:], *spec.get("args", [])]


def host_python() -> str:
    """MAJOR.MINOR of the interpreter replicas run with here."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _unpack(layers: Sequence[Path], cache: Path, key: str) -> Path:
    """The layers extracted in order into CACHE/images/KEY (once; a half-done tree is redone)."""
    root = cache_folder("images", cache) / key
    if (root / _DONE).is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root.parent))
    try:
        for path in layers:
            with tarfile.open(path, "r:gz") as tar:
                tar.extractall(tmp, filter="data")  # no absolute paths, links out or devices
        (tmp / _DONE).write_text("")
        try:
            os.replace(tmp, root)
        except OSError:  # another run unpacked it meanwhile
            if not (root / _DONE).is_file():
                raise
    except (OSError, tarfile.TarError) as err:
        raise BackendError(f"cannot unpack the image's layers into {root}: {err}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def _local(uri: str, root: Path, image_path: Sequence[str]) -> LocalImage:
    return LocalImage(uri, root, tuple(str(root / p.lstrip("/")) for p in image_path))


def _key(layers: Sequence[Layer | str]) -> str:
    digests = [layer if isinstance(layer, str) else layer.digest for layer in layers]
    return hashlib.sha256(" ".join(digests).encode()).hexdigest()[:16]


def _holding(cache: Path, folders: Sequence[CacheFolder], make: Callable[[], dict[str, _Image]]) -> dict[str, _Image]:
    """What `make` returns, each image holding `folders` of the cache (one lease, released with the job that runs
    them): `vtrain cache clear` meanwhile keeps those folders."""
    from vtrain.local.cachefolders import hold

    lease = hold(cache, *folders)
    try:
        found = make()
    except BaseException:
        lease.release()
        raise
    if not found:
        lease.release()
    return {uri: replace(image, lease=lease) for uri, image in found.items()}


def build_local(config: JobConfig, cache: Path, *, allow_credentials: bool = False,
                notice: Callable[[str], None] = lambda text: None,
                artifacts: Artifacts | None = None) -> dict[str, LocalImage]:
    """imageUri → the image's layers built here and unpacked, for each image the job's pools name, built from
    the files `artifacts` (the request's, :func:`~vtrain.jobfile.artifacts.plan_artifacts`) named them from."""
    return _holding(cache, ("images",), lambda: _build_local(config, cache, allow_credentials, notice, artifacts))


def _planned(config: JobConfig, artifacts: Artifacts | None) -> Artifacts:
    """The job's planned images and the selection they were hashed from: the request's when given (one snapshot
    of the trainer folder for the names and the build), else planned now."""
    from vtrain.jobfile.artifacts import plan_artifacts

    if artifacts is None or artifacts.selection is None:
        return plan_artifacts(config)
    return artifacts


def _build_local(config: JobConfig, cache: Path, allow_credentials: bool, notice: Callable[[str], None],
                 artifacts: Artifacts | None) -> dict[str, LocalImage]:
    from vtrain.jobfile.artifacts import image_specs
    from vtrain.trainer.image.config import python_path
    from vtrain.trainer.image.layers import runtime_layer, src_layout, trainer_layer
    from vtrain.trainer.image.wheels import requirements_layer
    from vtrain.trainer.packaging import check_module, refuse_credentials

    assert config.trainer.module
    plan = _planned(config, artifacts)
    scan, planned = plan.selection, dict(plan.images)
    assert scan is not None
    if not allow_credentials:
        refuse_credentials(scan)
    check_module(scan, config.trainer.module)
    out: dict[str, LocalImage] = {}
    here = host_python()
    with tempfile.TemporaryDirectory(prefix="vtrain-image-") as tmp:
        for base, spec in image_specs(config).items():
            if spec.python_version and spec.python_version != here and spec.requirements:
                notice(f"the image's Python is {spec.python_version}, this machine's {here}: its requirements are "
                       f"installed here for {here}")
            layers = [trainer_layer(scan, Path(tmp)), runtime_layer(Path(tmp))]
            deps = requirements_layer(spec.requirements, here, index_args=spec.index_args,
                                      cache=cache, dependencies=spec.dependencies,
                                      constraints=spec.constraints)
            if deps is not None:
                layers.insert(0, deps)
            root = _unpack([layer.path for layer in layers], cache, _key(layers))
            out[planned[base]] = _local(planned[base], root,
                                        python_path(src_layout(scan), here if deps is not None else None))
            notice(f"image {planned[base]}: its layers unpacked in {root}")
    return out


def pull_local(uri: str, cache: Path, *, credentials: Any = None) -> LocalImage | None:
    """The vtrain layers of a pushed image, downloaded (never the base's) and unpacked; None when the
    image is not one vtrain built. A registry that refuses or is unreachable is a one-line BackendError."""
    from vtrain.local.rootfs import fetch_blob
    from vtrain.trainer.image.build import read_base
    from vtrain.trainer.image.mirrors import pull_client
    from vtrain.trainer.image.reference import parse_reference

    try:
        ref = parse_reference(uri)
        client = pull_client(ref.registry, credentials)
        image = read_base(client, ref)  # the manifest for linux/amd64 and the config
        history = [h for h in image.config.get("history", []) if not h.get("empty_layer")]
        ours = [h for h in history if str(h.get("created_by", "")).startswith("vtrain: ")]
        if not ours:
            return None
        descriptors = image.manifest.get("layers", [])[-len(ours):]
        digests = [str(d["digest"]) for d in descriptors]
        blobs = _mkdir(cache_folder("image-blobs", cache))
        paths = [fetch_blob(client, ref.repository, str(d["digest"]), int(d["size"]), blobs) for d in descriptors]
    except PackagingError as err:
        raise BackendError(f"cannot run image {uri} here: {err}") from None
    env = dict(item.partition("=")[::2] for item in (image.config.get("config") or {}).get("Env") or [])
    image_path = [p for p in env.get("PYTHONPATH", "").split(":") if p.startswith("/opt/vtrain/")]
    return _local(uri, _unpack(paths, cache, _key(digests)), image_path)


def container_images(config: JobConfig, cache: Path, *, allow_credentials: bool = False,
                     notice: Callable[[str], None] = lambda text: None, credentials: Any = None,
                     artifacts: Artifacts | None = None) -> tuple[dict[str, Any] | None, str]:
    """imageUri → :class:`~vtrain.local.containers.ContainerImage` for each image the job's pools run, or
    (None, why not). A `trainer.build` job's images are built here; any other container pool's image is
    pulled, unless docker (or podman) answers: then docker runs those pools. `credentials` as the registry
    client takes them (default: Google's for Google's registries, else none; anonymous when there are none).
    `artifacts`: the request's planned images, whose selection a `trainer.build` image is built from."""
    from vtrain.local.containers import ContainerImage, docker_engine, find_runtime

    others = _container_uris(config)
    engine, no_docker = docker_engine() if others else (None, "")
    if engine is not None:
        others = []
        if config.trainer.build is None:
            return {}, ""
    runtime, why = find_runtime(cache)
    if runtime is None:
        return None, f"{no_docker}; {why}" if no_docker else why
    creds = credentials if credentials is not None else _pull_credentials

    def make() -> dict[str, ContainerImage]:
        found = _build_unpacked(config, cache, creds, allow_credentials, runtime.rootless, notice, artifacts) \
            if config.trainer.build is not None else {}
        for uri in others:
            found[uri] = _pull_unpacked(uri, cache, creds, runtime.rootless, notice)
        return {uri: ContainerImage(image, runtime) for uri, image in found.items()}

    try:
        images = _holding(cache, ("image-blobs", "containers"), make)
    except (PackagingError, BackendError) as err:
        return None, f"cannot make the image here: {err}"
    for image in images.values():
        notice(f"image {image.image.uri}: replicas run in {runtime.name} containers on {image.image.rootfs}")
    return images, ""


def _container_uris(config: JobConfig) -> list[str]:
    """The images of the job's own container pools (trainer.container, a pool's container), Reduction Server's
    (Google's service, never started here) left out."""
    uris = [pool.container.image_uri for pool in config.pools()
            if pool.container is not None and pool.role != "reduction_server"]
    if config.trainer.container is not None and config.trainer.build is None:
        uris.append(config.trainer.container.image_uri)
    return sorted({u.strip() for u in uris if "/reductionserver" not in u})


def _pull_credentials(registry: str) -> tuple[str, str] | None:
    """Google's token for a Google registry when there is one, else none: prebuilt images are public."""
    from vtrain.trainer.image.auth import default_credentials

    try:
        return default_credentials(registry)
    except PackagingError:
        return None


def _build_unpacked(config: JobConfig, cache: Path, credentials: Any, allow_credentials: bool, rootless: bool,
                    notice: Callable[[str], None], artifacts: Artifacts | None) -> dict[str, Unpacked]:
    """Each image of a `trainer.build` job built as `submit` builds it (nothing pushed), from the files its
    planned name was hashed from, then unpacked."""
    from vtrain.jobfile.artifacts import image_specs
    from vtrain.local import rootfs
    from vtrain.trainer.image.build import build_image
    from vtrain.trainer.image.mirrors import pull_client
    from vtrain.trainer.image.reference import parse_reference

    package = config.trainer.package
    assert package is not None
    plan = _planned(config, artifacts)
    planned = dict(plan.images)
    out: dict[str, Unpacked] = {}
    blobs = _mkdir(cache_folder("image-blobs", cache))
    for base, spec in image_specs(config).items():
        client = pull_client(parse_reference(spec.base, what="base image").registry, credentials)
        with tempfile.TemporaryDirectory(prefix="vtrain-image-") as tmp:
            built = build_image(spec, Path(package), Path(tmp), client, allow_credentials=allow_credentials,
                                cache=cache, scan=plan.selection)
            uri = planned[base]
            found = rootfs.cached(cache, uri, built.digest)
            if found is None:
                paths = _base_blobs(client, built.base.ref.repository, built.base.manifest, blobs, notice, spec.base)
                for layer in built.layers:
                    paths[layer.digest] = layer.path
                found = rootfs.unpack(cache, uri, built.digest, json.loads(built.manifest), built.config, paths,
                                      rootless=rootless, notice=notice)
        out[uri] = found
    return out


def _pull_unpacked(uri: str, cache: Path, credentials: Any, rootless: bool,
                   notice: Callable[[str], None]) -> Unpacked:
    """A `trainer.container` image pulled from its registry (linux/amd64), then unpacked."""
    from vtrain.local import rootfs
    from vtrain.trainer.image.build import read_base
    from vtrain.trainer.image.config import canonical
    from vtrain.trainer.image.mirrors import pull_client
    from vtrain.trainer.image.reference import parse_reference

    ref = parse_reference(uri)
    client = pull_client(ref.registry, credentials)
    image = read_base(client, ref)
    found = rootfs.cached(cache, uri, image.digest)
    if found is not None:
        return found
    paths = _base_blobs(client, ref.repository, image.manifest, _mkdir(cache_folder("image-blobs", cache)), notice, uri)
    return rootfs.unpack(cache, uri, image.digest, image.manifest, canonical(image.config), paths,
                         rootless=rootless, notice=notice)


def _base_blobs(client: Any, repository: str, manifest: Mapping[str, Any], into: Path,
                notice: Callable[[str], None], name: str) -> dict[str, Path]:
    """The manifest's layers in the blob cache: those missing pulled (and said, with their size)."""
    from vtrain.local.rootfs import fetch_blob

    layers = [(str(d["digest"]), int(d["size"])) for d in manifest.get("layers") or []]  # checked by read_base
    missing = [(d, n) for d, n in layers if not (into / d.replace(":", "-")).is_file()]
    if missing:
        notice(f"pulling {len(missing)} layer(s) of {name} ({sum(n for _, n in missing) / 1e6:,.1f} MB; kept for "
               "later runs)")
    return {digest: fetch_blob(client, repository, digest, size, into) for digest, size in layers}


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def pull_images(job: Mapping[str, Any], cache: Path) -> dict[str, LocalImage]:
    """For the emulator: each container pool's image on a registry on this machine that vtrain built."""
    return _holding(cache, ("image-blobs", "images"), lambda: _pull_images(job, cache))


def _pull_images(job: Mapping[str, Any], cache: Path) -> dict[str, LocalImage]:
    from vtrain.trainer.image.reference import is_loopback, parse_reference

    out: dict[str, LocalImage] = {}
    for pool in job["jobSpec"].get("workerPoolSpecs", []):
        uri = str((pool.get("containerSpec") or {}).get("imageUri", ""))
        if not uri or uri in out:
            continue
        try:
            loopback = is_loopback(parse_reference(uri).registry)
        except PackagingError:
            continue
        if loopback:
            found = pull_local(uri, cache)
            if found is not None:
                out[uri] = found
    return out

