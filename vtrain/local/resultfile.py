"""A run's ``result.json`` read back (`vtrain timeline RUN_DIR`): bounded, and each field it draws checked.

`vtrain local` writes result.json (:meth:`vtrain.local.job.LocalJob`), but the folder a user points
at holds whatever is there: a file edited by hand, one from another tool, a copy cut short, a
binary, ``NaN`` where a time belongs. :func:`read_result` reads it bounded
(:func:`vtrain.foreign.data.read_json`) and :func:`check_result` checks every field the timeline
draws; anything wrong is one :class:`~vtrain.foreign.data.Unreadable` line naming the file and the
field (``run/result.json: unreadable: processes[0].start is NaN; allowed: a finite number``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vtrain.foreign.data import Doc, read_json, source_name

#: result.json keeps at most MAX_STEP_POINTS points per replica: a few MB at the most.
MAX_RESULT_BYTES = 16 * 1024 * 1024
_TIME: dict[str, Any] = {"minimum": None}


def read_result(path: Path) -> dict[str, Any]:
    """The result at `path`, read bounded and checked (:func:`check_result`)."""
    name = source_name(path)
    return check_result(read_json(path, source=name, max_bytes=MAX_RESULT_BYTES), name)


def check_result(value: Any, source: str) -> dict[str, Any]:
    """`value` when it has result.json's shape wherever the timeline reads it; else Unreadable."""
    doc = Doc(value, source).require_object()
    for key in ("name", "display_name", "state"):
        doc.text(key)
    doc.number("seconds")
    doc.mapping("replicas")
    for proc in doc.items("processes"):
        proc.require_object().text("replica", required=True)
        proc.number("start", required=True, **_TIME)
        proc.number("end", **_TIME)
        proc.integer("exit", minimum=-(2**31))
    for _, points in doc.entries("steps"):
        for point in points.elements():
            if len(point.elements()) != 2:
                raise point.fail(point.path, point.value, "an array [seconds, step]")
            point.number(0, required=True, **_TIME)
            point.integer(1, required=True)
    for fault in doc.items("faults"):
        fault.require_object().text("replica", required=True)
        fault.number("at", required=True, **_TIME)
        fault.text("spec")
    restarts = doc.mapping_or_empty("restarts")
    for event in restarts.items("events"):
        event.require_object().text("replica", required=True)
        event.text("action", required=True)
        event.number("at", required=True, **_TIME)
        event.text("reason", limit=4096)
        event.flag("permanent")
    for rec in restarts.items("recoveries"):
        rec.require_object().text("replica", required=True)
        rec.number("seconds", required=True)
        rec.integer("steps_redone")
        rec.number("at", **_TIME)
        rec.integer("resumed_at_step")
    for merge in doc.mapping_or_empty("diloco").items("merges"):
        merge.require_object().text("replica")
        merge.number("at", required=True, **_TIME)
    return value  # type: ignore[no-any-return]


__all__ = ["MAX_RESULT_BYTES", "check_result", "read_result"]
