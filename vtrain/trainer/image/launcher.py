"""The launcher image: where ``vtrain.pipelines.launcher_op``'s step runs on Vertex AI Pipelines (issue 33).

The step runs ``python -m vtrain submit JOB --wait`` (and KFP's own executor, ``python3 -m
kfp.dsl.executor_main``), so its image needs vtrain, vtrain's dependencies with the pipelines extra, Google's
pipeline components (the step's output type, ``google.VertexModel``) and the job file's folder at the absolute
path it had when the pipeline was compiled. vtrain is not on PyPI, so the image cannot ``pip install vtrain``:
vtrain builds it itself, with the daemonless builder the trainer images use (:mod:`vtrain.trainer.image`), on a
Python base image (``python:3.11-slim`` unless told otherwise). Its layers, on the base's:

    requirements   vtrain's own Requires-Dist (the core and the ``pipelines`` extra), resolved as wheels for
                   the base's Python and platform (pip, ``--only-binary``), in the site dir of
                   ``PYTHONUSERBASE=/opt/vtrain/deps``; kfp's ``kfp-server-api`` ships only an sdist, pure
                   Python: it is built here once as a ``py3-none-any`` wheel (any other result is refused)
    requirements   google-cloud-pipeline-components, the version installed here, ``--no-deps`` (it declares
                   aiplatform<2; what the step imports of it needs only kfp)
    vtrain         the installed ``vtrain`` package's files (no bytecode) and a ``dist-info`` with its version,
                   in the same site dir
    job            the job file's folder at its absolute path, as vtrain selects a trainer's files (the same
                   ignores; every file that looks like a secret refused unless ``allow_credentials``), the
                   job file itself included; the trainer's folder too, at its absolute path, when it lies
                   outside the job file's

The tag is a hash of the inputs (the base as written, the requirement list, vtrain's files, the job folder's
files), planned offline (:func:`planned_launcher_image`): rebuilding an unchanged launcher pushes nothing.
The image's working directory is the job file's folder; its entry point ``python3 -m vtrain``.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vtrain.errors import PackagingError
from vtrain.foreign import printable
from vtrain.trainer.image.auth import default_credentials
from vtrain.trainer.image.build import BuiltImage, Pushed, base_platform, push_image, read_base
from vtrain.trainer.image.config import ImageSpec, canonical, image_config, image_manifest, image_tag, python_version
from vtrain.trainer.image.layers import Entry, Layer, write_layer
from vtrain.trainer.image.libc import platform_tags
from vtrain.trainer.image.reference import parse_reference, parse_repository
from vtrain.trainer.image.registry import Credentials, RegistryClient
from vtrain.trainer.image.wheels import canonical as canonical_name
from vtrain.trainer.image.wheels import site_dir
from vtrain.trainer.select import hash_entries
from vtrain.userpaths import cache_folder

#: The base when none is given: Docker Hub's Python (its config sets PYTHON_VERSION; glibc, so manylinux wheels).
DEFAULT_BASE = "python:3.11-slim"  # Docker Hub: registry-1.docker.io/library/python
#: The extra whose dependencies the launcher needs besides vtrain's core ones.
EXTRA = "pipelines"
#: Google's pipeline components: the step's google.VertexModel output type; installed without its dependencies.
COMPONENTS = "google-cloud-pipeline-components"
#: Dependencies that publish only an sdist of pure Python: built here as py3-none-any wheels.
_SDIST_ONLY = ("kfp-server-api",)
_PURE = re.compile(r"-(py3|py2\.py3)-none-any\.whl$")


@dataclass(frozen=True)
class LauncherFiles:
    """What of this machine goes into the launcher image, and its content hashes (the tag's inputs)."""

    job_file: Path  # absolute
    job: list[Entry]  # the job folder's selected files (and the trainer's, outside it) at their absolute paths
    job_digest: str
    vtrain: list[Entry]  # relative to the site dir
    vtrain_digest: str


def launcher_requirements() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(what pip resolves with dependencies, what is installed without): vtrain's core Requires-Dist and its
    ``pipelines`` extra's (the extra's marker dropped), and Google's pipeline components pinned to the version
    installed here. Read from vtrain's installed metadata; a missing extra is one line."""
    from importlib.metadata import PackageNotFoundError, requires, version

    from packaging.requirements import Requirement

    try:
        declared = requires("vtrain") or []
        components = version(COMPONENTS)
    except PackageNotFoundError as err:
        raise PackagingError(f"the launcher image needs vtrain's pipelines extra installed here ({err.name} is "
                             "missing): pip install 'vtrain[pipelines]' and pip install --no-deps "
                             f"{COMPONENTS} (docs/guides/pipelines.md)") from None
    out: list[str] = []
    for text in declared:
        req = Requirement(text)
        if req.marker is None or "extra" not in str(req.marker):
            out.append(str(req))
        elif req.marker.evaluate({"extra": EXTRA}) and not req.marker.evaluate({"extra": "none-of-vtrains"}):
            out.append(f"{req.name}{'[' + ','.join(sorted(req.extras)) + ']' if req.extras else ''}{req.specifier}")
    return tuple(sorted(out)), (f"{COMPONENTS}=={components}",)


