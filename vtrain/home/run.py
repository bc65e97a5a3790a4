"""`vtrain.run_local`: any job on this machine, a job file or a CustomJob someone else wrote.

    job = vtrain.run_local("job.yaml")                      # a job file
    job = vtrain.run_local("projects/p/locations/us-central1/customJobs/42")  # a job on Vertex AI, by name or ID
    job = vtrain.run_local(custom_job)                      # an aiplatform_v1.CustomJob, or its REST dict
    job.wait(); job.state

A job file goes to :func:`vtrain.local.runner.run_local` (its trainer folder built and installed); a CustomJob to
:func:`vtrain.local.bodies.run_request` (its packageUris fetched and installed, its images pulled). Both start the
same runner, with the same options, restart policy, faults, logs and result.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

    from vtrain.cloud.target import Where
    from vtrain.jobfile.config import JobConfig
    from vtrain.local.env import Replica
    from vtrain.local.job import LocalJob
    from vtrain.local.options import RunKeywords, RunOptions
    from vtrain.local.runner import TextSink


def run_local(
    job: JobConfig | str | os.PathLike[str] | Mapping[str, Any] | Any,
    *,
    where: Where | None = None,
    options: RunOptions | None = None,
    out: IO[str] | None = None,
    notices: TextSink | None = None,
    on_line: Callable[[Replica, str, str], None] | None = None,
    **keywords: Unpack[RunKeywords],
) -> LocalJob:
    """Start a job on this machine and return its handle (RUNNING); `wait()` for the end.

    `job` is a job file (a JobConfig, or what :func:`~vtrain.load_config` takes: a path, YAML text, a mapping,
    loaded for the local target), or a CustomJob someone else wrote: an ``aiplatform_v1.CustomJob``, its REST body
    as a mapping (``jobSpec`` in it), a request file (a REST body such as ``gcloud ai custom-jobs describe
    --format=json`` prints, a gcloud ``--config`` file: :mod:`vtrain.request.read`), or a job on Vertex AI by
    resource name or ID, read where `where` says (:class:`~vtrain.cloud.target.Where`: project, region, API
    endpoint). A CustomJob's packages are fetched from its ``packageUris`` (gs:// bounded and checked) and what
    this machine cannot rehearse of it is said once per field.

    `options` how the run behaves (:class:`~vtrain.local.options.RunOptions`; the keywords of earlier versions,
    ``timeout=600, keep=False, ...``, are its fields and still accepted). Replica logs go to `out` prefixed
    `[chief-0]` (None: only to files), launcher notices to `notices`; `on_line(replica, text, stream)` gets every
    line a replica prints. Outputs go to `output_dir`, else the job's base output dir when it is local, else a new
    temporary directory (removed when the job succeeds unless `keep`); this run's logs and result go to its own
    folder, ``OUTPUT/vtrain-local/JOB_ID``. Raises PackagingError/BackendError before anything starts if the job
    cannot run here, UsageError for a request the API would refuse.
    """
    from vtrain.home.source import job_request
    from vtrain.jobfile.config import JobConfig
    from vtrain.local.options import run_options
    from vtrain.local.runner import run_local as run_job_file

    incoming = None if isinstance(job, JobConfig) else job_request(job, where)
    if incoming is None:
        return run_job_file(job, options=options, out=out, notices=notices, on_line=on_line, **keywords)
    from vtrain.local.bodies import run_request

    def notice(text: str) -> None:
        if notices is not None:
            notices.write(f"[vtrain] {text}\n")
            notices.flush()

    notice(f"running {incoming.origin}")
    return run_request(incoming.body, options=run_options(options, keywords, "run_local"), name=incoming.name,
                       out=out, notice=notice, on_line=on_line)


__all__ = ["run_local"]
