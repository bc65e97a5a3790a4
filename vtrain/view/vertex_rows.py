"""What the live view shows of a Vertex AI job: the rows `vtrain local` shows, from the job and its log.

Vertex reports no state per replica, so each row's state is the job's (``pending`` while it is
queued or provisioning; ``starting`` while RUNNING until the replica's first step, then
``running``; the end state, in lower case, once it ended). Steps come from the lines the runtime
writes to Cloud Logging (:mod:`vtrain.runtime.steplog`), steps/s from their own clocks (not
Cloud Logging's, which lag by seconds), restarts from what the lines say or, failing that, from
how many processes reported (a restarted replica is a new process); a replica that reported no
step shows ``-`` for both. Fed from one thread (:meth:`JobProgress.add` with each log entry),
read from another (:meth:`JobProgress.progress`, the view's thread).
"""

from __future__ import annotations

import threading
from collections import deque
from datetime import datetime, timezone
from typing import Any

from vtrain.cloud.vertex.logs import entry_parts, replica_label
from vtrain.foreign import printable
from vtrain.handle import PENDING, QUEUED, RUNNING, TERMINAL_STATES

RATE_WINDOW_S = 60.0  # steps/s over the lines of the last minute (a line every ~5 s: about 12 points)


def step_record(entry: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(task, record) for a log entry that is a runtime step line, else None.

    The line arrives as text (textPayload, or jsonPayload.message as Vertex writes a replica's
    output) or, where Cloud Logging parsed the JSON, as the jsonPayload itself. A line marked as a
    step line with unusable numbers raises :class:`~vtrain.runtime.steplog.BadStepLine`."""
    from vtrain.runtime.steplog import parse, record_of

    _, task, message = entry_parts(entry)
    record = record_of(entry.get("jsonPayload")) or parse(message)
    return (task, record) if record is not None and task else None


def tasks_of(proto: Any) -> list[str]:
    """Every replica of the job, as Vertex names its task: workerpool0-0, workerpool1-0, ..."""
    spec = getattr(getattr(proto, "job_spec", None), "worker_pool_specs", None) or []
    return [f"workerpool{i}-{n}" for i, pool in enumerate(spec) for n in range(int(pool.replica_count or 0))]


class _Replica:
    def __init__(self) -> None:
        self.step: int | None = None
        self.points: deque[tuple[float, int]] = deque(maxlen=64)  # (writer's time, step) of this process
        self.since: list[float] = []  # each process's first report, in the order seen
        self.restarts: int | None = None  # as the lines say it

    def add(self, record: dict[str, Any]) -> None:
        since = record.get("since")
        if since is not None and since not in self.since:
            self.since.append(since)
            self.points.clear()  # a new process: its rate is its own
        if record.get("restarts") is not None:
            self.restarts = int(record["restarts"])
        self.step = int(record["step"])
        if record.get("time") is not None:
            self.points.append((float(record["time"]), self.step))

    def rate(self) -> float | None:
        if len(self.points) < 2:
            return None
        end = self.points[-1][0]
        recent = [p for p in self.points if p[0] >= end - RATE_WINDOW_S]
        (t0, s0), (t1, s1) = recent[0], recent[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 and s1 >= s0 else None

    def restart_count(self) -> int | None:
        if self.restarts is not None:
            return self.restarts
        return len(self.since) - 1 if self.since else None


class JobProgress:
    """The view's rows for `job` (a :class:`~vtrain.cloud.vertex.client.VertexJob`), from its log entries."""

    def __init__(self, job: Any, reducers: bool = False) -> None:
        self._job = job
        self._lock = threading.Lock()
        self._reducers = reducers
        self._replicas: dict[str, _Replica] = {t: _Replica() for t in tasks_of(job.proto)}
        self.steps_seen = 0  # step lines read (for the measurements in docs/guides/running-locally.md)
        self.unreadable = 0  # step lines ignored: their numbers were unusable
        self._notes: list[str] = []
        self._noted: set[str] = set()

    def take_notes(self) -> list[str]:
        """What the view should say since the last call (an unreadable step line, once per replica)."""
        with self._lock:
            notes, self._notes = self._notes, []
        return notes

    def add(self, entry: dict[str, Any]) -> bool:
        """Take a log entry in; True when it was a step line (the view shows it: a caller need not).

        A step line with unusable numbers (``"step": 1e999``) changes no row: it is ignored, with
        one note per replica (:meth:`take_notes`), and the watch goes on."""
        from vtrain.runtime.steplog import BadStepLine

        try:
            found = step_record(entry)
        except BadStepLine as err:
            task = entry_parts(entry)[1]
            who = printable(replica_label(task, self._reducers), limit=80) if task else "a replica"
            with self._lock:
                self.unreadable += 1
                if who not in self._noted:
                    self._noted.add(who)
                    self._notes.append(f"{who} logged an unreadable step line ({printable(str(err), limit=200)}); "
                                       "ignored, its row keeps the last good step (later ones are ignored "
                                       "without a note)")  # fmt: skip
            return True
        if found is None:
            return False
        task, record = found
        with self._lock:
            self._replicas.setdefault(task, _Replica()).add(record)
            self.steps_seen += 1
        return True

    def progress(self) -> dict[str, Any]:
        """What :class:`vtrain.view.live.Watch` shows: LocalJob.progress()'s shape."""
        state = self._job.state
        rows = []
        with self._lock:
            for task, rep in self._replicas.items():
                ended = state in TERMINAL_STATES
                rows.append({"replica": replica_label(task, self._reducers), "state": row_state(state, rep.step),
                             "step": rep.step, "rate": None if ended else rep.rate(),
                             "restarts": rep.restart_count()})  # fmt: skip
        return {"name": self._job.display_name, "state": state, "seconds": round(run_seconds(self._job.proto), 1),
                "replicas": rows}  # fmt: skip


def row_state(state: str, step: int | None) -> str:
    """A replica's state as far as the job's state and its own steps tell it."""
    if state in (QUEUED, PENDING):
        return "pending"
    if state == RUNNING:
        return "running" if step is not None else "starting"
    return state.removeprefix("JOB_STATE_").lower()


def run_seconds(proto: Any, now: datetime | None = None) -> float:
    """The job's time running: from its start_time to its end_time, or to now while it runs."""
    if "start_time" not in proto:
        return 0.0
    end = proto.end_time if "end_time" in proto else (now or datetime.now(timezone.utc))
    return float(max((end - proto.start_time).total_seconds(), 0.0))


__all__ = ["JobProgress", "row_state", "run_seconds", "step_record", "tasks_of"]
