"""Vertex AI CustomJobs through the official client: create, get, list, cancel, delete, logs.

The backend takes its `JobServiceClient` as an argument, so tests hand it a real client
pointed at the in-repo emulator (`vtrain.emulator`) and production hands it one pointed at
`{region}-aiplatform.googleapis.com`. Both use the REST transport: the code path the tests
exercise is the one that talks to Google. Every call is retried on transient errors
(`retry.RetryPolicy`) and every refusal becomes one BackendError line (`retry.explain`).

create() is not idempotent on the server, so it stamps the job with a fresh label
`vtrain-submit-id=<uuid>`; after an ambiguous failure (a 5xx or a dropped connection, when
the job may exist although the answer was lost) it looks the label up before sending again,
and never creates the same submission twice.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from vtrain.backends.handle import TERMINAL_STATES, JobHandle, Waiting
from vtrain.backends.vertex.logs import entries_request, entry_parts, iter_log_lines
from vtrain.backends.vertex.retry import RetryPolicy, TransientExhausted, call_with_retry, explain
from vtrain.errors import BackendError

LOGGING_ENDPOINT = "https://logging.googleapis.com"
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
SUBMIT_LABEL = "vtrain-submit-id"
CONSOLE_URL = (
    "https://console.cloud.google.com/vertex-ai/locations/{region}/training/{id}/cpu?project={project}"
)
_NAME_RE = re.compile(r"^projects/([^/]+)/locations/([^/]+)/customJobs/([0-9]+)$")
_ID_RE = re.compile(r"^[0-9]+$")
_TASK_RE = re.compile(r"^workerpool([0-3])-([0-9]+)$")
_REPLICA_RE = re.compile(r"^(chief|worker|ps|reducer|evaluator)-([0-9]+)$")
POOL_PREFIXES = ("chief", "worker", "ps", "evaluator")
_PREFIX_POOL = {"chief": 0, "worker": 1, "ps": 2, "reducer": 2, "evaluator": 3}
#: The prefix of Vertex's own log lines (provisioning, job state), which carry no task name.
SERVICE_PREFIX = "vertex"


def replica_label(task: str, reducers: bool = False) -> str:
    """Vertex's task name → the prefix `vtrain local` prints: workerpool0-0 → chief-0,
    workerpool1-N → worker-N, workerpool2-N → ps-N (reducer-N when pool 2 is a Reduction
    Server), workerpool3-N → evaluator-N. Anything else is kept as it is."""
    m = _TASK_RE.match(task)
    if not m:
        return task or SERVICE_PREFIX
    pool = int(m.group(1))
    role = "reducer" if pool == 2 and reducers else POOL_PREFIXES[pool]
    return f"{role}-{m.group(2)}"


def task_name(replica: str) -> str:
    """chief-0 / worker-N / ps-N / reducer-N / evaluator-N (or workerpoolN-M as it is) → Vertex's task name."""
    text = replica.strip()
    if _TASK_RE.match(text):
        return text
    m = _REPLICA_RE.match(text)
    if not m or (m.group(1) == "chief" and m.group(2) != "0"):
        raise BackendError(
            f"replica '{replica}' is not chief-0, worker-N, ps-N, reducer-N, evaluator-N or workerpoolN-M"
        )
    return f"workerpool{_PREFIX_POOL[m.group(1)]}-{m.group(2)}"


def _has_reducers(proto: Any) -> bool:
    pools = list(proto.job_spec.worker_pool_specs)
    return len(pools) > 2 and "/reductionserver" in pools[2].container_spec.image_uri


class VertexJob(JobHandle):
    """A CustomJob on Vertex AI (or the emulator); `proto` is the last fetched CustomJob."""

    default_poll = 10.0

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

    def refresh(self) -> str:
        self._update(self._backend._get_proto(self._name))
        return self._state

    def cancel(self) -> None:
        self._backend.cancel(self)

    def _follow(self, waiting: Waiting) -> Iterator[str]:
        return self._backend._logs(self, follow=True, poll=waiting.poll, task=None, format=self._formatter(None, False),
                                   waiting=waiting)

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
            line = f"[{replica_label(name, reducers)}] {message}"
            return f"{timestamp} {line}" if timestamps else line

        return format


