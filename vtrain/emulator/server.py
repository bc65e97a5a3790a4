"""The HTTP face of the emulator: Vertex AI v1 REST paths for CustomJobs on 127.0.0.1.

Routes (as `JobServiceClient(transport="rest")` calls them):

    POST   /v1/projects/P/locations/L/customJobs              create
    GET    /v1/projects/P/locations/L/customJobs              list (filter, pageSize, pageToken)
    GET    /v1/projects/P/locations/L/customJobs/ID           get
    POST   /v1/projects/P/locations/L/customJobs/ID:cancel    cancel → {}
    DELETE /v1/projects/P/locations/L/customJobs/ID           delete → done Operation
    POST   /v2/entries:list                                   Cloud Logging, the runner's log
    GET    /v1/projects/-/serviceAccounts/EMAIL               IAM (see iam.py), for preflight
    POST   /v1/projects/-/serviceAccounts/EMAIL:testIamPermissions
    ...    /v1/projects/P/locations/L/tensorboards[/ID]           TensorBoards (see metadata.py)
    ...    /v1/projects/P/locations/L/metadataStores[/S/contexts] Experiments (see metadata.py)
    GET    /v1/projects/P/locations/global/services/S/quotaInfos  Cloud Quotas (see quotas.py), for preflight

The client asks for `$alt=json;enum-encoding=int`; the answer then carries enums as
numbers, otherwise (curl) as names; 64-bit integers are strings either way, as in proto3
JSON. Projects in `deny_projects` get IAM's 403 PERMISSION_DENIED on every call; creates
in `quota_projects` get a 429 resource-quota error. `fail_next` injects transient errors:
"before" the work (5xx, or "reset": the connection dropped), or "after" it, when the job is
created and the answer is lost (5xx, "reset-after": dropped, "garble": a 200 cut short).

Like a real front end, it answers what it cannot parse instead of dropping the connection, always
with a Google-style JSON error (wire.py): 400 for a malformed request line, header, Content-Length
or JSON body, 411 for a POST without a length, 413 for a body over wire.MAX_BODY, 414 for an
over-long request line, 404 for a method no route has (PUT, PATCH, ...), 500 for its own bugs.
Who may call is checked first (guard.py: no browser page, loopback Host only, JSON bodies). The
request log keeps the last REQUEST_LOG requests, each bounded, so memory stays flat under load.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import traceback
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from google.protobuf import json_format

from vtrain.emulator import guard, iam, metadata, quotas, validation
from vtrain.emulator.errors import (
    ApiError,
    internal,
    not_found,
    quota_exceeded,
    transient,
)
from vtrain.emulator.filters import compile_filter
from vtrain.emulator.logs import list_logs
from vtrain.emulator.masks import masked, read_mask
from vtrain.emulator.projects import authorize, project_number
from vtrain.emulator.store import JobStore, _rfc3339
from vtrain.emulator.wire import (
    Refused,
    body_length,
    empty_body,
    error_body,
    page_params,
    read_body,
    reason_phrase,
)

_COLLECTION = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/customJobs$")
_JOB = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/customJobs/([^/:]+)(:cancel)?$")
_METHOD = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
QUOTA_METRIC = "aiplatform.googleapis.com/custom_model_training_cpus"
#: Requests kept for `Emulator.requests` (oldest dropped first).
REQUEST_LOG = 1000
#: A body kept whole in the request log at most (larger or refused ones: a summary).
LOGGED_BODY = 64 * 1024
#: Connections waiting to be accepted: hundreds of clients may connect at once.
LISTEN_BACKLOG = 1024
#: An idle keep-alive connection (or a client that stops mid-request) is closed after this.
IDLE_SECONDS = 120.0
#: Modes of `fail_next`: refused before any work, or the work done and the answer lost.
BEFORE_MODES = ("before", "reset")
AFTER_MODES = ("after", "reset-after", "garble")
FAULT_MODES = BEFORE_MODES + AFTER_MODES


class Faults:
    """Injected failures, consumed one per request, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[tuple[int, str]] = []

    def add(self, count: int, code: int, mode: str) -> None:
        with self._lock:
            self._queue.extend([(code, mode)] * count)

    def take(self) -> tuple[int, str] | None:
        with self._lock:
            return self._queue.pop(0) if self._queue else None

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)


