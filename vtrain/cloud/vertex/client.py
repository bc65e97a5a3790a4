"""Vertex AI CustomJobs through the official client: create, get, list, cancel, delete, logs.

The backend takes its `JobServiceClient` as an argument, so tests hand it a real client
pointed at the in-repo emulator (`vtrain.emulator`) and production hands it one pointed at
`{region}-aiplatform.googleapis.com`. Both use the REST transport: the code path the tests
exercise is the one that talks to Google. Every call is retried on transient errors
(`retry.RetryPolicy`) and every refusal becomes one BackendError line (`retry.explain`).

create() is not idempotent on the server, so it stamps the job with a label
`vtrain-submit-id=<uuid>`; after an ambiguous failure (a 5xx, a dropped connection, a timeout or
a garbled answer, when the job may exist although the answer was lost) it looks the label up
before sending again, and never creates the same submission twice. When the retries run out
after such a failure it looks once more, and otherwise raises CreateOutcomeUnknown, which says
the job may exist and how to find it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from vtrain.cloud.vertex.logreader import SCOPES, JobLogReader
from vtrain.cloud.vertex.logs import entry_parts, log_line, replica_label, task_name
from vtrain.cloud.vertex.registered import Registered
from vtrain.cloud.vertex.retry import (
    RetryPolicy,
    TransientExhausted,
    call_with_retry,
    exhausted,
    explain,
    lost_create,
)
from vtrain.errors import BackendError
from vtrain.handle import TERMINAL_STATES, JobHandle, Waiting
from vtrain.network import reached_server

T = TypeVar("T")

LOGGING_ENDPOINT = "https://logging.googleapis.com"
SUBMIT_LABEL = "vtrain-submit-id"
CONSOLE_URL = (
    "https://console.cloud.google.com/vertex-ai/locations/{region}/training/{id}/cpu?project={project}"
)
_NAME_RE = re.compile(r"^projects/([^/]+)/locations/([^/]+)/customJobs/([0-9]+)$")
_ID_RE = re.compile(r"^[0-9]+$")
def _has_reducers(proto: Any) -> bool:
    pools = list(proto.job_spec.worker_pool_specs)
    return len(pools) > 2 and "/reductionserver" in pools[2].container_spec.image_uri


class VertexJob(JobHandle):
    """A CustomJob on Vertex AI (or the emulator); `proto` is the last fetched CustomJob."""

    default_poll = 10.0
    #: The Model Registry version this job's model was registered as, once ``vtrain.submit(..., wait=True)`` saw
    #: the job SUCCEED with a `model:` block (None before, and for a job without one).
    registered: Registered | None = None

    def __init__(self, backend: VertexBackend, proto: Any) -> None:
        super().__init__(proto.name)
        self._backend = backend
        self.default_poll = backend.poll
        self._update(proto)

    def _update(self, proto: Any) -> None:
        self.proto = proto
        self._state = proto.state.name
        self._error = proto.error.message or None if self._state != "JOB_STATE_SUCCEEDED" else None

    @property
    def job_id(self) -> str:
        return self._name.rsplit("/", 1)[-1]

    @property
    def display_name(self) -> str:
        return str(self.proto.display_name)

    @property
    def console_url(self) -> str:
        return CONSOLE_URL.format(region=self._backend.region, id=self.job_id, project=self._backend.project)

    @property
    def project(self) -> str:
        """The project as the caller named it (the job's name carries its number)."""
        return self._backend.project

    def refresh(self) -> str:
        self._update(self._backend._get_proto(self._name))
        return self._state

    def cancel(self) -> None:
        self._backend.cancel(self)

    def _follow(self, waiting: Waiting) -> Iterator[str]:
        return self._backend._logs(self, follow=True, poll=waiting.poll, task=None, format=self._formatter(None, False),
                                   waiting=waiting)

    def follow_entries(self, on_entry: Callable[[dict[str, Any], str], None], *, timeout: float | None = None,
                       poll: float | None = None, on_state: Callable[[str, float], None] | None = None) -> str:
        """`wait` that hands each log entry, with its '[chief-0] MESSAGE' line, to `on_entry` as it
        arrives (the live view reads steps from them): per poll one GetCustomJob and one entries:list
        page (more only when over 1000 entries came meanwhile). WaitTimeout as `wait`."""
        waiting = Waiting(self, timeout, self.default_poll if poll is None else poll, on_state)
        line = self._formatter(None, False)

        def take(entry: dict[str, Any]) -> None:
            on_entry(entry, line(entry) or "")

        for _ in self._backend._logs(self, follow=True, poll=waiting.poll, task=None, format=take, waiting=waiting):
            pass  # take() returns None: nothing is yielded
        waiting.check(self.state)
        return self._state

    def logs(
        self,
        *,
        follow: bool = False,
        poll: float | None = None,
        replica: str | None = None,
        timestamps: bool = False,
    ) -> Iterator[str]:
        """Cloud Logging lines for this job (`resource.type="ml_job"`) as '[chief-0] MESSAGE',
        the prefixes `vtrain local` uses ('[vertex]' for Vertex's own lines); `replica` keeps
        one replica's lines, `timestamps` starts each line with the entry's timestamp."""
        task = task_name(replica) if replica else None
        return self._backend._logs(
            self, follow=follow, poll=self.default_poll if poll is None else poll, task=task,
            format=self._formatter(task, timestamps),
        )

    def _formatter(self, task: str | None, timestamps: bool) -> Callable[[dict[str, Any]], str | None]:
        reducers = _has_reducers(self.proto)

        def format(entry: dict[str, Any]) -> str | None:
            timestamp, name, message = entry_parts(entry)
            if task and name != task:
                return None
            return log_line(replica_label(name, reducers), message, timestamp if timestamps else None)

        return format


class VertexBackend(JobLogReader):
    def __init__(
        self,
        client: Any,
        project: str,
        region: str,
        *,
        retry: RetryPolicy | None = None,
        credentials: Any = None,
        logging_endpoint: str = LOGGING_ENDPOINT,
        poll: float = 10.0,
        api_endpoint: str | None = None,
    ) -> None:
        self.client = client
        #: Where calls go, for messages: the emulator's URL, or the regional Google endpoint.
        self.api_endpoint = api_endpoint or f"https://{region}-aiplatform.googleapis.com"
        self.project = project
        self.region = region
        self.retry = retry or RetryPolicy()
        self.credentials = credentials
        self.logging_endpoint = logging_endpoint.rstrip("/")
        self.poll = poll
        self._session: Any = None

    @classmethod
    def from_endpoint(
        cls,
        project: str,
        region: str,
        api_endpoint: str | None = None,
        *,
        credentials: Any = None,
        retry: RetryPolicy | None = None,
    ) -> VertexBackend:
        """The default wiring: `{region}-aiplatform.googleapis.com` with ADC, or, for an
        `http://` endpoint (the emulator), the same REST client with anonymous credentials."""
        from google.auth.credentials import AnonymousCredentials
        from google.auth.exceptions import DefaultCredentialsError
        from google.cloud.aiplatform_v1 import JobServiceClient

        endpoint = api_endpoint or f"{region}-aiplatform.googleapis.com"
        local = endpoint.startswith("http://")
        if credentials is None and local:
            credentials = AnonymousCredentials()
        if credentials is None:
            import google.auth

            try:
                credentials, _ = google.auth.default(scopes=SCOPES)
            except DefaultCredentialsError as err:
                raise explain(
                    err,
                    action="connect to Vertex AI",
                    resource=endpoint,
                    project=project,
                    region=region,
                    permission="",
                ) from None
        client = JobServiceClient(
            transport="rest", credentials=credentials, client_options={"api_endpoint": endpoint}
        )
        return cls(
            client,
            project,
            region,
            retry=retry,
            credentials=credentials,
            logging_endpoint=endpoint if local else LOGGING_ENDPOINT,
            api_endpoint=endpoint if "://" in endpoint else f"https://{endpoint}",
        )

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def job_name(self, job: str | VertexJob) -> str:
        """A job ID or a full resource name → the full name in this backend's region."""
        if isinstance(job, VertexJob):
            return job.name
        text = job.strip()
        if _ID_RE.match(text):
            return f"{self.parent}/customJobs/{text}"
        m = _NAME_RE.match(text)
        if not m:
            raise BackendError(
                f"'{job}' is neither a job ID (digits) nor a resource name "
                "projects/PROJECT/locations/REGION/customJobs/ID"
            )
        if m.group(2) != self.region:
            raise BackendError(
                f"job {text} is in region {m.group(2)}, not {self.region}; pass --region {m.group(2)}"
            )
        return text

    # ---- calls ------------------------------------------------------------------------
    @property
    def timeout(self) -> float:
        """Seconds one attempt waits to connect and for each read of the answer."""
        return self.retry.attempt_timeout()

    def _explain(self, err: BaseException, action: str, resource: str, permission: str, role: str) -> BackendError:
        return explain(
            err,
            action=action,
            resource=resource,
            project=self.project,
            region=self.region,
            permission=permission or "aiplatform.customJobs.create",
            role=role or "roles/aiplatform.user",
            endpoint=self.api_endpoint,
            timeout=self.timeout,
        )

    def _call(
        self,
        fn: Callable[..., T],
        *,
        action: str,
        resource: str,
        verb: str = "",
        permission: str = "",
        role: str = "roles/aiplatform.user",
        what: str = "",
    ) -> T:
        """Run one API call under the retry policy; refusals become one BackendError line."""
        from google.api_core.exceptions import GoogleAPICallError
        from google.auth.exceptions import GoogleAuthError
        from requests.exceptions import RequestException

        try:
            return call_with_retry(fn, self.retry, what=what or f"Vertex AI at {self.api_endpoint}")
        except (GoogleAPICallError, GoogleAuthError, RequestException, TransientExhausted) as err:
            permission = permission or f"aiplatform.customJobs.{verb}"
            raise self._explain(err, action, resource, permission, role) from None

    def create(self, job: Any, *, submit_id: str | None = None) -> VertexJob:
        """Submit a CustomJob (the caller's object is not modified) and return its handle.

        `submit_id` (default: a fresh uuid) goes on the job as the vtrain-submit-id label. One
        retry budget covers the whole submission: each attempt after an ambiguous failure first
        lists jobs by that label (one call, no nested retries) and returns the job it finds
        instead of sending the create again.
        """
        from google.api_core.exceptions import GoogleAPICallError
        from google.auth.exceptions import GoogleAuthError
        from google.cloud.aiplatform_v1 import CustomJob
        from requests.exceptions import RequestException

        body = CustomJob.deserialize(CustomJob.serialize(job))
        token = submit_id or uuid.uuid4().hex
        body.labels[SUBMIT_LABEL] = token
        maybe_created = False
        action = f"create job '{job.display_name}'"

        def note_failure(err: BaseException) -> None:
            nonlocal maybe_created
            maybe_created = maybe_created or reached_server(err)

        def attempt() -> Any:
            nonlocal maybe_created
            if maybe_created:
                earlier = self.find_submitted(token)
                maybe_created = False
                if earlier is not None:
                    return earlier
            return self.client.create_custom_job(parent=self.parent, custom_job=body, timeout=self.timeout)

        try:
            proto = call_with_retry(attempt, self.retry, note_failure, what=f"Vertex AI at {self.api_endpoint}")
        except TransientExhausted as err:
            if not (maybe_created or reached_server(err.last)):
                raise self._explain(err, action, self.parent, "", "") from None
            try:  # the answer was lost: one last look before saying so
                found = self.find_submitted(token)
            except Exception:  # noqa: BLE001 - unknown either way; the error below says so
                found, looked = None, False
            else:
                looked = True
            if found is not None:
                return VertexJob(self, found)
            why = exhausted(err, self.api_endpoint, self.timeout)
            find = (
                f"vtrain list --label {SUBMIT_LABEL}={token} --project {self.project} --region {self.region}"
                + ("" if self.api_endpoint.startswith("https://") else f" --api-endpoint {self.api_endpoint}")
            )
            raise lost_create(action, why, looked, token, find) from None
        except (GoogleAPICallError, GoogleAuthError, RequestException) as err:
            raise self._explain(err, action, self.parent, "", "") from None
        return VertexJob(self, proto)

    def find_submitted(self, submit_id: str) -> Any:
        """The job a create with this submit id made, or None: one list call, no retries."""
        from google.cloud.aiplatform_v1 import ListCustomJobsRequest

        lookup = ListCustomJobsRequest(parent=self.parent, filter=f'labels.{SUBMIT_LABEL}="{submit_id}"', page_size=1)
        jobs = list(self.client.list_custom_jobs(request=lookup, timeout=self.timeout).custom_jobs)
        return jobs[0] if jobs else None

    def submitted(self, submit_id: str) -> VertexJob | None:
        """The job a create with this submit id made, if any (retried like every call)."""
        proto = self._call(
            lambda: self.find_submitted(submit_id),
            action=f"look for the job of an earlier submit (submit id {submit_id})",
            resource=self.parent,
            verb="list",
        )
        return None if proto is None else VertexJob(self, proto)

    def _get_proto(self, name: str) -> Any:
        return self._call(
            lambda: self.client.get_custom_job(name=name, timeout=self.timeout),
            action=f"get job {name}",
            resource=name,
            verb="get",
        )

    def get(self, job: str | VertexJob) -> VertexJob:
        return VertexJob(self, self._get_proto(self.job_name(job)))

    def _list_protos(self, filter: str, limit: int | None) -> list[Any]:
        from google.cloud.aiplatform_v1 import ListCustomJobsRequest

        out: list[Any] = []
        token = ""
        while limit is None or len(out) < limit:
            size = 100 if limit is None else min(100, limit - len(out))
            request = ListCustomJobsRequest(
                parent=self.parent, filter=filter, page_size=size, page_token=token
            )
            page = self._call(
                lambda request=request: self.client.list_custom_jobs(request=request, timeout=self.timeout),
                action="list jobs",
                resource=self.parent,
                verb="list",
            )
            out.extend(page.custom_jobs)
            token = page.next_page_token
            if not token:
                break
        return out if limit is None else out[:limit]

    def list(
        self, *, state: str | None = None, limit: int | None = 50, filter: str | None = None
    ) -> list[VertexJob]:
        """Newest first. `state` accepts RUNNING or JOB_STATE_RUNNING; `filter` is Vertex's
        filter syntax, ANDed with the state."""
        from google.cloud.aiplatform_v1 import JobState

        terms = []
        if state:
            full = state.upper() if state.upper().startswith("JOB_STATE_") else f"JOB_STATE_{state.upper()}"
            if full not in JobState.__members__:
                names = ", ".join(
                    s[len("JOB_STATE_") :] for s in JobState.__members__ if s != "JOB_STATE_UNSPECIFIED"
                )
                raise BackendError(f"unknown job state '{state}'; use one of {names}")
            terms.append(f'state="{full}"')
        if filter:
            terms.append(filter)
        if limit is not None and limit < 1:
            raise BackendError(f"limit must be positive, got {limit}")
        return [VertexJob(self, p) for p in self._list_protos(" AND ".join(terms), limit)]

    def cancel(self, job: str | VertexJob) -> VertexJob:
        """Request cancellation; a job that already ended is returned as it is."""
        name = self.job_name(job)
        current = job if isinstance(job, VertexJob) else self.get(name)
        if current.refresh() in TERMINAL_STATES:
            return current
        self._call(
            lambda: self.client.cancel_custom_job(name=name, timeout=self.timeout),
            action=f"cancel job {name}",
            resource=name,
            verb="cancel",
        )
        current.refresh()
        return current

    def delete(self, job: str | VertexJob) -> None:
        """Delete a finished job (Vertex refuses to delete a live one)."""
        name = self.job_name(job)
        self._call(
            lambda: self.client.delete_custom_job(name=name, timeout=self.timeout).result(timeout=self.timeout),
            action=f"delete job {name}",
            resource=name,
            verb="delete",
        )
