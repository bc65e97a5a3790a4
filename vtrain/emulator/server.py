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

The client asks for `$alt=json;enum-encoding=int`; the answer then carries enums as
numbers, otherwise (curl) as names; 64-bit integers are strings either way, as in proto3
JSON. Projects in `deny_projects` get IAM's 403 PERMISSION_DENIED on every call; creates
in `quota_projects` get a 429 resource-quota error. `fail_next` injects transient errors:
"before" the work (5xx, or "reset": the connection dropped), or "after" it, when the job is
created and the answer is lost (5xx, "reset-after": dropped, "garble": a 200 cut short).

Like a real front end, it answers what it cannot parse instead of dropping the connection:
400 for a malformed request line, header or Content-Length, 411 for a POST without a length,
413 for a body over MAX_BODY, 414 for an over-long request line, 500 for its own bugs. The
request log keeps the last REQUEST_LOG requests only, so memory stays flat under load.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import traceback
from collections import deque
from collections.abc import Callable
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from google.protobuf import json_format

from vtrain.emulator import iam, validation
from vtrain.emulator.errors import (
    ApiError,
    internal,
    invalid_argument,
    not_found,
    permission_denied,
    quota_exceeded,
    transient,
)
from vtrain.emulator.filters import compile_filter
from vtrain.emulator.store import JobStore, _rfc3339

_COLLECTION = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/customJobs$")
_JOB = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/customJobs/([^/:]+)(:cancel)?$")
_METHOD = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_LOG_JOB = re.compile(r'resource\.labels\.job_id\s*=\s*"?([0-9]+)"?')
_LOG_AFTER = re.compile(r'timestamp\s*(>=?)\s*"([^"]+)"')
QUOTA_METRIC = "aiplatform.googleapis.com/custom_model_training_cpus"
#: Requests kept for `Emulator.requests` (oldest dropped first).
REQUEST_LOG = 1000
#: Largest request body read; a real CustomJob is a few KiB.
MAX_BODY = 32 * 1024 * 1024
#: Connections waiting to be accepted: hundreds of clients may connect at once.
LISTEN_BACKLOG = 1024
#: An idle keep-alive connection (or a client that stops mid-request) is closed after this.
IDLE_SECONDS = 120.0
#: Modes of `fail_next`: refused before any work, or the work done and the answer lost.
BEFORE_MODES = ("before", "reset")
AFTER_MODES = ("after", "reset-after", "garble")
FAULT_MODES = BEFORE_MODES + AFTER_MODES


