"""Step reports on Vertex AI: one short JSON line on stdout, which Cloud Logging keeps.

On Vertex there is no launcher to read a status file (:mod:`.status`), so a watcher (`vtrain
submit --wait`, `vtrain status --watch`) learns each replica's step from its log. The line is::

    {"vtrain": "step", "step": 120, "first": 1, "epoch": 2, "restarts": 0, "since": 1700000000.0, "time": 1700000042.5}

``step``/``first``/``epoch`` as in the status file; ``restarts`` only where this process knows it
(VTRAIN_RESTART_COUNT, or the ledger once :func:`~.restarts.restart_count` counted it: reading it
here would import TensorFlow); ``since`` this process's first report (a new value is a new
process: a restart); ``time`` the writer's clock, so steps/s does not depend on Cloud Logging's
ingestion delay. At most one line every VTRAIN_STEP_LOG_EVERY seconds (default 5) per replica,
and the last step at exit, so a 64-replica job adds ~770 entries a minute however fast it steps.

Written when the replica runs on Vertex (CLOUD_ML_JOB_ID set, no VTRAIN_STATUS_FILE: `vtrain local`
sets one) or VTRAIN_STEP_LOG=1 (the emulator's `--run-jobs`, which plays Vertex); VTRAIN_STEP_LOG=0
turns it off. Standard library only: it runs in every replica at every step, and costs one
clock read per step between lines.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

from vtrain.constants import STATUS_FILE_ENV

STEP_LOG_ENV = "VTRAIN_STEP_LOG"
STEP_LOG_EVERY_ENV = "VTRAIN_STEP_LOG_EVERY"
DEFAULT_EVERY = 5.0
MARK = "vtrain"
KIND = "step"


def enabled(env: Mapping[str, str]) -> bool:
    """Whether this replica logs its steps: on Vertex, or when told to."""
    forced = env.get(STEP_LOG_ENV, "").strip().lower()
    if forced in ("1", "true", "yes", "on"):
        return True
    if forced in ("0", "false", "no", "off"):
        return False
    return bool(env.get("CLOUD_ML_JOB_ID")) and not env.get(STATUS_FILE_ENV)


def every(env: Mapping[str, str]) -> float:
    """Seconds between two lines (VTRAIN_STEP_LOG_EVERY; a bad value is the default, never an error)."""
    try:
        value = float(env.get(STEP_LOG_EVERY_ENV, "") or DEFAULT_EVERY)
    except ValueError:
        return DEFAULT_EVERY
    return value if value >= 0 else DEFAULT_EVERY


def line(record: Mapping[str, Any]) -> str:
    """The line as written: the marker first, compact, keys with no value left out."""
    return json.dumps({MARK: KIND, **{k: v for k, v in record.items() if v is not None}}, separators=(",", ":"))


#: The runtime's lines are ~130 characters; a longer one is not its own (and is not parsed).
MAX_LINE = 4096
#: Steps, epochs and restarts are whole numbers below 2^53 (Cloud Logging keeps JSON numbers as doubles).
MAX_WHOLE = 2**53
#: ``since``/``time`` are Unix times: from 0 to the year 5138.
MAX_TIME = 1e11


class BadStepLine(ValueError):
    """A line marked as a step line (``"vtrain": "step"``) whose fields are not the runtime's: what is wrong."""


