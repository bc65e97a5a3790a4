"""The trial table `vtrain local` draws while tuning and `vtrain status` prints for a tuning job."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from vtrain.foreign import printable


@dataclass(frozen=True)
class TrialRow:
    id: str
    state: str  # Vertex's Trial.State names: REQUESTED, ACTIVE, STOPPING, SUCCEEDED, INFEASIBLE
    params: dict[str, str] = field(default_factory=dict)
    value: float | None = None
    step: int | None = None
    note: str = ""


def format_value(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.6g}"


def format_table(rows: Sequence[TrialRow], metric: str, best: str | None = None) -> list[str]:
    """Aligned lines: TRIAL STATE <params...> METRIC STEP NOTE; the best trial marked with *. Every cell
    printable: a note is a trial's error (a trainer's line, Vertex's infeasibleReason)."""
    names: list[str] = []
    for row in rows:
        names += [n for n in row.params if n not in names]
    header = ["TRIAL", "STATE", *names, metric, "STEP", ""]
    table = [header]
    for row in rows:
        mark = "*" if best is not None and row.id == best else ""
        table.append([f"{row.id}{mark}", row.state, *(row.params.get(n, "-") for n in names),
                      format_value(row.value), "-" if row.step is None else str(row.step), row.note])
    table = [[printable(str(c)) for c in r] for r in table]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]


__all__ = ["TrialRow", "format_table", "format_value"]
