"""The HTTP face of the emulator: Vertex AI v1 REST paths for CustomJobs on 127.0.0.1.

Routes (as `JobServiceClient(transport="rest")` calls them):

    POST   /v1/projects/P/locations/L/customJobs              create
    GET    /v1/projects/P/locations/L/customJobs              list (filter, pageSize, pageToken)
    GET    /v1/projects/P/locations/L/customJobs/ID           get
    POST   /v1/projects/P/locations/L/customJobs/ID:cancel    cancel → {}
    DELETE /v1/projects/P/locations/L/customJobs/ID           delete → done Operation
    POST   /v2/entries:list                                   Cloud Logging, the runner's log

The client asks for `$alt=json;enum-encoding=int`; the answer then carries enums as
numbers, otherwise (curl) as names; 64-bit integers are strings either way, as in proto3
JSON. Projects in `deny_projects` get IAM's 403 PERMISSION_DENIED on every call; creates
in `quota_projects` get a 429 resource-quota error. `fail_next` injects transient errors.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Callable
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from google.protobuf import json_format

from vtrain.emulator import validation
from vtrain.emulator.errors import (
    ApiError,
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
_LOG_JOB = re.compile(r'resource\.labels\.job_id\s*=\s*"?([0-9]+)"?')
_LOG_AFTER = re.compile(r'timestamp\s*(>=?)\s*"([^"]+)"')
QUOTA_METRIC = "aiplatform.googleapis.com/custom_model_training_cpus"


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
    disable_nagle_algorithm = True  # headers and body are two writes: avoid 40 ms delayed ACKs

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        if self.server.access_log is not None:
            self.server.access_log(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else '?'}")

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    # ---- plumbing ---------------------------------------------------------------------
    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        int_enums = "enum-encoding=int" in query.get("$alt", "")
        self.server.record(self.command, path, query, body)
        fault = self.server.faults.take()
        if fault and fault[1] == "reset":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault and fault[1] == "before":
            self._send(fault[0], _error_body(fault[0]))
            return
        try:
            status, payload = 200, self._route(path, query, body, int_enums)
        except ApiError as err:
            status, payload = err.http, err.body()
        if fault:  # mode "after": the work is done, the answer is lost
            status, payload = fault[0], _error_body(fault[0])
        self._send(status, payload)

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
        try:
            request = json.loads(body or b"{}")
        except ValueError as err:
            raise invalid_argument("Invalid JSON payload received.") from err
        for resource in request.get("resourceNames", []):
            project = resource.split("/")[1] if resource.startswith("projects/") else ""
            if project in self.server.deny_projects:
                raise permission_denied("logging.logEntries.list", resource, domain="logging.googleapis.com")
        text = request.get("filter", "")
        job = _LOG_JOB.search(text)
        if not job:
            raise invalid_argument('The emulator filters logs by resource.labels.job_id="ID" only.')
        after = _LOG_AFTER.search(text)
        when = datetime.fromisoformat(after.group(2).replace("Z", "+00:00")) if after else None
        inclusive = bool(after) and after.group(1) == ">="
        entries = self.server.store.log_entries(job.group(1), when, inclusive)
        if not entries and self.server.tuning_store is not None:  # a HyperparameterTuningJob's trials
            entries = self.server.tuning_store.log_entries(job.group(1), when, inclusive)
        return {"entries": [{k: v for k, v in e.items() if not k.startswith("_")} for e in entries]}


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
        self.requests: list[dict[str, Any]] = []
        self.tuning_store: Any = None  # vtrain.emulator.tuning.TuningStore, set by Emulator
        self._requests_lock = threading.Lock()

    def record(self, method: str, path: str, query: dict[str, str], body: bytes) -> None:
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        with self._requests_lock:
            self.requests.append({"method": method, "path": path, "query": query, "body": parsed})
