"""Watching a Vertex AI job (`submit --wait`, `status --watch`) in the view `vtrain local` has.

The rows (:class:`vtrain.view.vertex_rows.JobProgress`) come from the job's state and the step
lines its replicas log; the view (:class:`vtrain.view.live.Watch`) is the local one: a live
table on a terminal, a `[vtrain] progress …` line elsewhere when something changed (at most every
--progress-every), then a last one with the end state. Off a terminal the state changes print as
before (`ID  RUNNING  2m10s`). A HyperparameterTuningJob has no replicas of its own: it keeps the
status line.
"""

from __future__ import annotations

import sys
from typing import Any


def can_watch(job: Any) -> bool:
    """A CustomJob handle (its log names its replicas); a tuning job's trials are jobs of their own."""
    return hasattr(job, "follow_entries") and getattr(job, "kind", "") != "tuning"


def watch_job(job: Any, *, timeout: float | None, poll: float, plain: bool, progress_every: float,
              stream_logs: bool, logs_to_stderr: bool, state_line: Any) -> tuple[str, float]:  # fmt: skip
    """Follow `job` to its end (or `timeout`: WaitTimeout) in the view; its state and the seconds the
    view's thread spent. `stream_logs` also prints every log line but the step lines (the rows show those);
    `state_line` (a plain `vtrain.commands.submit._StatusLine`) says the state changes off a terminal."""
    from vtrain.cloud.vertex.client import _has_reducers
    from vtrain.view.live import Watch, live_possible
    from vtrain.view.vertex_rows import JobProgress

    live = not plain and live_possible(sys.stderr)
    tracker = JobProgress(job, reducers=_has_reducers(job.proto))
    view = Watch(live=live, logs=sys.stderr if logs_to_stderr else sys.stdout, progress_every=progress_every)
    status = None if live else state_line

    def on_entry(entry: dict[str, Any], line: str) -> None:
        step_line = tracker.add(entry)
        for note in tracker.take_notes():
            view.notices.write(f"[vtrain] note: {note}\n")
        if not step_line and stream_logs and line:
            view.echo(line)

    def wait() -> str:
        return str(job.follow_entries(on_entry, timeout=timeout, poll=poll, on_state=status))

    try:
        state = view.watch(tracker, wait, last_line=True)
    finally:
        if status is not None:
            status.close()
    return state, view.cpu_seconds


__all__ = ["can_watch", "watch_job"]