def parse(text: str) -> dict[str, Any] | None:
    """A step line's record (step an int, the rest as written), or None for any other line.

    :class:`BadStepLine` for a line marked as one whose numbers are unusable (``"step": 1e999``, ``true``,
    ``-3``): a watcher says so once and goes on."""
    text = text.strip()
    if not text.startswith("{") or f'"{MARK}"' not in text:
        return None
    if len(text) > MAX_LINE:
        if "".join(text[:40].split()).startswith(f'{{"{MARK}":"{KIND}"'):
            raise BadStepLine(f"a step line of {len(text):,} characters; the runtime's have about 130")
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return record_of(data)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, (int, float)):
        text = repr(value)
        return {"nan": "NaN"}.get(text, text) if len(text) <= 24 else f"a {len(text)}-digit number"
    names: dict[type, str] = {str: "a string", list: "an array", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _whole(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if isinstance(value, float) and value.is_integer():  # a jsonPayload's numbers are doubles
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_WHOLE:
        raise BadStepLine(f"{key} is {_kind(value)}; allowed: a whole number from 0 to 2^53")
    return value


def _seconds(data: dict[str, Any], key: str) -> float:
    value = data[key]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= MAX_TIME:
        raise BadStepLine(f"{key} is {_kind(value)}; allowed: a Unix time in seconds (a finite number ≥ 0)")
    return float(value)


def record_of(data: Any) -> dict[str, Any] | None:
    """The record of a decoded line (a jsonPayload Cloud Logging parsed may hold it whole); None for
    anything not marked as a step line, :class:`BadStepLine` for a marked one with unusable fields."""
    if not isinstance(data, dict) or data.get(MARK) != KIND:
        return None
    return checked(data)


def checked(data: dict[str, Any]) -> dict[str, Any]:
    """`data`'s step, first, epoch, restarts (whole numbers from 0 to 2^53), since and time (Unix times),
    the ones present; :class:`BadStepLine` saying which is unusable. The status file's format too."""
    if data.get("step") is None:
        raise BadStepLine("step is missing; allowed: a whole number from 0 to 2^53")
    out: dict[str, Any] = {"step": _whole(data, "step")}
    for key in ("first", "epoch", "restarts"):
        if data.get(key) is not None:
            out[key] = _whole(data, key)
    for key in ("since", "time"):
        if data.get(key) is not None:
            out[key] = _seconds(data, key)
    return out


class StepLog:
    """The rate-limited writer: :meth:`record` at each step, a line when `every` seconds passed."""

    def __init__(self, every: float, stream: IO[str] | None = None) -> None:
        self.every = every
        self._stream = stream
        self._lock = threading.Lock()
        self._last_written = float("-inf")  # time.monotonic() of the last line
        self._pending: dict[str, Any] | None = None  # the newest record not written yet
        self._since: float | None = None

    def record(self, step: int, *, first: int, epoch: int | None, restarts: int | None) -> None:
        now = time.monotonic()
        with self._lock:
            if self._since is None:
                self._since = round(time.time(), 2)
            self._pending = {"step": int(step), "first": first, "epoch": epoch, "restarts": restarts,
                             "since": self._since, "time": None}  # fmt: skip
            if now - self._last_written < self.every:
                return
            self._last_written = now
            self._write_pending()

    def flush(self) -> None:
        """Write the last step if it was not (at exit, so the watcher sees where the replica ended)."""
        with self._lock:
            if self._pending is not None:
                self._write_pending()

    def _write_pending(self) -> None:
        record, self._pending = self._pending or {}, None
        record["time"] = round(time.time(), 3)
        stream = self._stream or sys.stdout
        with contextlib.suppress(OSError, ValueError):  # a closed stdout must never stop training
            stream.write(line(record) + "\n")
            stream.flush()


_log: list[StepLog | None] = []  # this process's writer (None: it logs no steps), decided at its first step


def report(step: int, *, first: int, epoch: int | None, restarts: int | None,
           env: Mapping[str, str] | None = None) -> None:  # fmt: skip
    """Log `step` if this replica logs steps (see the module); cheap between lines."""
    if not _log:
        env = os.environ if env is None else env
        writer = StepLog(every(env)) if enabled(env) else None
        if writer is not None:
            atexit.register(writer.flush)
        _log.append(writer)
    if _log[0] is not None:
        _log[0].record(step, first=first, epoch=epoch, restarts=restarts)


__all__ = ["MAX_LINE", "BadStepLine", "checked",
           "STEP_LOG_ENV", "STEP_LOG_EVERY_ENV", "StepLog", "enabled", "every", "line", "parse", "record_of",
           "report"]