class Handler(BaseHTTPRequestHandler):
    server: EmulatorHTTPServer
    protocol_version = "HTTP/1.1"
    # Errors for a request line that is not HTTP/1.x get a status line too, not the stdlib's
    # bare HTTP/0.9 page (which no client can tell from garbage).
    default_request_version = "HTTP/1.0"
    disable_nagle_algorithm = True  # headers and body are two writes: avoid 40 ms delayed ACKs
    timeout = IDLE_SECONDS

    def parse_request(self) -> bool:
        """The stdlib's parse, plus RFC 9110's rule that a method is a token (else 400, not 501)."""
        if not super().parse_request():
            return False
        if not _METHOD.match(self.command):
            self.send_error(400, "Bad Request: malformed method")
            return False
        return True

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """One access-log line per answer, safe for requests that never parsed (no command or path)."""
        if self.server.access_log is None:
            return
        command = getattr(self, "command", None) or "-"
        target = getattr(self, "path", None) or getattr(self, "requestline", "") or "-"
        code_text = str(code.value if hasattr(code, "value") else code)
        self.server.access_log(f"{_printable(command)} {_printable(target)} -> {code_text}")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        """The stdlib's other messages (send_error's "code 400, message ...") are left out:
        log_request already writes one line per answer."""

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def __getattr__(self, name: str) -> Any:
        """Every method (PUT, PATCH, OPTIONS, ...) is routed, so an unknown one gets Google's JSON 404,
        not the stdlib's HTML 501 page."""
        if name.startswith("do_") and _METHOD.match(name[3:]):
            return self._handle
        raise AttributeError(name)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The HTTP layer's own refusals (bad request line, 411, 413, 414, 431) as Google-style JSON."""
        self.close_connection = True
        text = message or reason_phrase(code) or "Error"
        self._send(code, error_body(code, text), close=True)

    # ---- plumbing ---------------------------------------------------------------------
    def _handle(self) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        self._entry: list[Any] | None = [self.command, path, query, b"", 0]  # recorded as the answer goes out
        try:
            try:  # who sends it, and what, before a byte of the body is read (see guard.py)
                guard.check_sender(self.headers)
                path = self._entry[1] = unquote(guard.strip_token(url.path, self.server.token))
                length = body_length(self.command, self.headers)
                guard.check_content_type(self.command, self.headers)
                body = read_body(self.rfile, length)
            except ApiError as err:
                self.close_connection = True  # the body is unread
                self._send(err.http, err.body(), close=True)
                return
            except Refused as refused:
                self.send_error(refused.code, refused.message)
                return
            except (ConnectionError, TimeoutError):
                self.close_connection = True
                return
            self._entry[3:] = [body, len(body)]
            self._answer(path, query, body)
        finally:
            self._record(None)

    def _record(self, status: int | None) -> None:
        entry: list[Any] | None = getattr(self, "_entry", None)
        self._entry = None
        if entry is not None:
            method, path, query, body, size = entry
            self.server.record(method, path, query, body, size, status)

    def _answer(self, path: str, query: dict[str, str], body: bytes) -> int | None:
        """Route the request (with any injected fault); the status answered, None if dropped."""
        int_enums = "enum-encoding=int" in query.get("$alt", "")
        fault = self.server.faults.take()
        if fault and fault[1] == "reset":
            self._drop()
            return None
        if fault and fault[1] == "before":
            self._send(fault[0], _error_body(fault[0]))
            return fault[0]
        try:
            status, payload = 200, self._route(path, query, body, int_enums)
        except ApiError as err:
            status, payload = err.http, err.body()
        except Exception:  # an emulator bug still gets an answer, and a trace on the access log
            if self.server.access_log is not None:
                self.server.access_log(traceback.format_exc().rstrip())
            status, payload = 500, internal("The emulator failed on this request.").body()
        if fault:  # the work is done, the answer is lost
            mode = fault[1]
            if mode == "reset-after":
                self._drop()
                return None
            if mode == "garble":
                text = payload if isinstance(payload, str) else json.dumps(payload)
                self._send(200, text[: max(len(text) // 2, 1)])
                return 200
            status, payload = fault[0], _error_body(fault[0])
        self._send(status, payload)
        return status

    def _drop(self) -> None:
        self._record(None)
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _send(self, status: int, payload: Any, close: bool = False) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self._record(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        if getattr(self, "command", None) != "HEAD":
            self.wfile.write(data)

    def _json(self, message: Any, int_enums: bool) -> str:
        return json_format.MessageToJson(message, use_integers_for_enums=int_enums, indent=None)

    # ---- routes -----------------------------------------------------------------------
    def _route(self, path: str, query: dict[str, str], body: bytes, int_enums: bool) -> Any:
        if path == "/v2/entries:list" and self.command == "POST":
            return list_logs(self.server, body)
        if iam.handles(path):
            return iam.route(self.command, path, body, self.server.service_accounts, self.server.deny_projects)
        if metadata.handles(path):
            return metadata.route(self.server, self.command, path, query, body)
        if quotas.handles(path):
            return quotas.route(self.server, self.command, path, query)
        m = _COLLECTION.match(path)
        if m:
            project, location = m.groups()
            parent = f"projects/{project}/locations/{location}"
            verb = {"POST": "create", "GET": "list"}.get(self.command)
            if verb is None:
                raise not_found(f"Method {self.command} not found for {path}.")
            self._authorize(project, parent, verb)
            validation.check_parent(project, location)
            if verb == "create":
                job = validation.parse_custom_job(body)
                validation.check_custom_job(job)
                if project in self.server.quota_projects:
                    raise quota_exceeded(QUOTA_METRIC, project, location)
                return self._json(self.server.store.create(project, location, job), int_enums)
            return self._list(parent, query, int_enums)
        m = _JOB.match(path)
        if m:
            project, location, job_id, cancel = m.groups()
            name = f"projects/{project}/locations/{location}/customJobs/{job_id}"
            verb = {("GET", None): "get", ("DELETE", None): "delete", ("POST", ":cancel"): "cancel"}.get(
                (self.command, cancel)
            )
            if verb is None:
                raise not_found(f"Method {self.command} not found for {path}.")
            self._authorize(project, name, verb)
            validation.check_job_name(project, location, job_id)
            store = self.server.store
            if verb == "get":
                return self._json(store.get(name), int_enums)
            if verb == "cancel":
                empty_body(body, "CancelCustomJobRequest")
                store.cancel(name)
                return {}
            store.delete(name)
            return _delete_operation(project_number(project), location, job_id)
        if self.server.tuning_store is not None:
            from vtrain.emulator.tuning import route_tuning

            answer = route_tuning(self, path, query, body, int_enums)
            if answer is not None:
                return answer
        raise not_found(f"The requested URL {path} was not found on this server.")

    def _authorize(self, project: str, resource: str, verb: str) -> None:
        authorize(self.server, project, resource, f"aiplatform.customJobs.{verb}")

    def _list(self, parent: str, query: dict[str, str], int_enums: bool, store: Any = None) -> str:
        """One page of a list call (CustomJobs, or a TuningStore's jobs): filter, paging and readMask."""
        store = store or self.server.store
        size, token = page_params(query)
        match = compile_filter(query.get("filter", ""))
        mask = read_mask(query, store.descriptor)
        jobs, next_token = store.list(parent, match, size, token)
        fields = []  # proto3 JSON omits empty fields: no jobs is `{}`, as on the real API
        if jobs:
            items = ",".join(self._json(masked(j, mask), int_enums) for j in jobs)
            fields.append(f'"{store.collection}": [{items}]')
        if next_token:
            fields.append(f'"nextPageToken": "{next_token}"')
        return "{" + ", ".join(fields) + "}"


def _printable(text: str) -> str:
    """A request target fit for one log line: control characters escaped, length capped."""
    from vtrain.foreign import printable

    return printable(text, limit=200)


def _error_body(code: int) -> dict[str, Any]:
    return transient(code).body()


def _delete_operation(project: str, location: str, job_id: str) -> dict[str, Any]:
    now = _rfc3339()
    return {
        "name": f"projects/{project}/locations/{location}/customJobs/{job_id}/operations/{job_id}1",
        "metadata": {
            "@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
            "genericMetadata": {"createTime": now, "updateTime": now},
        },
        "done": True,
        "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
    }


class EmulatorHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        store: JobStore,
        faults: Faults,
        deny_projects: set[str],
        quota_projects: set[str],
        access_log: Callable[[str], None] | None,
    ) -> None:
        super().__init__(address, Handler)
        self.store = store
        self.faults = faults
        self.deny_projects = deny_projects
        self.quota_projects = quota_projects
        self.access_log = access_log
        self.service_accounts: dict[str, frozenset[str]] | None = None  # None: all exist (see iam.py)
        self.requests: deque[dict[str, Any]] = deque(maxlen=REQUEST_LOG)
        self.tuning_store: Any = None  # vtrain.emulator.tuning.TuningStore, set by Emulator
        self.token: str | None = None  # --token: every path starts with /TOKEN (guard.py)
        self.known_projects: frozenset[str] | None = None  # --projects: the others do not exist (projects.py)
        self.denied_permissions: frozenset[str] = frozenset()  # refused on every project (projects.py)
        self.metadata = metadata.MetadataResources()  # TensorBoards, metadata stores, contexts
        self.quotas = quotas.Quotas()  # Cloud Quotas' limits
        self._requests_lock = threading.Lock()

    def record(self, method: str, path: str, query: dict[str, str], body: bytes, size: int,
               status: int | None) -> None:
        """One bounded entry: the parsed body of an accepted request up to LOGGED_BODY bytes, else its size."""
        parsed: Any = None
        if body and status is not None and status < 400 and size <= LOGGED_BODY:
            try:
                parsed = json.loads(body)
            except (ValueError, RecursionError):
                parsed = body[:200].decode("utf-8", "replace")
        entry = {"method": method, "path": path[:2000], "query": {k[:200]: v[:2000] for k, v in query.items()},
                 "body": parsed, "bytes": size, "status": status}
        with self._requests_lock:
            self.requests.append(entry)
