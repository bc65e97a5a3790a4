"""Finding and following jobs that exist: open a backend, get, cancel, list, read back as REST JSON, wait.

`submit` (:mod:`vtrain.cloud.submit`) creates jobs; this module holds what every later command does
with one: `status`, `logs`, `cancel`, `list`, `timeline`, `submit --wait` and `--recover`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vtrain.cloud.submit import connect
from vtrain.cloud.target import Where

if TYPE_CHECKING:
    from vtrain.cloud.vertex import VertexBackend, VertexJob
    from vtrain.handle import JobHandle
    from vtrain.jobfile.config import JobConfig


# ---- existing jobs ----------------------------------------------------------------------------
def open_backend(job: str | None = None, where: Where | None = None, *, poll: float | None = None,
                 config: JobConfig | None = None) -> VertexBackend:
    """A backend for `job` (an ID, or a full name that fixes project and region) or for listing; `config`: a job
    file whose project and region come after the flags (:meth:`Where.resolve`)."""
    return connect((where or Where()).resolve(config=config, job=job), poll=poll)


def get_job(job: str, where: Where | None = None, *, poll: float | None = None,
            config: JobConfig | None = None) -> VertexJob:
    """A CustomJob or HyperparameterTuningJob by ID or resource name; a bare ID is looked for where the flags,
    then `config` (the job file), then the environment say."""
    from vtrain.cloud.vertex.tuning import get_any

    return get_any(open_backend(job, where, poll=poll, config=config), job)


def cancel_job(job: str, where: Where | None = None) -> tuple[VertexJob, bool]:
    """Ask a job to stop: (the job, whether a cancel was sent). One that already ended is left alone."""
    from vtrain.cloud.vertex.tuning import get_any

    backend = open_backend(job, where)
    current = get_any(backend, job)
    if current.done:
        return current, False
    current.cancel()  # each kind cancels through its own collection
    return current, True


def list_jobs(
    where: Where | None = None, *, state: str | None = None, limit: int | None = 20, filter: str | None = None
) -> list[VertexJob]:
    """CustomJobs and HyperparameterTuningJobs, newest first; `state` like running or JOB_STATE_RUNNING;
    `filter` in Vertex's syntax."""
    from vtrain.cloud.vertex.tuning import list_tuning

    backend = open_backend(None, where)
    custom = backend.list(state=state, limit=limit, filter=filter)
    terms = []  # backend.list checked the state word; the same filter for the other collection
    if state:
        full = state.upper() if state.upper().startswith("JOB_STATE_") else f"JOB_STATE_{state.upper()}"
        terms.append(f'state="{full}"')
    if filter:
        terms.append(filter)
    tuning = list_tuning(backend, " AND ".join(terms), limit)
    jobs = sorted([*custom, *tuning], key=lambda j: j.proto.create_time, reverse=True)
    return jobs if limit is None else jobs[:limit]


def job_dict(job: VertexJob) -> dict[str, Any]:
    """The job as Vertex's REST JSON (camelCase), secret-looking env values redacted."""
    from google.protobuf import json_format

    from vtrain.request.render import redact

    return redact(json_format.MessageToDict(job.proto._pb))


# ---- waiting ----------------------------------------------------------------------------------
def watch(
    job: JobHandle,
    *,
    timeout: float | None = None,
    poll: float | None = None,
    on_state: Callable[[str, float], None] | None = None,
    on_log: Callable[[str], None] | None = None,
) -> str:
    """Wait for a final state, calling `on_state(state, elapsed)` after each poll and, with
    `on_log`, streaming the job's log lines meanwhile. WaitTimeout once `timeout` s pass.
    The handle does the waiting (:meth:`JobHandle.wait`); this is the SDK's name for it."""
    return job.wait(timeout, poll, on_state=on_state, on_log=on_log)
