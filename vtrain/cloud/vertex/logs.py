"""Reading a Vertex AI job's log from Cloud Logging (REST `entries.list`), transport-free.

Vertex writes each replica's output under `resource.type="ml_job"` with the job ID and the
replica (`workerpool0-0`, `workerpool1-2`, ...) as resource labels. Entries arrive late
and out of order, so following a log re-reads from the newest timestamp seen
(`timestamp>=`) and drops the entries already printed at that timestamp by insertId.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from vtrain.errors import BackendError
from vtrain.foreign import prefixed, printable

_TASK_RE = re.compile(r"^workerpool([0-3])-([0-9]+)$")
_REPLICA_RE = re.compile(r"^(chief|worker|ps|reducer|evaluator)-([0-9]+)$")
POOL_PREFIXES = ("chief", "worker", "ps", "evaluator")
_PREFIX_POOL = {"chief": 0, "worker": 1, "ps": 2, "reducer": 2, "evaluator": 3}
#: The prefix of Vertex's own log lines (provisioning, job state), which carry no task name.
SERVICE_PREFIX = "vertex"
#: The task name Vertex gives its own lines.
SERVICE_TASK = "service"


def replica_label(task: str, reducers: bool = False) -> str:
    """Vertex's task name → the prefix `vtrain local` prints: workerpool0-0 → chief-0,
    workerpool1-N → worker-N, workerpool2-N → ps-N (reducer-N when pool 2 is a Reduction
    Server), workerpool3-N → evaluator-N. Anything else is kept as it is."""
    m = _TASK_RE.match(task)
    if not m:
        return SERVICE_PREFIX if task in ("", SERVICE_TASK) else task
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


PageFetcher = Callable[[str | None, str], dict[str, Any]]


def entries_request(
    project: str, job_id: str, since: str | None, page_token: str, task: str | None = None
) -> dict[str, Any]:
    """The JSON body of `POST /v2/entries:list` for one job (one replica if `task`), oldest first."""
    text = f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"'
    if task:
        text += f' AND resource.labels.task_name="{task}"'
    if since:
        text += f' AND timestamp>="{since}"'
    body: dict[str, Any] = {
        "resourceNames": [f"projects/{project}"],
        "filter": text,
        "orderBy": "timestamp asc",
        "pageSize": 1000,
    }
    if page_token:
        body["pageToken"] = page_token
    return body


def entry_parts(entry: dict[str, Any]) -> tuple[str, str, str]:
    """(timestamp, task, message) for text and JSON payloads alike; task is '' for Vertex's own lines."""
    labels = entry.get("resource", {}).get("labels", {})
    task = labels.get("task_name") or entry.get("labels", {}).get("ml.googleapis.com/task_name", "")
    payload = entry.get("jsonPayload") or {}
    message = entry.get("textPayload") or payload.get("message") or (str(payload) if payload else "")
    return str(entry.get("timestamp", "")), str(task), str(message).rstrip()


def log_line(label: str, message: str, timestamp: str | None = None) -> str:
    """'[LABEL] MESSAGE' ('TIMESTAMP [LABEL] MESSAGE' with a timestamp) as printed: every part is what
    Cloud Logging answered, so each is made printable, and a message of several lines gets the prefix
    on each (none of its lines can pass for another replica's or for vtrain's own)."""
    head = f"{printable(timestamp)} " if timestamp else ""
    return "\n".join(prefixed(f"{head}[{printable(label)}] ", message))


def format_entry(entry: dict[str, Any]) -> str:
    """'TIMESTAMP TASK: MESSAGE', each part printable."""
    timestamp, task, message = entry_parts(entry)
    return "\n".join(prefixed(f"{printable(timestamp)} {printable(task)}: ", message)).strip()


def iter_log_lines(
    fetch_page: PageFetcher,
    *,
    job_done: Callable[[], bool],
    sleep: Callable[[], None],
    follow: bool,
    format: Callable[[dict[str, Any]], str | None] = format_entry,
) -> Iterator[str]:
    """Yield every entry once; with `follow`, poll until a read made after the job ended.

    `format` turns an entry into its line, or None to leave it out."""
    since: str | None = None
    seen: set[str] = set()
    while True:
        finished = job_done() if follow else True  # checked before reading: nothing is missed
        token = ""
        while True:
            page = fetch_page(since, token)
            for entry in page.get("entries", []):
                key = entry.get("insertId") or repr(entry)
                if key in seen:
                    continue
                if entry.get("timestamp") != since:
                    seen.clear()  # only entries at the newest timestamp can come back
                    since = entry.get("timestamp", since)
                seen.add(key)
                line = format(entry)
                if line is not None:
                    yield line
            token = page.get("nextPageToken", "")
            if not token:
                break
        if finished:
            return
        sleep()
