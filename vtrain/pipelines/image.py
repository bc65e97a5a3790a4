"""The launcher image from a job file: :func:`launcher_image` builds and pushes it, :func:`planned_launcher_image`
names it offline. The job file is loaded (and checked) here and judged by the one secret policy; the image holds
it and what it names (:func:`vtrain.jobfile.artifacts.launcher_job`); the image itself is
:mod:`vtrain.trainer.image.launcher`'s (docs/guides/pipelines.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtrain.trainer.image.launcher import DEFAULT_BASE

if TYPE_CHECKING:
    from vtrain.jobfile.artifacts import LauncherJob

#: How a Python caller opts in to a job whose values look secret (the CLI's words: --allow-credentials).
ALLOW = "pass allow_credentials=True to ship them"


def launcher_job(job_file: str | os.PathLike[str], *, allow_credentials: bool = False,
                 allow: str = ALLOW) -> LauncherJob:
    """The job file loaded and checked, judged by the one secret policy (:mod:`vtrain.request.secrets`: its
    request, and its own text, which the image carries whole) unless `allow_credentials`, and what of it the
    image carries (:class:`vtrain.jobfile.artifacts.LauncherJob`). `allow`: how the caller opts in (its words)."""
    from vtrain.jobfile.artifacts import Artifacts
    from vtrain.jobfile.artifacts import launcher_job as job_of
    from vtrain.jobfile.load import load_config
    from vtrain.jobfile.yamlpos import MAX_BYTES
    from vtrain.request.build import build_request
    from vtrain.request.secrets import job_secret_places, refuse_secrets
    from vtrain.userpaths import read_bounded, shown

    config = load_config(str(Path(job_file).absolute()))
    if not allow_credentials and config.source is not None:
        body = build_request(config, Artifacts.stand_ins()).body  # as render -o kfp judges it
        text = read_bounded(config.source, MAX_BYTES).decode("utf-8", "replace")  # loaded a moment ago
        refuse_secrets(job_secret_places(body, text), source=shown(str(config.source)),
                       carrier="the launcher image", allow=allow)
    return job_of(config)


def planned_launcher_image(job_file: str | os.PathLike[str], repository: str, base: str = DEFAULT_BASE, *,
                           python_version: str | None = None, platform: str | None = None,
                           allow_credentials: bool = False) -> str:
    """``REPOSITORY:TAG`` that :func:`launcher_image` (or `vtrain package JOB --launcher REPOSITORY`) pushes for
    this job file: read from the files, nothing sent. `python_version`, `platform`: as :func:`launcher_image`'s."""
    from vtrain.trainer.image import launcher

    job = launcher_job(job_file, allow_credentials=allow_credentials)
    return launcher.planned_launcher_image(Path(job_file), repository, base, package=job.package, files=job.files,
                                           python_version=python_version, platform=platform,
                                           allow_credentials=allow_credentials)


def launcher_image(job_file: str | os.PathLike[str], repository: str, *, base: str = DEFAULT_BASE,
                   python_version: str | None = None, platform: str | None = None,
                   index_args: Sequence[str] = (), allow_credentials: bool = False, cache: Path | None = None,
                   on_blob: Callable[[dict[str, object]], None] | None = None) -> Any:
    """Build the image ``launcher_op``'s step runs in on Vertex AI Pipelines and push it to `repository`:
    vtrain, its pipelines dependencies, and the job file and what it names (its trainer folder, its
    requirements files) at their absolute paths, on `base`. Returns what the push did
    (:class:`vtrain.trainer.image.build.Pushed`); its ``image`` (``REPOSITORY:TAG@DIGEST``) is ``launcher_op``'s
    `image`. `python_version` (MAJOR.MINOR) and `platform` (a wheel platform tag such as
    ``manylinux_2_35_x86_64``): the base's, when its config does not say them. `index_args`: pip's index options
    for the wheels (pip's own settings apply too). A job with secret-looking values (what `vtrain render` shows
    as ``<redacted>``) or a file that looks like a credential is refused unless `allow_credentials`."""
    from vtrain.trainer.image import launcher

    job = launcher_job(job_file, allow_credentials=allow_credentials)
    return launcher.launcher_image(Path(job_file), repository, base=base, package=job.package, files=job.files,
                                   python_version=python_version, platform=platform, index_args=index_args,
                                   allow_credentials=allow_credentials, cache=cache, on_blob=on_blob)


__all__ = ["ALLOW", "launcher_image", "launcher_job", "planned_launcher_image"]
