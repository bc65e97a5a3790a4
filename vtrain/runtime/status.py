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
import tempfile
from dataclasses import dataclass
from pathlib import Path


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


def read_status(path: str | os.PathLike[str]) -> Status | None:
    """The replica's last report, or None (no file yet, or one that is not a whole record)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        first = data.get("first")
        return Status(int(data["step"]), int(data.get("restarts", 0)), data.get("epoch"), data.get("time"),
                      None if first is None else int(first))  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


__all__ = ["Status", "read_status", "write_status"]