def launcher_spec(job_file: str | Path, repository: str, base: str = DEFAULT_BASE, *,
                  python_version: str | None = None, platform: str | None = None,
                  index_args: Sequence[str] = ()) -> ImageSpec:
    """The launcher image's spec: its requirements, entry point (``python3 -m vtrain``) and working directory
    (the job file's folder)."""
    resolved, exact = launcher_requirements()
    return ImageSpec(base=base, repository=repository, module="vtrain",
                     requirements=(*resolved, *(f"{r} --no-deps" for r in exact)),
                     python_version=python_version, platform=platform,
                     workdir=str(Path(job_file).absolute().parent), index_args=tuple(index_args))


def launcher_files(job_file: str | Path, package: Path | None = None, *,
                   allow_credentials: bool = False) -> LauncherFiles:
    """The job folder's files (selected and judged for secrets as a trainer's are; the job file included) and
    vtrain's own; the trainer's folder too (`package`: the job file's ``trainer.package``) when it lies outside
    the job file's. Refuses credentials (one error listing them) unless `allow_credentials`. The job file is
    not read here (the caller has loaded it: :mod:`vtrain.pipelines.image`, ``vtrain package --launcher``)."""
    import vtrain
    from vtrain.trainer.credentials import check_contents
    from vtrain.trainer.packaging import refuse_credentials
    from vtrain.trainer.select import readable_errors, select_files, select_folder

    path = Path(job_file).absolute()
    folders = [path.parent]
    if package is not None and not Path(package).absolute().is_relative_to(path.parent):
        folders.append(Path(package).absolute())
    chosen: dict[str, Path] = {path.as_posix().lstrip("/"): path}
    for folder in folders:
        scan = check_contents(select_folder(folder) if folder == path.parent else select_files(folder))
        if not allow_credentials:
            refuse_credentials(scan)
        with readable_errors(scan.root):
            for rel in scan.files:
                full = scan.root / rel
                chosen[(folder / rel).as_posix().lstrip("/")] = full
    job: list[Entry] = [(name, full, _executable(full)) for name, full in sorted(chosen.items())]
    package_dir = Path(vtrain.__file__).resolve().parent
    own: list[Entry] = []
    for full in sorted(package_dir.rglob("*")):
        rel = full.relative_to(package_dir).as_posix()
        if "__pycache__" in rel.split("/") or full.suffix in (".pyc", ".pyo") or not full.is_file():
            continue
        own.append((f"vtrain/{rel}", full, False))
    meta = f"Metadata-Version: 2.1\nName: vtrain\nVersion: {vtrain.__version__}\n".encode()
    own.append((f"vtrain-{vtrain.__version__}.dist-info/METADATA", meta, False))
    own.append((f"vtrain-{vtrain.__version__}.dist-info/INSTALLER", b"vtrain launcher image\n", False))
    return LauncherFiles(job_file=path, job=job, job_digest=hash_entries([(n, v) for n, v, _ in job]),
                         vtrain=own, vtrain_digest=hash_entries([(n, v) for n, v, _ in own]))


def _executable(path: Path) -> bool:
    import os
    import stat

    return bool(os.stat(path).st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))


def planned_launcher_image(job_file: str | Path, repository: str, base: str = DEFAULT_BASE, *,
                           package: Path | None = None, python_version: str | None = None,
                           platform: str | None = None, allow_credentials: bool = False) -> str:
    """``REPOSITORY:TAG`` the launcher image will have; reads the files, sends nothing."""
    spec = launcher_spec(job_file, repository, base, python_version=python_version, platform=platform)
    target = parse_repository(spec.repository)
    parse_reference(spec.base, what="base image")
    files = launcher_files(job_file, package, allow_credentials=allow_credentials)
    return str(target.with_tag(image_tag(spec, files.job_digest, files.vtrain_digest)))


