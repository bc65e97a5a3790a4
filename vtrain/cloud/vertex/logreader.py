"""The Cloud Logging half of the Vertex backend: pages of a job's entries through an authorized
session, and following them while the job runs (the wait's deadline and state reports included).
A mixin of :class:`~vtrain.cloud.vertex.client.VertexBackend`, which provides `_call`,
`credentials`, `project`, `timeout` and `logging_endpoint`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from vtrain.cloud.vertex.logs import entries_request, iter_log_lines
from vtrain.handle import TERMINAL_STATES, Waiting

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


class FollowedJob(Protocol):
    """What following a job's log reads of the job (a :class:`~vtrain.cloud.vertex.client.VertexJob`, which imports
    this module: the reader names the shape, not the class)."""

    _sleep: Callable[[float], None]

    @property
    def job_id(self) -> str: ...

    def refresh(self) -> str: ...


class JobLogReader:
    _session: Any
    credentials: Any
    project: str
    logging_endpoint: str
    _call: Any

    if TYPE_CHECKING:  # VertexBackend's read-only property

        @property
        def timeout(self) -> float: ...

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
            response = self._logging_session().post(url, json=body, timeout=self.timeout)
            if response.status_code >= 400:
                raise from_http_response(response)
            return dict(response.json())

        return self._call(  # type: ignore[no-any-return]
            fetch,
            action=f"read logs of job {job_id}",
            resource=f"projects/{self.project}",
            permission="logging.logEntries.list",
            role="roles/logging.viewer",
            what=f"Cloud Logging at {self.logging_endpoint}",
        )

    def _logs(
        self, job: FollowedJob, *, follow: bool, poll: float, task: str | None, format: Any,
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
