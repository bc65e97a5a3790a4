"""`trainer.build` → the images a job's pools run: one :class:`ImageSpec` per base image.

A pool's base is the image a python-package pool would run (`trainer.image`: an alias picks the
regional prebuilt image by the pool's hardware, so a CPU syncer and GPU workers get one image
each), and the image name ``REPOSITORY:TAG`` is planned offline (:func:`planned_image`: the files
are read, nothing is sent), so `render`, `submit` and `diff` agree on it. The image holds no
environment of the job's and no arguments: both stay in each pool's containerSpec, so changing an
env value or a pool's args rebuilds nothing. The Reduction Server pool keeps Google's image.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vtrain import catalog

if TYPE_CHECKING:
    from vtrain.jobfile.model import JobConfig, PoolConfig
    from vtrain.trainer.image.config import ImageSpec

#: The interpreter the image's entry point names (every prebuilt TensorFlow image has it on PATH).
IMAGE_PYTHON = "python3"


def base_image(config: JobConfig, pool: PoolConfig) -> str:
    """The base of `pool`'s image: what its executor image would be as a python-package pool (its own
    `image`, else trainer.image)."""
    return catalog.executor_image_uri(pool.image or config.trainer.image, pool.hardware, config.region)


def image_spec(config: JobConfig, base: str) -> ImageSpec:
    """What goes into the image on `base` (requirement files read here: PackagingError names the line)."""
    from vtrain.jobfile.model import is_requirements_file
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
                     provided=base_packages(base), index_args=found.index_args)


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
    container of their own left out)."""
    out: dict[str, ImageSpec] = {}
    for pool in config.pools():
        if pool.role != "reduction_server" and pool.container is None:
            base = base_image(config, pool)
            if base not in out:
                out[base] = image_spec(config, base)
    return out


def planned_images(config: JobConfig) -> dict[str, str]:
    """base → ``REPOSITORY:TAG`` of its image, from the files alone (no network)."""
    from vtrain.trainer.image.build import planned_image

    package = config.trainer.package
    assert package is not None
    return {base: planned_image(spec, package, skip=config.job_files()) for base, spec in image_specs(config).items()}
