"""The launcher image from a job file: :func:`launcher_image` builds and pushes it, :func:`planned_launcher_image`
names it offline. The job file is loaded (and checked) here, and its ``trainer.package`` goes in with the job
file's folder; the image itself is :mod:`vtrain.trainer.image.launcher`'s (docs/guides/pipelines.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vtrain.trainer.image.launcher import DEFAULT_BASE


def _package(job_file: str | os.PathLike[str]) -> Path | None:
    from vtrain.jobfile.load import load_config

    return load_config(str(Path(job_file).absolute())).trainer.package


def planned_launcher_image(job_file: str | os.PathLike[str], repository: str, base: str = DEFAULT_BASE) -> str:
    """``REPOSITORY:TAG`` that :func:`launcher_image` (or `vtrain package JOB --launcher REPOSITORY`) pushes for
    this job file: read from the files, nothing sent."""
    from vtrain.trainer.image import launcher

    return launcher.planned_launcher_image(Path(job_file), repository, base, package=_package(job_file))


def launcher_image(job_file: str | os.PathLike[str], repository: str, *, base: str = DEFAULT_BASE,
                   index_args: Sequence[str] = (), allow_credentials: bool = False, cache: Path | None = None,
                   on_blob: Callable[[dict[str, object]], None] | None = None) -> Any:
    """Build the image ``launcher_op``'s step runs in on Vertex AI Pipelines and push it to `repository`:
    vtrain, its pipelines dependencies and the job file's folder at its absolute path, on `base`. Returns what
    the push did (:class:`vtrain.trainer.image.build.Pushed`); its ``image`` (``REPOSITORY:TAG@DIGEST``) is
    ``launcher_op``'s `image`. `index_args`: pip's index options for the wheels (pip's own settings apply too)."""
    from vtrain.trainer.image import launcher

    return launcher.launcher_image(Path(job_file), repository, base=base, package=_package(job_file),
                                   index_args=index_args, allow_credentials=allow_credentials, cache=cache,
                                   on_blob=on_blob)


__all__ = ["launcher_image", "planned_launcher_image"]
