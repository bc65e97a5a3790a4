"""The replica status file: the step a replica reports to its launcher, written and read here only.

`vtrain local` gives every (re)started replica a file of its own in VTRAIN_STATUS_FILE; the
replica writes each step it finishes there (:func:`vtrain.runtime.report_step`, the Keras
template's step reporter, the DiLoCo syncer), and the launcher reads it to fire ``--fault
…@step:N`` and to count the steps a restart redid. The format is one JSON object::

    {"step": 12, "first": 9, "epoch": 2, "restarts": 1, "time": 1700000000.0}

``step`` the last step finished; ``first`` the first step this process reported (where it
resumed); ``epoch`` or null; ``restarts`` the VTRAIN_RESTART_COUNT the process was started with
(so the launcher tells a report of the current process from one of its predecessor); ``time``
the writer's wall clock. The file is replaced atomically (a temporary file in the same folder,
then a rename): a reader sees the previous record or the new one, never half of one. A reader
still treats anything it cannot parse as "no report yet".

Standard library only: it ships inside replicas and the launcher imports it without TensorFlow.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    """One report: what a replica last wrote to its status file."""

    step: int
    restarts: int = 0
    epoch: int | None = None
    time: float | None = None
    first: int | None = None  # the first step this process reported (where it resumed)

    def to_json(self) -> str:
        """The record as written, keys in the order every writer has used."""
        return json.dumps({"step": int(self.step), "first": self.first, "epoch": self.epoch,
                           "restarts": int(self.restarts), "time": self.time})  # fmt: skip


def write_status(path: str | os.PathLike[str], status: Status) -> None:
    """Replace the file at `path` with `status`, atomically. OSError if the folder is not writable."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".status-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(status.to_json())
        os.replace(tmp, path)  # the launcher never reads half a record
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


#: A record is ~100 bytes; the launcher reads at most this much of a file the trainer may have replaced.
MAX_STATUS_BYTES = 64 * 1024


def read_status(path: str | os.PathLike[str]) -> Status | None:
    """The replica's last report, or None (no file yet, or one that is not a whole record).

    The trainer owns the file: a FIFO, a huge or deep file, ``"step": 1e999`` or ``true`` is "no report",
    never a hang or an exception in the launcher (regular files only, bounded, numbers checked)."""
    from vtrain.runtime.steplog import checked

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            raw = os.read(fd, MAX_STATUS_BYTES + 1)
        finally:
            os.close(fd)
        if len(raw) > MAX_STATUS_BYTES:
            return None
        data = json.loads(raw)
        if not isinstance(data, dict):
            return None
        rec = checked(data)
        return Status(rec["step"], rec.get("restarts", 0), rec.get("epoch"), rec.get("time"), rec.get("first"))
    except (OSError, ValueError, RecursionError):  # BadStepLine is a ValueError
        return None


__all__ = ["Status", "read_status", "write_status"]
