"""Starting a study on this machine from a job file: the SDK behind `vtrain local` on a tuning job.

    study = run_local_tuning(vtrain.load_config("job.yaml", target="local"), max_parallel=2, seed=7)
    study.wait(); study.best

The trainer is packaged and installed exactly as for `vtrain local` (one cached environment
for every trial), then :class:`~vtrain.local.studies.LocalTuningJob` runs the body `submit`
would send.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vtrain.errors import BackendError, UsageError
from vtrain.local.options import RunKeywords, RunOptions, run_options
from vtrain.local.studies import LocalTuningJob, machine_parallelism

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

    from vtrain.jobfile.config import JobConfig


def run_local_tuning(
    config: JobConfig | str | os.PathLike[str] | Mapping[str, Any],
    *,
    options: RunOptions | None = None,
    max_parallel: int | None = None,
    seed: int = 0,
    out: IO[str] | None = None,
    notices: IO[str] | None = None,
    on_change: Callable[[LocalTuningJob], None] | None = None,
    **keywords: Unpack[RunKeywords],
) -> LocalTuningJob:
    """Start the study of a job file with `tuning:` here and return its handle (RUNNING).

    `max_parallel` (default: the job's parallel_trials) is bounded by this machine: one CPU
    core per replica of a trial. `options` (:class:`~vtrain.local.options.RunOptions`, or its
    fields as keywords, as before: ``timeout=``, ``restart_policy=``, ...) apply to every trial;
    `timeout` limits each trial (default: scheduling.timeout). Outputs: `output_dir`, else the
    job's local base_output_dir, else a new temporary dir (kept: it holds the study's results).
    Each trial writes under `OUTPUT/<trial id>/`. Replica lines go to `out` prefixed
    `[trial-N chief-0]` (None: only to each trial's log files); `on_change(study)` is called
    whenever a trial starts, reports or ends. `faults` are refused (UsageError): they apply to a
    single job.
    """
    from vtrain.jobfile.artifacts import Artifacts, plan_artifacts
    from vtrain.jobfile.config import JobConfig
    from vtrain.jobfile.load import load_config
    from vtrain.local.runner import local_output_dir, prepare_images, prepare_trainer
    from vtrain.request.build import TUNING_JOB, build_request, kind_of, trial_job_spec

    if not isinstance(config, JobConfig):
        config = load_config(config, target="local")
    if kind_of(config) != TUNING_JOB or config.tuning is None:
        raise BackendError("this job file has no tuning: block; run it with `vtrain local` as one job")
    tuning = config.tuning

    def notice(text: str) -> None:
        if notices is not None:
            notices.write(f"[vtrain] {text}\n")
            notices.flush()

    opts = run_options(options, keywords, "run_local_tuning")
    if opts.faults:
        raise UsageError("faults apply to a single job: a job file with `tuning:` runs a study of many trials")
    trainer_env, package_uris, prebuilt = prepare_trainer(config, opts.cache_dir, opts.allow_credentials, notice,
                                                          opts.runtime)
    planned = plan_artifacts(config) if package_uris is None else package_uris  # one read names and builds
    images = {**prepare_images(config, opts.cache_dir, opts.allow_credentials, notice, opts.containers,
                               planned if isinstance(planned, Artifacts) else None), **prebuilt}
    body = build_request(config, planned).body
    bound = machine_parallelism(body, opts.max_replicas)
    wanted = tuning.parallel_trials if max_parallel is None else max_parallel
    if wanted > bound:
        notice(f"{wanted} trials at a time do not fit this machine ({os.cpu_count()} CPU cores, one per replica): "
               f"running {bound} at a time")
        wanted = bound
    where = opts.output_dir if opts.output_dir is not None else local_output_dir({"jobSpec": trial_job_spec(body)})
    if where is None:
        where = tempfile.mkdtemp(prefix=f"vtrain-tuning-{config.name[:40]}-")
    # Each trial is a CustomJob: its replicas are restarted as Vertex restarts them (or fail fast: "never").
    study = LocalTuningJob(body, trainer_env=trainer_env, output_dir=Path(where).expanduser().absolute(),
                           name=config.name, max_parallel=wanted, seed=seed, out=out, notice=notice,
                           options=opts, on_change=on_change, images=images)
    return study.start()


__all__ = ["run_local_tuning"]