class _Refused(Exception):
    """A request the HTTP layer cannot take (bad length, too big): answered, then closed."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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

    # ---- plumbing ---------------------------------------------------------------------
    def _read_body(self) -> bytes:
        """The body, as a real front end reads it: chunked or by one valid Content-Length."""
        encoding = (self.headers.get("Transfer-Encoding") or "").strip().lower()
        lengths = self.headers.get_all("Content-Length") or []
        if encoding:
            if encoding != "chunked" or lengths:
                raise _Refused(400, "Bad Request: unsupported Transfer-Encoding")
            return self._read_chunked()
        if not lengths:
            if self.command == "POST":
                raise _Refused(411, "Length Required: POST requests require a Content-Length header")
            return b""
        values = {v.strip() for v in lengths}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise _Refused(400, f"Bad Request: invalid Content-Length {', '.join(lengths)!r}")
        length = int(next(iter(values)))
        if length > MAX_BODY:
            raise _Refused(413, f"Payload Too Large: at most {MAX_BODY} bytes")
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            raise ConnectionError("the client closed the connection mid-body")
        return body

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024).strip().split(b";", 1)[0]
            try:
                size = int(line, 16)
            except ValueError:
                raise _Refused(400, "Bad Request: invalid chunk size") from None
            if size < 0 or total + size > MAX_BODY:
                raise _Refused(413 if size > 0 else 400, "Payload Too Large or bad chunk size")
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return b"".join(parts)
            chunk = self.rfile.read(size)
            if len(chunk) < size:
                raise ConnectionError("the client closed the connection mid-body")
            parts.append(chunk)
            total += size
            self.rfile.readline(1024)  # the CRLF after each chunk

    def _handle(self) -> None:
        try:
            body = self._read_body()
        except _Refused as refused:
            self.send_error(refused.code, refused.message)  # closes the connection: the body is unread
            return
        except (ConnectionError, TimeoutError):
            self.close_connection = True
            return
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        int_enums = "enum-encoding=int" in query.get("$alt", "")
        self.server.record(self.command, path, query, body)
        fault = self.server.faults.take()
        if fault and fault[1] == "reset":
            self._drop()
            return
        if fault and fault[1] == "before":
            self._send(fault[0], _error_body(fault[0]))
            return
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
                return
            if mode == "garble":
                text = payload if isinstance(payload, str) else json.dumps(payload)
                self._send(200, text[: max(len(text) // 2, 1)])
                return
            status, payload = fault[0], _error_body(fault[0])
        self._send(status, payload)

    def _drop(self) -> None:
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _send(self, status: int, payload: Any) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, message: Any, int_enums: bool) -> str:
        return json_format.MessageToJson(message, use_integers_for_enums=int_enums, indent=None)

    # ---- routes -----------------------------------------------------------------------
    def _route(self, path: str, query: dict[str, str], body: bytes, int_enums: bool) -> Any:
        if path == "/v2/entries:list" and self.command == "POST":
            return self._list_logs(body)
        if iam.handles(path):
            return iam.route(self.command, path, body, self.server.service_accounts, self.server.deny_projects)
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
                store.cancel(name)
                return {}
            store.delete(name)
            return _delete_operation(project, location, job_id)
        if self.server.tuning_store is not None:
            from vtrain.emulator.tuning import route_tuning

            answer = route_tuning(self, path, query, body, int_enums)
            if answer is not None:
                return answer
        raise not_found(f"The requested URL {path} was not found on this server.")

    def _authorize(self, project: str, resource: str, verb: str) -> None:
        if project in self.server.deny_projects:
            raise permission_denied(f"aiplatform.customJobs.{verb}", resource)

    def _list(self, parent: str, query: dict[str, str], int_enums: bool) -> str:
        match = compile_filter(query.get("filter", ""))
        try:
            size = int(query.get("pageSize") or 0)
        except ValueError as err:
            raise invalid_argument("pageSize must be an integer.") from err
        if size < 0:
            raise invalid_argument("pageSize must not be negative.")
        token = query.get("pageToken", "")
        if token and not token.isdigit():
            raise invalid_argument(f"Invalid page token '{token}'.")
        jobs, next_token = self.server.store.list(parent, match, size, token)
        fields = []  # proto3 JSON omits empty fields: no jobs is `{}`, as on the real API
        if jobs:
            fields.append('"customJobs": [' + ",".join(self._json(j, int_enums) for j in jobs) + "]")
        if next_token:
            fields.append(f'"nextPageToken": "{next_token}"')
        return "{" + ", ".join(fields) + "}"

    def _list_logs(self, body: bytes) -> dict[str, Any]:
        request = _logs_request(body)
        for resource in request.get("resourceNames", []):
            project = resource.split("/")[1] if resource.startswith("projects/") else ""
            if project in self.server.deny_projects:
                raise permission_denied("logging.logEntries.list", resource, domain="logging.googleapis.com")
        text = request.get("filter", "")
        job = _LOG_JOB.search(text)
        if not job:
            raise invalid_argument('The emulator filters logs by resource.labels.job_id="ID" only.')
        after = _LOG_AFTER.search(text)
        try:
            when = datetime.fromisoformat(after.group(2).replace("Z", "+00:00")) if after else None
        except ValueError:
            raise invalid_argument(f"Invalid timestamp in filter: '{after.group(2) if after else ''}'.") from None
        if when is not None and when.tzinfo is None:
            raise invalid_argument(f"Invalid timestamp in filter: '{after.group(2) if after else ''}' has no zone.")
        inclusive = bool(after) and after.group(1) == ">="
        entries = self.server.store.log_entries(job.group(1), when, inclusive)
        if not entries and self.server.tuning_store is not None:  # a HyperparameterTuningJob's trials
            entries = self.server.tuning_store.log_entries(job.group(1), when, inclusive)
        return {"entries": [{k: v for k, v in e.items() if not k.startswith("_")} for e in entries]}


#: entries:list fields and their JSON types, as ListLogEntriesRequest declares them.
_LOGS_FIELDS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "resourceNames": ("TYPE_STRING (repeated)", list),
    "filter": ("TYPE_STRING", str),
    "orderBy": ("TYPE_STRING", str),
    "pageToken": ("TYPE_STRING", str),
    "pageSize": ("TYPE_INT32", (int, str)),
}


def _logs_request(body: bytes) -> dict[str, Any]:
    """The entries:list body, type-checked as the real API's JSON parser checks it."""
    try:
        request = json.loads(body or b"{}")
    except ValueError as err:
        raise invalid_argument("Invalid JSON payload received.") from err
    if not isinstance(request, dict):
        raise invalid_argument("Invalid JSON payload received. Expected an object for ListLogEntriesRequest.")
    for key, value in request.items():
        if key not in _LOGS_FIELDS:
            raise invalid_argument(f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.')
        kind, expected = _LOGS_FIELDS[key]
        bad = not isinstance(value, expected) or isinstance(value, bool)
        if key == "resourceNames" and not bad:
            bad = not all(isinstance(v, str) for v in value)
        if key == "pageSize" and not bad:
            bad = not str(value).lstrip("-").isdigit() or not -(2**31) <= int(value) < 2**31
        if bad:
            raise invalid_argument(f"Invalid value at '{key}' ({kind}), {json.dumps(value)[:100]}")
    return request


def _printable(text: str) -> str:
    """A request target fit for one log line: control characters escaped, length capped."""
    shown = text if text.isprintable() else text.encode("unicode_escape").decode("ascii")
    return shown if len(shown) <= 200 else shown[:200] + "..."


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
        self._requests_lock = threading.Lock()

    def record(self, method: str, path: str, query: dict[str, str], body: bytes) -> None:
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        with self._requests_lock:
            self.requests.append({"method": method, "path": path, "query": query, "body": parsed})