def pure_wheels(requirements: Sequence[str], index_args: Sequence[str], layers: Path) -> list[str]:
    """pip's ``--find-links`` to wheels built here for the sdist-only pure-Python dependencies among
    `requirements`' closure (kfp-server-api), as kfp's installed metadata pins them; [] when none applies.
    A build that gives anything but a ``py3-none-any`` wheel is refused: it would fit this machine only."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    wanted: list[str] = []
    names = {canonical_name(Requirement(r).name) for r in requirements}
    for parent in sorted(names):
        try:
            declared = requires(parent) or []
        except PackageNotFoundError:
            continue
        for text in declared:
            req = Requirement(text)
            if canonical_name(req.name) in _SDIST_ONLY and (req.marker is None or req.marker.evaluate({"extra": ""})):
                wanted.append(f"{req.name}{req.specifier}")
    if not wanted:
        return []
    key = hashlib.sha256("\n".join([*sorted(wanted), *index_args]).encode()).hexdigest()[:16]
    folder = layers / f"launcher-wheels-{key}"
    if folder.is_dir() and any(folder.glob("*.whl")):
        return ["--find-links", str(folder)]
    layers.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vtrain-launcher-wheels-", dir=layers) as tmp:
        argv = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-input",
                "--no-deps", "--wheel-dir", tmp, *index_args, *wanted]
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
        if done.returncode != 0:
            tail = printable(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
            raise PackagingError(f"building a wheel of {', '.join(wanted)} (it ships only an sdist) for the launcher "
                                 f"image failed: {tail}")
        built = sorted(p.name for p in Path(tmp).glob("*.whl"))
        impure = [name for name in built if not _PURE.search(name)]
        if impure or not built:
            which = ", ".join(impure) or "none built"
            raise PackagingError(f"the wheel built of {', '.join(wanted)} is not pure Python ({which}): it would fit "
                                 "only this machine; give a wheel for the image with --find-links")
        Path(tmp).rename(folder)
        Path(tmp).mkdir()  # TemporaryDirectory removes what it made
    return ["--find-links", str(folder)]


def build_launcher(spec: ImageSpec, files: LauncherFiles, out_dir: Path, base_client: RegistryClient, *,
                   cache: Path | None = None) -> BuiltImage:
    """The launcher image on disk under `out_dir`, ready to push; only the base's manifest and config (and the
    layer holding its C library, once, cached) are read."""
    from vtrain.trainer.image.wheels import requirements_layer

    target = parse_repository(spec.repository)
    base_ref = parse_reference(spec.base, what="base image")
    base = read_base(base_client, base_ref)
    version = python_version(base.config, str(base_ref), spec.python_version)
    platforms = platform_tags(spec.platform or base_platform(base, base_client, cache=cache))
    resolved, exact = launcher_requirements()
    index_args = [*spec.index_args, *pure_wheels(resolved, spec.index_args, cache_folder("image-layers", cache))]
    layers: list[Layer] = []
    for wanted, deps in ((resolved, True), (exact, False)):
        layer = requirements_layer(wanted, version, platforms=platforms, index_args=index_args, cache=cache,
                                   dependencies=deps)
        if layer is not None:
            layers.append(layer)
    site = site_dir(version)
    layers.append(write_layer([(f"{site}/{name}", value, x) for name, value, x in files.vtrain],
                              out_dir / f"vtrain-{files.vtrain_digest}.tar.gz", role="vtrain"))
    layers.append(write_layer(files.job, out_dir / f"job-{files.job_digest}.tar.gz", role="job"))
    config = canonical(image_config(base.config, spec, layers, python_version=version))
    manifest = image_manifest(base.manifest, f"sha256:{hashlib.sha256(config).hexdigest()}", len(config), layers)
    tag = image_tag(spec, files.job_digest, files.vtrain_digest)
    return BuiltImage(spec=spec, target=target.with_tag(tag), base=base, layers=layers, config=config,
                      manifest=canonical(manifest), media_type=str(manifest["mediaType"]), python_version=version)


def launcher_image(job_file: str | Path, repository: str, *, base: str = DEFAULT_BASE, package: Path | None = None,
                   python_version: str | None = None, platform: str | None = None, index_args: Sequence[str] = (),
                   allow_credentials: bool = False, cache: Path | None = None,
                   credentials: Credentials | None = default_credentials,
                   base_credentials: Credentials | None = default_credentials,
                   on_blob: Callable[[dict[str, object]], None] | None = None) -> Pushed:
    """Build the launcher image for `job_file` (`package`: its ``trainer.package``) on `base` and push it to
    `repository` (``REPOSITORY:TAG@DIGEST`` in the answer's ``image``: give it to ``launcher_op(..., image=...)``).
    Every check (secrets, the requirements' wheels) passes before anything is sent; what the registry has is not
    sent again."""
    spec = launcher_spec(job_file, repository, base, python_version=python_version, platform=platform,
                         index_args=index_args)
    target = parse_repository(spec.repository)
    base_ref = parse_reference(spec.base, what="base image")
    files = launcher_files(job_file, package, allow_credentials=allow_credentials)
    client = RegistryClient(target.registry, credentials)
    base_client = client if base_ref.registry == target.registry else RegistryClient(base_ref.registry,
                                                                                     base_credentials)
    with tempfile.TemporaryDirectory(prefix="vtrain-launcher-") as tmp:
        built = build_launcher(spec, files, Path(tmp), base_client, cache=cache)
        return push_image(built, client, base_client, on_blob=on_blob)


__all__ = ["DEFAULT_BASE", "LauncherFiles", "build_launcher", "launcher_files", "launcher_image",
           "launcher_requirements", "launcher_spec", "planned_launcher_image", "pure_wheels"]
