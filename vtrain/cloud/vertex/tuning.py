"""HyperparameterTuningJobs through the official client: create, get, list, cancel, and the trial table.

The same :class:`~vtrain.cloud.vertex.client.VertexBackend` (client, retry policy, one-line
refusals) serves both job kinds; this module adds the calls of the `hyperparameterTuningJobs`
collection and :class:`VertexTuningJob`, the handle (a VertexJob whose proto is a
HyperparameterTuningJob), so `wait`, `--wait` exit codes, `cancel` and `logs` work unchanged.
create() is made retry-safe as for CustomJobs: a `vtrain-submit-id` label, looked up after an
ambiguous failure before sending again.

A bare numeric ID does not say which collection it is in: :func:`get_any` asks for a CustomJob
first and, when there is none, for a tuning job.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

from vtrain.cloud.vertex.client import SUBMIT_LABEL, VertexBackend, VertexJob
from vtrain.cloud.vertex.logs import entry_parts, log_line, replica_label
from vtrain.errors import BackendError
from vtrain.handle import TERMINAL_STATES
from vtrain.network import reached_server
from vtrain.tuning.table import TrialRow

COLLECTION = "hyperparameterTuningJobs"
CONSOLE_URL = "https://console.cloud.google.com/vertex-ai/training/hyperparameter-tuning-jobs?project={project}"
_NAME_RE = re.compile(r"^projects/([^/]+)/locations/([^/]+)/hyperparameterTuningJobs/([0-9]+)$")
_ID_RE = re.compile(r"^[0-9]+$")
_TRIAL_LABEL = "ml.googleapis.com/trial_id"


def _permission(verb: str) -> str:
    return f"aiplatform.hyperparameterTuningJobs.{verb}"


def is_tuning_name(job: str) -> bool:
    return f"/{COLLECTION}/" in job


def _value(value: Any) -> str:
    """A Trial.Parameter value (a protobuf Value) as the trial's flag shows it."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class VertexTuningJob(VertexJob):
    """A HyperparameterTuningJob on Vertex AI (or the emulator); `proto` is the last one fetched."""

    kind = "tuning"

    @property
    def console_url(self) -> str:
        return CONSOLE_URL.format(project=self._backend.project)

    def refresh(self) -> str:
        self._update(_get_proto(self._backend, self._name))
        return self._state

    def cancel(self) -> None:
        cancel_tuning(self._backend, self)

    @property
    def metric(self) -> tuple[str, bool]:
        """(metric id, maximize) of the study's first metric."""
        metrics = list(self.proto.study_spec.metrics)
        if not metrics:
            return "metric", True
        return metrics[0].metric_id, metrics[0].goal.name == "MAXIMIZE"

    def rows(self) -> list[TrialRow]:
        """One row per trial: state, parameters, final metric (Vertex's names)."""
        metric, _ = self.metric
        rows = []
        for trial in self.proto.trials:
            params = {p.parameter_id: _value(p.value) for p in trial.parameters}
            value, step = None, None
            for m in trial.final_measurement.metrics:
                if m.metric_id == metric:
                    value, step = float(m.value), int(trial.final_measurement.step_count)
            rows.append(TrialRow(str(trial.id), trial.state.name, params, value, step,
                                 str(trial.infeasible_reason or "")[:60]))
        return rows

    @property
    def best_trial(self) -> str | None:
        from vtrain.tuning.search import best_index

        rows = [r for r in self.rows() if r.state == "SUCCEEDED"]
        index = best_index([r.value for r in rows], self.metric[1])
        return None if index is None else rows[index].id

    def logs(self, *, follow: bool = False, poll: float | None = None, replica: str | None = None,
             timestamps: bool = False) -> Iterator[str]:
        """Cloud Logging lines of every trial, prefixed `[trial-N chief-0]` (`[vertex]` for the service's)."""
        from vtrain.cloud.vertex.logs import iter_log_lines, task_name

        task = task_name(replica) if replica else None

        def format(entry: dict[str, Any]) -> str | None:
            timestamp, name, message = entry_parts(entry)
            if task and name != task:
                return None
            trial = (entry.get("labels") or {}).get(_TRIAL_LABEL)
            label = replica_label(name)
            return log_line(f"trial-{trial} {label}" if trial else label, message, timestamp if timestamps else None)

        backend = self._backend
        return iter_log_lines(
            lambda since, token: backend._log_page(self.job_id, since, token, task),
            job_done=lambda: self.refresh() in TERMINAL_STATES,
            sleep=lambda: self._sleep(self.default_poll if poll is None else poll),
            follow=follow,
            format=format,
        )


