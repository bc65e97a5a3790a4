"""A CustomJob body, whoever wrote it, made ready to run here and started: what `vtrain local REQUEST` and the
emulator's ``--run-jobs`` share.

A job file is prepared from its trainer folder (:func:`vtrain.local.runner.run_local` builds the sdist); a body
names its trainer only by what the request holds, so it is prepared from that:

- each Python pool's ``packageUris``, fetched (gs:// bounded and checked, :mod:`vtrain.local.downloads`; file:// and
  paths as they are) and installed once into the cached environment `vtrain local` uses;
- container images that vtrain built and pushed to a registry on this machine, their own layers unpacked; any other
  container pool runs under docker, as :func:`~vtrain.local.runner.run_job` decides;
- what this machine cannot rehearse (:func:`vtrain.local.unrehearsable.unrehearsable`, said by the runner for
  every run): one notice each, never a silent change.

Then :func:`~vtrain.local.runner.run_job` runs it, as it runs a job file's request: the runner does not know where
the body came from.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vtrain.local.env import Replica
    from vtrain.local.envcache import TrainerEnv
    from vtrain.local.image import LocalImage
    from vtrain.local.job import LocalJob
    from vtrain.local.options import RunOptions


def package_uris(job: Mapping[str, Any]) -> list[str]:
    """Every Python pool's packageUris, in pool order, each once (pools usually share them)."""
    uris: list[str] = []
    for pool in job["jobSpec"].get("workerPoolSpecs", []):
        for uri in (pool.get("pythonPackageSpec") or {}).get("packageUris", []):
            if uri not in uris:
                uris.append(uri)
    return uris


def _cache(cache_dir: str | os.PathLike[str] | None) -> Path:
    from vtrain.local import envcache

    return Path(cache_dir) if cache_dir is not None else envcache.default_cache_dir()


def install_packages(job: Mapping[str, Any], cache_dir: str | os.PathLike[str] | None,
                     notice: Callable[[str], None], runtime: str = "auto") -> tuple[TrainerEnv | None, dict[str, Any]]:
    """(the trainer environment with the job's packageUris installed, once per cache, or None without any;
    the prebuilt images to run in under --runtime image): over the image's stack for a prebuilt image, as
    `vtrain local` runs it (`runtime`: :mod:`vtrain.local.runtimes`)."""
    from vtrain.local.downloads import fetch_packages
    from vtrain.local.runtimes import choose_runtime, python_runtime

    uris = package_uris(job)
    if not uris:
        return None, {}
    choice = choose_runtime(job, runtime)
    cache = _cache(cache_dir)
    notice(f"installing {len(uris)} package(s): {', '.join(uris)}")
    return python_runtime(fetch_packages(uris, cache), cache, choice, notice)


def pull_images(job: Mapping[str, Any], cache_dir: str | os.PathLike[str] | None,
                notice: Callable[[str], None]) -> dict[str, LocalImage]:
    """The job's images that vtrain built and pushed to a registry on this machine, their own layers
    downloaded and unpacked (never the base's): the replicas run what was pushed, with no docker."""
    from vtrain.local.image import pull_images as pull

    images = pull(job, _cache(cache_dir))
    for uri, image in images.items():
        notice(f"image {uri}: vtrain's layers unpacked in {image.root}")
    return images


def with_step_log(body: Mapping[str, Any]) -> dict[str, Any]:
    """The job with VTRAIN_STEP_LOG=1 in every pool's env (unless the job sets it): the replicas run under
    `vtrain local`, which gives them a status file, yet should log their steps as they do on Vertex."""
    from vtrain.runtime.steplog import STEP_LOG_ENV

    out = copy.deepcopy(dict(body))
    for pool in out["jobSpec"].get("workerPoolSpecs", []):
        spec = pool.get("pythonPackageSpec", pool.get("containerSpec"))
        if spec is not None and not any(e.get("name") == STEP_LOG_ENV for e in spec.get("env", [])):
            spec.setdefault("env", []).append({"name": STEP_LOG_ENV, "value": "1"})
    return out


def run_request(
    body: Mapping[str, Any],
    *,
    options: RunOptions | None = None,
    name: str | None = None,
    job_id: str | None = None,
    out: IO[str] | None = None,
    notice: Callable[[str], None] = lambda text: None,
    on_line: Callable[[Replica, str, str], None] | None = None,
) -> LocalJob:
    """Prepare a CustomJob REST body here (its packages, its images) and start it: the running job's handle.

    `options` as for any local run (:class:`~vtrain.local.options.RunOptions`: `cache_dir` is where the packages
    are installed); the rest as :func:`~vtrain.local.runner.run_job`. Raises PackagingError/BackendError before
    anything starts when a package cannot be fetched or installed."""
    from vtrain.local.env import plan
    from vtrain.local.faults import check_replicas
    from vtrain.local.options import run_options
    from vtrain.local.runner import run_job

    opts = run_options(options, {}, "run_request")
    if opts.faults:  # a fault for a replica this run lacks: refused before anything is fetched
        try:
            labels = [r.label for r in plan(body, opts.max_replicas).replicas]
        except ValueError:
            labels = None  # a job the plan refuses is reported by run_job
        if labels is not None:
            check_replicas(opts.faults, labels)
    trainer_env, prebuilt = install_packages(body, opts.cache_dir, notice, opts.runtime)
    images = {**pull_images(body, opts.cache_dir, notice), **prebuilt}
    return run_job(body, trainer_env=trainer_env, options=opts, name=name, job_id=job_id, out=out, notice=notice,
                   on_line=on_line, images=images)


__all__ = ["install_packages", "package_uris", "pull_images", "run_request", "with_step_log"]
