"""Cloud Logging's `POST /v2/entries:list`, as much of it as `vtrain logs` and gcloud use.

The filter must name one job (`resource.labels.job_id="ID"`, as both clients write it) and may
bound `timestamp` from below; the body's field types are checked as ListLogEntriesRequest
declares them (:func:`vtrain.emulator.wire.check_fields`). Entries come in time order.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from vtrain.emulator.errors import invalid_argument, permission_denied
from vtrain.emulator.wire import check_fields, json_body

_LOG_JOB = re.compile(r'resource\.labels\.job_id\s*=\s*"?([0-9]+)"?')
_LOG_AFTER = re.compile(r'timestamp\s*(>=?)\s*"([^"]+)"')
#: entries:list fields and their JSON types, as ListLogEntriesRequest declares them.
FIELDS = {"resourceNames": "strings", "filter": "string", "orderBy": "string", "pageToken": "string",
          "pageSize": "int32"}


def list_logs(server: Any, body: bytes) -> dict[str, Any]:
    request = check_fields(json_body(body, "ListLogEntriesRequest"), FIELDS, "ListLogEntriesRequest")
    for resource in request.get("resourceNames", []):
        project = resource.split("/")[1] if resource.startswith("projects/") else ""
        if project in server.deny_projects:
            raise permission_denied("logging.logEntries.list", resource, domain="logging.googleapis.com")
    text = request.get("filter", "")
    job = _LOG_JOB.search(text)
    if not job:
        raise invalid_argument('The emulator filters logs by resource.labels.job_id="ID" only.')
    after = _LOG_AFTER.search(text)
    try:
        when = datetime.fromisoformat(after.group(2).replace("Z", "+00:00")) if after else None
    except ValueError:
        raise invalid_argument(f"Invalid timestamp in filter: '{after.group(2)[:60] if after else ''}'.") from None
    if when is not None and when.tzinfo is None:
        raise invalid_argument(f"Invalid timestamp in filter: '{after.group(2)[:60] if after else ''}' has no zone.")
    inclusive = after is not None and after.group(1) == ">="
    entries = server.store.log_entries(job.group(1), when, inclusive)
    if not entries and server.tuning_store is not None:  # a HyperparameterTuningJob's trials
        entries = server.tuning_store.log_entries(job.group(1), when, inclusive)
    return {"entries": [{k: v for k, v in e.items() if not k.startswith("_")} for e in entries]}


__all__ = ["FIELDS", "list_logs"]