def tuning_name(backend: VertexBackend, job: str | VertexJob) -> str:
    if isinstance(job, VertexJob):
        return job.name
    text = job.strip()
    if _ID_RE.match(text):
        return f"{backend.parent}/{COLLECTION}/{text}"
    m = _NAME_RE.match(text)
    if not m:
        raise BackendError(f"'{job}' is neither a job ID (digits) nor a resource name "
                           f"projects/PROJECT/locations/REGION/{COLLECTION}/ID")
    if m.group(2) != backend.region:
        raise BackendError(f"job {text} is in region {m.group(2)}, not {backend.region}; pass --region {m.group(2)}")
    return text


def create_tuning(backend: VertexBackend, job: Any) -> VertexTuningJob:
    """Create a HyperparameterTuningJob (retry-safe as VertexBackend.create) and return its handle."""
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob, ListHyperparameterTuningJobsRequest

    body = HyperparameterTuningJob.deserialize(HyperparameterTuningJob.serialize(job))
    token = uuid.uuid4().hex
    body.labels[SUBMIT_LABEL] = token
    lookup = ListHyperparameterTuningJobsRequest(parent=backend.parent, filter=f'labels.{SUBMIT_LABEL}="{token}"',
                                                 page_size=1)
    maybe_created = False

    def note_failure(err: BaseException) -> None:  # a failure that may have created the job: look first
        nonlocal maybe_created
        maybe_created = maybe_created or reached_server(err)

    def attempt() -> Any:
        nonlocal maybe_created
        if maybe_created:
            earlier = list(backend.client.list_hyperparameter_tuning_jobs(request=lookup).hyperparameter_tuning_jobs)
            maybe_created = False
            if earlier:
                return earlier[0]
        return backend.client.create_hyperparameter_tuning_job(parent=backend.parent,
                                                               hyperparameter_tuning_job=body)

    from google.api_core.exceptions import GoogleAPICallError
    from google.auth.exceptions import GoogleAuthError
    from requests.exceptions import RequestException

    from vtrain.cloud.vertex.retry import TransientExhausted, call_with_retry

    try:
        proto = call_with_retry(attempt, backend.retry, note_failure, what=f"Vertex AI at {backend.api_endpoint}")
    except (GoogleAPICallError, GoogleAuthError, RequestException, TransientExhausted) as err:
        raise backend._explain(err, f"create tuning job '{job.display_name}'", backend.parent,
                               _permission("create"), "roles/aiplatform.user") from None
    return VertexTuningJob(backend, proto)


def _get_proto(backend: VertexBackend, name: str) -> Any:
    return backend._call(lambda: backend.client.get_hyperparameter_tuning_job(name=name), action=f"get job {name}",
                         resource=name, permission=_permission("get"))


def get_tuning(backend: VertexBackend, job: str | VertexJob) -> VertexTuningJob:
    return VertexTuningJob(backend, _get_proto(backend, tuning_name(backend, job)))


def get_any(backend: VertexBackend, job: str) -> VertexJob:
    """A CustomJob or a HyperparameterTuningJob, by full name or by bare ID (CustomJobs first)."""
    text = job.strip()
    if is_tuning_name(text):
        return get_tuning(backend, text)
    if not _ID_RE.match(text):
        return backend.get(text)
    try:
        return backend.get(text)
    except BackendError as err:
        if "not found" not in str(err):
            raise
        try:
            return get_tuning(backend, text)
        except BackendError:
            raise err from None


def list_tuning(backend: VertexBackend, filter: str, limit: int | None) -> list[VertexTuningJob]:
    """Newest first, `filter` in Vertex's syntax."""
    from google.cloud.aiplatform_v1 import ListHyperparameterTuningJobsRequest

    out: list[Any] = []
    token = ""
    while limit is None or len(out) < limit:
        size = 100 if limit is None else min(100, limit - len(out))
        request = ListHyperparameterTuningJobsRequest(parent=backend.parent, filter=filter, page_size=size,
                                                      page_token=token)
        page = backend._call(lambda request=request: backend.client.list_hyperparameter_tuning_jobs(request=request),
                             action="list tuning jobs", resource=backend.parent, permission=_permission("list"))
        out.extend(page.hyperparameter_tuning_jobs)
        token = page.next_page_token
        if not token:
            break
    return [VertexTuningJob(backend, p) for p in (out if limit is None else out[:limit])]


def cancel_tuning(backend: VertexBackend, job: str | VertexJob) -> VertexTuningJob:
    """Request cancellation; a job that already ended is returned as it is."""
    name = tuning_name(backend, job)
    current = job if isinstance(job, VertexTuningJob) else get_tuning(backend, name)
    if current.refresh() in TERMINAL_STATES:
        return current
    backend._call(lambda: backend.client.cancel_hyperparameter_tuning_job(name=name), action=f"cancel job {name}",
                  resource=name, permission=_permission("cancel"))
    current.refresh()
    return current


__all__ = ["COLLECTION", "VertexTuningJob", "cancel_tuning", "create_tuning", "get_any", "get_tuning",
           "is_tuning_name", "list_tuning", "tuning_name"]
