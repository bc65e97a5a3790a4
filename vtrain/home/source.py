"""Any CustomJob, from wherever it is, as the REST body the local runner starts: the input side of bringing a job
home.

`vtrain local X` and :func:`vtrain.run_local` take a job file, or a CustomJob someone else wrote:

- a request file (a REST body, a create request, a gcloud ``--config`` file: :mod:`vtrain.request.read`);
- a CustomJob proto or its REST body as a mapping;
- a job on Vertex AI (or the emulator) by resource name ``projects/P/locations/R/customJobs/ID`` or by ID, read with
  ``customJobs.get`` where ``--project/--region/--api-endpoint`` say (:class:`vtrain.cloud.target.Where`).

:func:`job_request` tells them apart and answers with an :class:`Incoming`, or None for a job file (which
:func:`vtrain.load_config` reads). The runner never learns which it was.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtrain.errors import UsageError

if TYPE_CHECKING:
    from vtrain.cloud.target import Where

_JOB_NAME = re.compile(r"^projects/[^/\s]+/locations/[^/\s]+/customJobs/[0-9]+$")
_JOB_ID = re.compile(r"^[0-9]{1,30}$")


@dataclass(frozen=True)
class Incoming:
    """A CustomJob to run here: its REST body (checked against the API's proto), its display name, and where it
    came from in words (`a REST body in job.json`, `job projects/…/customJobs/123 on Vertex AI`)."""

    body: dict[str, Any]
    name: str
    origin: str
    job_name: str | None = None  # the resource name when it was read from Vertex


def is_job_reference(text: str) -> bool:
    """A job resource name or a bare job ID (all digits)."""
    return bool(_JOB_NAME.match(text.strip()) or _JOB_ID.match(text.strip()))


def fetch_vertex_job(job: str, where: Where | None = None) -> tuple[Incoming, Any]:
    """The CustomJob `job` (ID or resource name) as stored on Vertex, read with get: every field as the API answers
    it (secrets too: they are what the replicas get); with the job's handle (:class:`~vtrain.cloud.vertex.VertexJob`,
    for its log). UsageError for a HyperparameterTuningJob."""
    from google.protobuf import json_format

    from vtrain.cloud.jobs import open_backend
    from vtrain.cloud.vertex.tuning import is_tuning_name
    from vtrain.request.read import checked_custom_job

    if is_tuning_name(job.strip()):
        raise UsageError(f"{job} is a HyperparameterTuningJob; `vtrain local` runs a CustomJob")
    found = open_backend(job, where).get(job.strip())
    body = checked_custom_job(json_format.MessageToDict(found.proto._pb))
    return Incoming(body, found.display_name or found.job_id, f"job {found.name} on Vertex AI", found.name), found


def read_vertex_job(job: str, where: Where | None = None) -> Incoming:
    """The CustomJob `job` (ID or resource name) as stored on Vertex (:func:`fetch_vertex_job`)."""
    return fetch_vertex_job(job, where)[0]


def request_body(value: object) -> dict[str, Any] | None:
    """The CustomJob REST body `value` holds, checked (:func:`vtrain.request.read.checked_custom_job`): a proto or a
    mapping with ``jobSpec`` (or a create request, a gcloud config's mapping); None for anything else."""
    from vtrain.request.read import checked_custom_job, shape

    if hasattr(value, "_pb") or hasattr(value, "DESCRIPTOR"):  # aiplatform_v1.CustomJob, or its protobuf
        from google.protobuf import json_format

        message: Any = getattr(value, "_pb", value)
        return checked_custom_job(json_format.MessageToDict(message))
    if isinstance(value, Mapping):
        found = shape(value)
        return None if found is None else checked_custom_job(found.body)
    return None


def job_request(value: Any, where: Where | None = None) -> Incoming | None:
    """The CustomJob `value` is, or holds (see the module); None when it is a job file."""
    from vtrain.request.read import holds_request, read_request

    if isinstance(value, (str, os.PathLike)) and "\n" not in os.fspath(value):  # a path or a name, not YAML text
        text = os.fspath(value)
        path = Path(text)
        try:
            exists, is_file = path.exists(), path.is_file()
        except (OSError, ValueError):  # a name too long, a NUL: load_config says what is wrong
            return None
        if not exists and isinstance(value, str) and is_job_reference(text):
            return read_vertex_job(text, where)
        if is_file and holds_request(path):
            found = read_request(path)
            return Incoming(found.body, str(found.body.get("displayName") or path.stem), f"{found.form} in {text}")
        return None
    body = request_body(value)
    if body is None:
        return None
    return Incoming(body, str(body.get("displayName") or "job"), "a CustomJob given to run_local")


__all__ = ["Incoming", "fetch_vertex_job", "is_job_reference", "job_request", "read_vertex_job", "request_body"]