class VertexBackend:
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
    ) -> None:
        self.client = client
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
    def _call(
        self,
        fn: Any,
        *,
        action: str,
        resource: str,
        verb: str = "",
        permission: str = "",
        role: str = "roles/aiplatform.user",
        before_retry: Any = None,
    ) -> Any:
        """Run one API call under the retry policy; refusals become one BackendError line."""
        from google.api_core.exceptions import GoogleAPICallError
        from google.auth.exceptions import GoogleAuthError
        from requests.exceptions import RequestException

        try:
            return call_with_retry(fn, self.retry, before_retry)
        except (GoogleAPICallError, GoogleAuthError, RequestException, TransientExhausted) as err:
            raise explain(
                err,
                action=action,
                resource=resource,
                project=self.project,
                region=self.region,
                permission=permission or f"aiplatform.customJobs.{verb}",
                role=role,
            ) from None

    def create(self, job: Any) -> VertexJob:
        """Submit a CustomJob (the caller's object is not modified) and return its handle.

        One retry budget covers the whole submission: each attempt after an ambiguous
        failure first lists jobs by this submission's label (one call, no nested retries)
        and returns the job it finds instead of sending the create again.
        """
        from google.api_core.exceptions import TooManyRequests
        from google.cloud.aiplatform_v1 import CustomJob, ListCustomJobsRequest

        body = CustomJob.deserialize(CustomJob.serialize(job))
        token = uuid.uuid4().hex
        body.labels[SUBMIT_LABEL] = token
        lookup = ListCustomJobsRequest(
            parent=self.parent, filter=f'labels.{SUBMIT_LABEL}="{token}"', page_size=1
        )
        maybe_created = False

        def note_failure(err: BaseException) -> None:
            nonlocal maybe_created
            if not isinstance(err, TooManyRequests):  # a 429 is refused before any work
                maybe_created = True

        def attempt() -> Any:
            nonlocal maybe_created
            if maybe_created:
                earlier = list(self.client.list_custom_jobs(request=lookup).custom_jobs)
                maybe_created = False
                if earlier:
                    return earlier[0]
            return self.client.create_custom_job(parent=self.parent, custom_job=body)

        proto = self._call(
            attempt,
            action=f"create job '{job.display_name}'",
            resource=self.parent,
            verb="create",
            before_retry=note_failure,
        )
        return VertexJob(self, proto)

    def _get_proto(self, name: str) -> Any:
        return self._call(
            lambda: self.client.get_custom_job(name=name), action=f"get job {name}", resource=name, verb="get"
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
                lambda request=request: self.client.list_custom_jobs(request=request),
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
            lambda: self.client.cancel_custom_job(name=name),
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
            lambda: self.client.delete_custom_job(name=name).result(),
            action=f"delete job {name}",
            resource=name,
            verb="delete",
        )

    # ---- logs -------------------------------------------------------------------------
    def _logging_session(self) -> Any:
        if self._session is None:
            from google.auth.transport.requests import AuthorizedSession

            credentials = self.credentials
            if credentials is None:
                import google.auth

                credentials, _ = google.auth.default(scopes=SCOPES)
            self._session = AuthorizedSession(credentials)
        return self._session

    def _log_page(self, job_id: str, since: str | None, page_token: str, task: str | None = None) -> dict[str, Any]:
        from google.api_core.exceptions import from_http_response

        body = entries_request(self.project, job_id, since, page_token, task)

        def fetch() -> dict[str, Any]:
            url = f"{self.logging_endpoint}/v2/entries:list"
            response = self._logging_session().post(url, json=body, timeout=60)
            if response.status_code >= 400:
                raise from_http_response(response)
            return dict(response.json())

        return self._call(  # type: ignore[no-any-return]
            fetch,
            action=f"read logs of job {job_id}",
            resource=f"projects/{self.project}",
            permission="logging.logEntries.list",
            role="roles/logging.viewer",
        )

    def _logs(
        self, job: VertexJob, *, follow: bool, poll: float, task: str | None, format: Any,
        waiting: Waiting | None = None,
    ) -> Iterator[str]:
        pause = [poll]

        def done() -> bool:
            state = job.refresh()
            if waiting is not None:  # report the state and keep to the wait's deadline
                pause[0] = waiting.check(state)
            return state in TERMINAL_STATES

        return iter_log_lines(
            lambda since, token: self._log_page(job.job_id, since, token, task),
            job_done=done,
            sleep=lambda: job._sleep(pause[0]),
            follow=follow,
            format=format,
        )
