"""A replica's profile read back for `vtrain estimate --from-run`: bounded, and every field the advisor uses checked.

The runtime writes the profile (:mod:`vtrain.runtime.profile_record`), but what lies in a run folder
is whatever is there: an edited file, another tool's JSON, a trainer that wrote ``"median_s":
Infinity``, ``"count_params": true`` or ``"gradient_bytes": -4``. The advisor would turn such a
number into a confident verdict, so :func:`check_profile` refuses a profile whose fields are of the
wrong type or range, naming the file and the field (``chief-0.json: unreadable: steps.median_s is
inf; allowed: a finite number ≥ 0``); :func:`read_profile` reads one bounded
(:func:`vtrain.foreign.data.read_json`). Fields the advisor does not read are left as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vtrain.foreign.data import Doc, Unreadable, read_json, source_name

#: A profile is ~2 KB; a trainer's own extras may add some.
MAX_PROFILE_BYTES = 4 * 1024 * 1024
_COUNTS = ("count_params", "gradient_bytes", "activation_bytes_per_example", "examples_per_step")
_TEXTS = ("replica", "job_id", "config_hash", "strategy", "precision")


def read_profile(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, read bounded; :class:`Unreadable` for anything that is not one."""
    name = source_name(path)
    value = read_json(path, source=name, max_bytes=MAX_PROFILE_BYTES)
    Doc(value, name).require_object()
    return value  # type: ignore[no-any-return]


def check_profile(data: dict[str, Any], source: str) -> dict[str, Any]:
    """`data` when every field the advisor reads has its type and range; else :class:`Unreadable`
    naming the first field that has not."""
    doc = Doc(data, source).require_object()
    for key in _TEXTS:
        doc.text(key, limit=200)
    doc.flag("complete")
    for key in _COUNTS:
        doc.integer(key)
    doc.integer("replicas_in_sync", minimum=1)
    device = doc.mapping("device")
    if device is not None:
        device.text("kind", limit=40)
        device.text("name", limit=200)
        device.integer("count")
    steps = doc.mapping("steps")
    if steps is not None:
        for key in ("count", "warmup", "timed"):
            steps.integer(key)
        for key in ("median_s", "p90_s"):
            steps.number(key)
        steps.number("input_wait_share", maximum=1.0)
    memory = doc.mapping("memory")
    if memory is not None:
        memory.text("kind", limit=40)
        for key in ("peak_bytes", "baseline_bytes", "start_bytes", "rss_peak_bytes"):
            memory.integer(key)
    parameters = doc.mapping("parameters")
    if parameters is not None:
        parameters.integer("trainable")
        parameters.integer("non_trainable")
        for _, row in parameters.entries("by_dtype"):
            row.require_object()
            for key in ("count", "bytes", "trainable"):
                row.integer(key)
    optimizer = doc.mapping("optimizer")
    if optimizer is not None:
        optimizer.text("name", limit=200)
        optimizer.integer("slot_bytes")
        optimizer.number("slots_per_param", maximum=1e6)
    flops = doc.mapping("flops")
    if flops is not None:
        flops.number("per_step")
        flops.number("per_example")
        flops.integer("batch")
        flops.text("note", limit=2000)
    return data


__all__ = ["MAX_PROFILE_BYTES", "Unreadable", "check_profile", "read_profile"]
