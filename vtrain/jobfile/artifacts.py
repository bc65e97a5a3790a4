"""The artifacts planner: the names of what a job ships, from its files, building and sending nothing.

A job file's trainer ships as artifacts whose names are content hashes, so they are known before
anything is built: the trainer's sdist and vtrain's runtime sdist (``packageUris``), or one image per
base (``REPOSITORY:TAG``) for `trainer.build`. :func:`plan_artifacts` is the one place that reads the
trainer folder (the selected files, hashed) and the requirements files to name them, and returns an
:class:`Artifacts`; the request (:func:`vtrain.request.build.build_request`) takes that value and does
no I/O. Commands plan at their edge, after everything that needs no file has been checked (a bad
``--project`` is refused before the trainer folder or vtrain's cache is touched).

The names are functions of the selection alone (:mod:`vtrain.trainer.packaging`: the sdist holds every
selected file), so planning never runs a build backend, writes nothing, and needs no cache: a cold
``vtrain render`` costs what a warm one does.

What an image is made of besides the trainer's files (:class:`~vtrain.trainer.image.config.ImageSpec`:
its base, requirements, Python, platform) is read from the job file here too (:func:`image_specs`), for
the builders (`package`, `submit`, `vtrain local`) to build exactly what was planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vtrain import catalog

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig
    from vtrain.trainer.image.config import ImageSpec
    from vtrain.trainer.select import Scan

#: The image name that stands in for a planned one where only the request's shape matters.
STAND_IN_IMAGE = "vtrain-planned-image"


@dataclass(frozen=True)
class Artifacts:
    """What a job's request names that its files decide: `package_uris` (trainer sdist, then vtrain's runtime
    sdist, where they will be staged; empty for an image or container trainer) and `images` (base image →
    ``REPOSITORY:TAG`` of the trainer image built on it, for `trainer.build`)."""

    package_uris: tuple[str, ...] = ()
    images: Mapping[str, str] = field(default_factory=dict)
    stand_in: bool = False  # names that stand in for the planned ones: the request's shape only
    #: The trainer files the image names were hashed from, each file's size and hash with them: a build given it
    #: (`vtrain local`, `package`, `submit`) builds from these bytes, so the image is the one named, whatever
    #: happens in the folder meanwhile (a file that changed under it is one line naming the file).
    selection: Scan | None = field(default=None, compare=False, repr=False)

    @classmethod
    def stand_ins(cls, package_uris: tuple[str, ...] = ()) -> Artifacts:
        """Names for a request whose shape alone matters (replica labels, a check before building): read from
        no file, and every image is :data:`STAND_IN_IMAGE`."""
        return cls(package_uris=package_uris, stand_in=True)

    def image_for(self, base: str) -> str:
        """The planned image on `base`; a KeyError names the base when it was not planned."""
        if self.stand_in:
            return self.images.get(base, STAND_IN_IMAGE)
        if base not in self.images:
            raise KeyError(f"no image was planned on base {base} (planned: {', '.join(sorted(self.images))})")
        return self.images[base]


def plan_artifacts(config: JobConfig, *, region: str | None = None) -> Artifacts:
    """The artifacts `config` ships, in `region` (None: the file's own; it picks the regional base images):
    reads the selected trainer files and the requirements files, builds and sends nothing. Raises what a
    build would on the same files (PackagingError: a missing folder, an unreadable file, a bad staging
    location or requirements line)."""
    if region and region != config.region:
        config = replace(config, region=region)
    trainer = config.trainer
    if trainer.package is None or trainer.container is not None:
        return Artifacts()
    if trainer.build is not None:
        from vtrain.trainer.packaging import scan_package

        scan = scan_package(trainer.package, skip=config.job_files())
        return Artifacts(images=planned_images(config, scan), selection=scan)
    from vtrain.trainer.packaging import planned_uri
    from vtrain.trainer.runtime_sdist import planned_runtime_uri

    staging = config.staging_bucket or ""
    return Artifacts(package_uris=(planned_uri(trainer.package, staging, skip=config.job_files()),
                                   planned_runtime_uri(staging)))


# --- images ------------------------------------------------------------------------------------

def image_spec(config: JobConfig, base: str, arch: str = "amd64") -> ImageSpec:
    """What goes into the image on `base`, built on its `arch` variant (requirement files read here:
    PackagingError names the line)."""
    from vtrain.constants import IMAGE_PYTHON
    from vtrain.jobfile.assemble import is_requirements_file
    from vtrain.trainer.image.config import ImageSpec
    from vtrain.trainer.image.requirements import read_requirements

    build = config.trainer.build
    assert build is not None and config.trainer.module
    found = read_requirements(build.requirements, [is_requirements_file(e) for e in build.requirements],
                              root=job_dir(config))
    return ImageSpec(base=base, repository=build.repository.strip(), module=config.trainer.module,
                     requirements=found.requirements, dependencies=build.dependencies,
                     python_version=build.python_version or catalog.prebuilt_python(base), python=IMAGE_PYTHON,
                     platform=(build.platform or "").strip() or base_platform(base), constraints=found.constraints,
                     provided=base_packages(base), index_args=found.index_args, arch=arch)


def job_dir(config: JobConfig) -> Path:
    """The job file's directory: requirements files may include only files under it."""
    return config.source.parent if config.source is not None else Path.cwd()


def base_platform(base: str) -> str | None:
    """The newest wheel platform tag a prebuilt base runs (None: read from the base as it is built)."""
    from vtrain.trainer.image.libc import PREBUILT_PLATFORM

    return PREBUILT_PLATFORM if catalog.PREBUILT_URI_RE.match(base) else None


def base_packages(base: str) -> tuple[str, ...]:
    """What a prebuilt base already has, as requirements: its TensorFlow (and with it TensorFlow's own
    dependencies), which the image's requirements layer does not install again. Other bases: nothing known."""
    found = catalog.PREBUILT_URI_RE.match(base)
    if found is None:
        return ()
    major, minor = found["version"].split("-")
    return (f"tensorflow=={major}.{minor}.*",)


def image_specs(config: JobConfig) -> dict[str, ImageSpec]:
    """One spec per distinct base among the pools that run the trainer (Reduction Server and pools with a
    container of their own left out), built for the CPU architecture of the pools' machines (A4X: arm64; the
    rules refuse one base serving both)."""
    out: dict[str, ImageSpec] = {}
    for pool in config.pools():
        if pool.role != "reduction_server" and pool.container is None:
            base = config.base_image(pool)
            if base not in out:
                row = catalog.MACHINES.get(pool.machine_type)
                out[base] = image_spec(config, base, catalog.OCI_ARCH[row.arch] if row is not None else "amd64")
    return out


def planned_images(config: JobConfig, scan: Scan | None = None) -> dict[str, str]:
    """base → ``REPOSITORY:TAG`` of its image, from the files alone (read once for every base, unless `scan`
    gives them as read already; no network)."""
    from vtrain.trainer.image.build import check_names, image_name
    from vtrain.trainer.packaging import scan_package

    package = config.trainer.package
    assert package is not None
    specs = image_specs(config)
    for spec in specs.values():
        check_names(spec)
    if not specs:
        return {}
    scan = scan if scan is not None else scan_package(package, skip=config.job_files())
    return {base: image_name(spec, scan) for base, spec in specs.items()}


# --- the launcher image ------------------------------------------------------------------------

@dataclass(frozen=True)
class LauncherJob:
    """What of a job the launcher image carries besides vtrain (:mod:`vtrain.trainer.image.launcher`): the job
    file, the trainer folder it names (``trainer.package``, selected as its sdist is), and the other files it
    names (``trainer.build.requirements`` files, and those they include). Nothing else of the job file's folder:
    a job file in a home directory must not ship its histories, documents and caches."""

    job_file: Path
    package: Path | None = None
    files: tuple[Path, ...] = ()


def launcher_job(config: JobConfig) -> LauncherJob:
    """What of `config` (loaded from its file) the launcher image carries: reads the requirements files (and
    those they include) as planning an image does. Judging its values for secrets is the caller's, before this
    (:func:`vtrain.pipelines.image.launcher_job`)."""
    from vtrain.jobfile.assemble import is_requirements_file
    from vtrain.trainer.image.requirements import read_requirements

    assert config.source is not None, "the launcher image carries a job file"
    files: tuple[Path, ...] = ()
    build = config.trainer.build
    if build is not None:
        files = read_requirements(build.requirements, [is_requirements_file(e) for e in build.requirements],
                                  root=job_dir(config)).files
    return LauncherJob(config.source, config.trainer.package, files)


__all__ = ["STAND_IN_IMAGE", "Artifacts", "LauncherJob", "base_packages", "base_platform", "image_spec",
           "image_specs", "job_dir", "launcher_job", "plan_artifacts", "planned_images"]
