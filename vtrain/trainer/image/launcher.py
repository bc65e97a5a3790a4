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
    job            the job file and what it names, each at its absolute path: the trainer's folder
                   (``trainer.package``) selected as its sdist is (the same ignores and exclusions), and the
                   requirements files of ``trainer.build``; every file that looks like a secret refused
                   unless ``allow_credentials``. Nothing else of the job file's folder (a job file in a home
                   directory ships no histories, documents or caches)

The tag is a hash of the inputs (the base as written, the requirement list, vtrain's files, the job's
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
from vtrain.trainer.image.config import (
    ImageSpec,
    canonical,
    image_config,
    image_manifest,
    image_tag,
    python_version,
)
from vtrain.trainer.image.layers import Entry, Layer, write_layer
from vtrain.trainer.image.libc import platform_tags
from vtrain.trainer.image.mirrors import pull_client
from vtrain.trainer.image.reference import parse_reference, parse_repository
from vtrain.trainer.image.registry import Credentials, RegistryClient
from vtrain.trainer.image.settings import ImageSettings
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
#: Where the launcher image's builder takes what vtrain cannot read from the base: `package --launcher`'s flags
#: and the keywords of vtrain.pipelines.launcher_image (no trainer.build: the requirements are vtrain's own).
SETTINGS = ImageSettings(python_version="--launcher-python (python_version= in vtrain.pipelines.launcher_image)",
                         platform="--launcher-platform (platform= in vtrain.pipelines.launcher_image)",
                         requirements=None)


@dataclass(frozen=True)
class LauncherFiles:
    """What of this machine goes into the launcher image, and its content hashes (the tag's inputs)."""

    job_file: Path  # absolute
    job: list[Entry]  # the job file, its trainer's selected files and the files it names, at their absolute paths
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
    (the job file's folder). A `python_version` or `platform` that is none is refused here, before any base is
    read, naming the setting."""
    from vtrain.trainer.image.libc import platform_problem

    if python_version is not None and not re.fullmatch(r"3\.[0-9]+", python_version.strip()):
        raise PackagingError(f"{SETTINGS.python_version}: '{printable(python_version)}' is not a Python version "
                             "MAJOR.MINOR such as 3.11")
    problem = platform_problem(platform) if platform is not None else None
    if problem is not None:
        raise PackagingError(f"{SETTINGS.platform}: {problem}")
    resolved, exact = launcher_requirements()
    return ImageSpec(base=base, repository=repository, module="vtrain",
                     requirements=(*resolved, *(f"{r} --no-deps" for r in exact)),
                     python_version=python_version, platform=platform,
                     workdir=str(Path(job_file).absolute().parent), index_args=tuple(index_args), settings=SETTINGS)


def launcher_files(job_file: str | Path, package: Path | None = None, *, files: Sequence[Path] = (),
                   allow_credentials: bool = False) -> LauncherFiles:
    """The job file, what it names and vtrain's own files, each at its absolute path: the trainer's folder
    (`package`: the job file's ``trainer.package``), selected and judged for secrets as its sdist is, and the
    other `files` the job file names (its requirements files), judged by name and content. Nothing else of the
    job file's folder. Refuses credentials (one error listing them) unless `allow_credentials`. The job file is
    not read here: the caller loaded it and judged its values (:func:`vtrain.jobfile.artifacts.launcher_job`)."""
    from vtrain.constants import VERSION
    from vtrain.trainer.credentials import check_contents
    from vtrain.trainer.packaging import refuse_credentials
    from vtrain.trainer.select import Scan, readable_errors, select_files

    path = Path(job_file).absolute()
    chosen: dict[str, Path] = {path.as_posix().lstrip("/"): path}
    named = "the job file names it: name another file, or pass --allow-credentials"
    scans = [(Scan(root=f.parent, files=[f.name]), named) for f in map(Path, files)]
    if package is not None:
        scans.insert(0, (select_files(Path(package), skip=[path]), "list them in .vtrainignore, or pass "
                                                                   "--allow-credentials"))
    for scan, fix in scans:
        check_contents(scan)
        if not allow_credentials:
            refuse_credentials(scan, fix)
        with readable_errors(scan.root):
            for rel in scan.files:
                full = scan.root / rel
                chosen[full.absolute().as_posix().lstrip("/")] = full
    job: list[Entry] = [(name, full, _executable(full)) for name, full in sorted(chosen.items())]
    package_dir = Path(__file__).resolve().parents[2]  # vtrain/
    own: list[Entry] = []
    for full in sorted(package_dir.rglob("*")):
        rel = full.relative_to(package_dir).as_posix()
        if "__pycache__" in rel.split("/") or full.suffix in (".pyc", ".pyo") or not full.is_file():
            continue
        own.append((f"vtrain/{rel}", full, False))
    meta = f"Metadata-Version: 2.1\nName: vtrain\nVersion: {VERSION}\n".encode()
    own.append((f"vtrain-{VERSION}.dist-info/METADATA", meta, False))
    own.append((f"vtrain-{VERSION}.dist-info/INSTALLER", b"vtrain launcher image\n", False))
    return LauncherFiles(job_file=path, job=job, job_digest=hash_entries([(n, v) for n, v, _ in job]),
                         vtrain=own, vtrain_digest=hash_entries([(n, v) for n, v, _ in own]))


def _executable(path: Path) -> bool:
    import os
    import stat

    return bool(os.stat(path).st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))


def planned_launcher_image(job_file: str | Path, repository: str, base: str = DEFAULT_BASE, *,
                           package: Path | None = None, files: Sequence[Path] = (), python_version: str | None = None,
                           platform: str | None = None, allow_credentials: bool = False) -> str:
    """``REPOSITORY:TAG`` the launcher image will have; reads the files, sends nothing."""
    spec = launcher_spec(job_file, repository, base, python_version=python_version, platform=platform)
    target = parse_repository(spec.repository)
    parse_reference(spec.base, what="base image")
    chosen = launcher_files(job_file, package, files=files, allow_credentials=allow_credentials)
    return str(target.with_tag(image_tag(spec, chosen.job_digest, chosen.vtrain_digest)))


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
    version = python_version(base.config, str(base_ref), spec.python_version, setting=spec.settings.python_version)
    platforms = platform_tags(spec.platform or base_platform(base, base_client, cache=cache,
                                                             setting=spec.settings.platform))
    resolved, exact = launcher_requirements()
    index_args = [*spec.index_args, *pure_wheels(resolved, spec.index_args, cache_folder("image-layers", cache))]
    layers: list[Layer] = []
    for wanted, deps in ((resolved, True), (exact, False)):
        layer = requirements_layer(wanted, version, platforms=platforms, index_args=index_args, cache=cache,
                                   dependencies=deps, settings=spec.settings)
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
                   files: Sequence[Path] = (), python_version: str | None = None, platform: str | None = None,
                   index_args: Sequence[str] = (),
                   allow_credentials: bool = False, cache: Path | None = None,
                   credentials: Credentials | None = default_credentials,
                   base_credentials: Credentials | None = default_credentials,
                   on_blob: Callable[[dict[str, object]], None] | None = None) -> Pushed:
    """Build the launcher image for `job_file` (`package`: its ``trainer.package``; `files`: the other files it
    names, :func:`vtrain.jobfile.artifacts.launcher_job`) on `base` and push it to
    `repository` (``REPOSITORY:TAG@DIGEST`` in the answer's ``image``: give it to ``launcher_op(..., image=...)``).
    Every check (secrets, the requirements' wheels) passes before anything is sent; what the registry has is not
    sent again."""
    spec = launcher_spec(job_file, repository, base, python_version=python_version, platform=platform,
                         index_args=index_args)
    target = parse_repository(spec.repository)
    base_ref = parse_reference(spec.base, what="base image")
    chosen = launcher_files(job_file, package, files=files, allow_credentials=allow_credentials)
    client = RegistryClient(target.registry, credentials)
    base_client = client if base_ref.registry == target.registry else pull_client(base_ref.registry, base_credentials)
    with tempfile.TemporaryDirectory(prefix="vtrain-launcher-") as tmp:
        built = build_launcher(spec, chosen, Path(tmp), base_client, cache=cache)
        return push_image(built, client, base_client, on_blob=on_blob)


__all__ = ["DEFAULT_BASE", "LauncherFiles", "build_launcher", "launcher_files", "launcher_image",
           "launcher_requirements", "launcher_spec", "planned_launcher_image", "pure_wheels"]
