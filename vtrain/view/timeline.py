"""A run's timeline as a picture: one lane per replica over time, drawn from its result.json.

Each lane shows the replica's processes as bars (one per start; a restart begins a new bar), its
steps as a line scaled to the lane, and markers: a fault fired (▼), a restart or whole-job retry
(●), a permanent error or the failure that ended the job (✖), and each recovery shaded from the
failure to the step it resumed at, with the steps redone written on it. DiLoCo merges appear when
the result carries them (``diloco.merges``: at, quorum).

:func:`timeline` turns a result into plain marks (pure, the test compares them with the result);
:func:`html` draws them as a self-contained page (inline SVG, no dependency); :func:`png` with
matplotlib (``pip install 'vtrain[plot]'``), imported here only. Each drawn mark carries its
identity (SVG ``data-mark``, the matplotlib artist's gid), so what was drawn can be read back.
"""

from __future__ import annotations

import html as htmlmod
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vtrain.errors import BackendError
from vtrain.foreign import printable

FAULT, RESTART, RETRY, FAILED, RECOVERY, MERGE = "fault", "restart", "retry_job", "failed", "recovery", "merge"
COLORS = {FAULT: "#d62728", RESTART: "#ff7f0e", RETRY: "#9467bd", FAILED: "#000000", RECOVERY: "#ffbb78",
          MERGE: "#2ca02c"}  # fmt: skip
SYMBOLS = {FAULT: "v", RESTART: "o", RETRY: "s", FAILED: "X", MERGE: "d"}


@dataclass(frozen=True)
class Mark:
    """One thing drawn on a lane at a time (a recovery spans `at` to `until`)."""

    kind: str
    replica: str
    at: float
    until: float | None = None
    label: str = ""

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.replica}:{self.at:g}"


@dataclass
class Timeline:
    title: str
    seconds: float
    lanes: list[str]
    bars: dict[str, list[tuple[float, float, int | None]]] = field(default_factory=dict)  # start, end, exit
    steps: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    marks: list[Mark] = field(default_factory=list)


def timeline(result: Mapping[str, Any]) -> Timeline:
    """The marks of a run from its result (what `vtrain local` writes to result.json)."""
    seconds = float(result.get("seconds") or 0.0)
    restarts = result.get("restarts") or {}
    lanes = list(result.get("replicas") or {})
    line = Timeline(f"{result.get('display_name') or result.get('name', '')} ({result.get('name', '')}): "
                    f"{result.get('state', '')}", seconds, lanes)  # fmt: skip
    for proc in result.get("processes") or []:
        end = proc.get("end")
        line.bars.setdefault(proc["replica"], []).append(
            (float(proc["start"]), seconds if end is None else float(end), proc.get("exit")))
    for label, points in (result.get("steps") or {}).items():
        line.steps[label] = [(float(at), int(step)) for at, step in points]
    for fault in result.get("faults") or []:
        line.marks.append(Mark(FAULT, fault["replica"], float(fault["at"]), label=fault.get("spec", "")))
    for event in restarts.get("events") or []:
        kind = {"restart": RESTART, "retry_job": RETRY, "fail": FAILED}.get(event["action"])
        if kind is None and event.get("permanent"):
            kind = FAILED
        if kind is not None:
            line.marks.append(Mark(kind, event["replica"], float(event["at"]), label=event.get("reason") or ""))
    for rec in restarts.get("recoveries") or []:
        until = _resumed_at(line.steps.get(rec["replica"]) or [], rec)
        redone = rec.get("steps_redone")
        text = f"{rec['seconds']:.1f} s" + ("" if redone is None else f", {redone} step(s) redone")
        line.marks.append(Mark(RECOVERY, rec["replica"], until - float(rec["seconds"]), until, text))
    for merge in (result.get("diloco") or {}).get("merges") or []:
        line.marks.append(Mark(MERGE, merge.get("replica") or (lanes[0] if lanes else ""), float(merge["at"]),
                               label=f"quorum {printable(str(merge.get('quorum', '?')), limit=40)}"))  # fmt: skip
    for mark in line.marks:
        if mark.replica not in line.lanes:
            line.lanes.append(mark.replica)
    return line


_LOG_LINE = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?) \[(?P<label>[\w-]+)\] ")


def result_from_logs(name: str, display_name: str, state: str, lines: Iterable[str]) -> dict[str, Any]:
    """A Vertex job's result in result.json's shape, from its Cloud Logging lines (`vtrain logs --timestamps`).

    Cloud Logging has no process records and no step reports, so each replica gets one bar, from its
    first line to its last; Vertex's own lines (`[vertex]`) are no lane.
    """
    seen: dict[str, list[float]] = {}
    for line in lines:
        found = _LOG_LINE.match(line)
        if not found or found["label"] == "vertex":
            continue
        at = datetime.fromisoformat(found["ts"].rstrip("Z")[:26]).replace(tzinfo=timezone.utc).timestamp()
        first_last = seen.setdefault(found["label"], [at, at])
        first_last[0], first_last[1] = min(first_last[0], at), max(first_last[1], at)
    start = min((v[0] for v in seen.values()), default=0.0)
    end = max((v[1] for v in seen.values()), default=0.0)
    return {
        "name": name, "display_name": display_name, "state": state, "seconds": round(end - start, 3),
        "replicas": dict.fromkeys(seen),
        "processes": [{"replica": label, "restart": 0, "start": round(a - start, 3), "end": round(b - start, 3),
                       "exit": None} for label, (a, b) in seen.items()],
        "restarts": {}, "faults": [], "steps": {},
    }  # fmt: skip


def _resumed_at(points: list[tuple[float, int]], rec: Mapping[str, Any]) -> float:
    """When the replica reported the step it resumed at (the recovery's end), from its steps."""
    if rec.get("at") is not None:
        return float(rec["at"])
    step = rec.get("resumed_at_step")
    hits = [at for at, s in points if s == step]
    return hits[-1] if hits else float(rec["seconds"])


def runs(points: list[tuple[float, int]], bars: list[tuple[float, float, int | None]]) -> list[list[tuple[float, int]]]:
    """The steps split by process: a restarted replica's line starts again where it resumed."""
    if not bars:
        return [points] if points else []
    out = []
    for start, end, _ in bars:
        run = [pt for pt in points if start <= pt[0] <= end]
        if run:
            out.append(run)
    return out


# ---------------------------------------------------------------------------- HTML (inline SVG)
_W, _LEFT, _LANE, _TOP = 960, 110, 56, 40


def html(line: Timeline) -> str:
    """A self-contained page: the timeline as inline SVG, each mark a `data-mark` element with a tooltip."""
    span = max(line.seconds, 1e-9)
    width = _W - _LEFT - 20

    def x(at: float) -> float:
        return round(_LEFT + width * min(max(at, 0.0), span) / span, 1)

    height = _TOP + _LANE * len(line.lanes) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" font-family="sans-serif" '
           'font-size="12">']  # fmt: skip
    for i, lane in enumerate(line.lanes):
        y = _TOP + _LANE * i
        name = htmlmod.escape(lane)
        out.append(f'<text x="8" y="{y + _LANE / 2 + 4}">{name}</text>')
        for start, end, code in line.bars.get(lane, []):
            color = "#9ecae1" if code in (0, None) else "#c6dbef"
            out.append(f'<rect x="{x(start)}" y="{y + 8}" width="{max(1.0, x(end) - x(start))}" height="{_LANE - 16}" '
                       f'fill="{color}" stroke="#3182bd"><title>{name}: {start:.1f}-{end:.1f} s, exit {code}</title>'
                       '</rect>')  # fmt: skip
        points = line.steps.get(lane) or []
        top = max((s for _, s in points), default=0) or 1
        for run in runs(points, line.bars.get(lane, [])):
            path = " ".join(f"{x(at)},{round(y + _LANE - 8 - (_LANE - 16) * s / top, 1)}" for at, s in run)
            out.append(f'<polyline points="{path}" fill="none" stroke="#08519c" stroke-width="1.5">'
                       f"<title>{name}: steps (max {top})</title></polyline>")  # fmt: skip
        for mark in (m for m in line.marks if m.replica == lane):
            tip = htmlmod.escape(f"{mark.kind} {lane} at {mark.at:.1f} s {mark.label}".strip())
            attrs = f'data-mark="{htmlmod.escape(mark.key)}" fill="{COLORS[mark.kind]}"'
            if mark.kind == RECOVERY:
                until = mark.until if mark.until is not None else mark.at
                out.append(f'<rect {attrs} x="{x(mark.at)}" y="{y + 4}" width="{max(1.0, x(until) - x(mark.at))}" '
                           f'height="{_LANE - 8}" opacity="0.5"><title>{tip}</title></rect>')  # fmt: skip
            else:
                out.append(f'<circle {attrs} cx="{x(mark.at)}" cy="{y + 8}" r="6"><title>{tip}</title></circle>')
    axis = _TOP + _LANE * len(line.lanes) + 16
    for i in range(6):
        at = span * i / 5
        out.append(f'<text x="{x(at) - 10}" y="{axis}">{at:.0f} s</text>')
    out.append("</svg>")
    legend = " ".join(f'<span style="color:{c}">&#9679; {k}</span>' for k, c in COLORS.items())
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>" + htmlmod.escape(line.title) +
            "</title></head><body><h3>" + htmlmod.escape(line.title) + "</h3>\n" + "\n".join(out) +
            f"\n<p>{legend}</p></body></html>\n")  # fmt: skip


# ---------------------------------------------------------------------------- PNG (matplotlib)
def png(line: Timeline, path: Path) -> list[str]:
    """Draw `line` to `path` with matplotlib; the keys of the marks drawn (read back from the figure)."""
    try:
        import matplotlib
    except ImportError:
        raise BackendError("drawing timeline.png needs matplotlib: pip install 'vtrain[plot]' "
                           "(timeline.html needs nothing)") from None
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 1 + 0.8 * max(1, len(line.lanes))), dpi=100)
    try:
        for i, lane in enumerate(line.lanes):
            y = len(line.lanes) - 1 - i
            for start, end, code in line.bars.get(lane, []):
                ax.barh(y, max(end - start, 1e-3), left=start, height=0.6, color="#9ecae1" if code in (0, None)
                        else "#c6dbef", edgecolor="#3182bd")  # fmt: skip
            points = line.steps.get(lane) or []
            top = max((s for _, s in points), default=0) or 1
            for run in runs(points, line.bars.get(lane, [])):
                ax.plot([a for a, _ in run], [y - 0.3 + 0.6 * s / top for _, s in run], color="#08519c", lw=1, zorder=4)
            for mark in (m for m in line.marks if m.replica == lane):
                if mark.kind == RECOVERY:
                    until = mark.until if mark.until is not None else mark.at
                    shade = ax.barh(y, max(until - mark.at, 1e-3), left=mark.at, height=0.8, color=COLORS[RECOVERY],
                                    alpha=0.6, zorder=3)  # fmt: skip
                    shade.patches[0].set_gid(mark.key)
                    ax.text((mark.at + until) / 2, y + 0.38, mark.label, ha="center", fontsize=7)
                else:
                    ax.plot([mark.at], [y + 0.3], marker=SYMBOLS[mark.kind], color=COLORS[mark.kind], ms=9,
                            ls="none", gid=mark.key)  # fmt: skip
        ax.set_yticks(range(len(line.lanes)), [lane.replace("$", r"\$") for lane in reversed(line.lanes)])
        ax.set_xlim(0, max(line.seconds, 1e-3))
        ax.set_ylim(-0.7, len(line.lanes) - 0.3)
        ax.set_xlabel("seconds since the replicas started")
        ax.set_title(line.title.replace("$", r"\$"), fontsize=10, loc="left")
        from matplotlib.lines import Line2D

        ax.legend(handles=[Line2D([], [], marker=SYMBOLS[k], color=COLORS[k], ls="none", label=k) for k in SYMBOLS],
                  fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # fmt: skip
        fig.tight_layout()
        drawn = [gid for a in fig.findobj() if (gid := a.get_gid())]
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return drawn


def draw_run(run_dir: Path, result: Mapping[str, Any] | None = None, into: Path | None = None) -> list[Path]:
    """Write timeline.html (always) and timeline.png (with matplotlib) into `into` (default: `run_dir`, whose
    result.json is read when `result` is None); the files written."""
    if result is None:
        from vtrain.errors import UsageError
        from vtrain.foreign.data import Unreadable
        from vtrain.local.resultfile import read_result

        try:
            result = read_result(run_dir / "result.json")
        except Unreadable as err:
            raise UsageError(f"{err}; a local run's folder has the result.json `vtrain local` wrote") from None
    line = timeline(result)
    into = run_dir if into is None else into
    written = []
    try:
        (into / "timeline.html").write_text(html(line), encoding="utf-8")
        written.append(into / "timeline.html")
    except OSError:
        pass
    try:
        png(line, into / "timeline.png")
        written.append(into / "timeline.png")
    except (BackendError, OSError):
        pass
    return written


__all__ = ["Mark", "Timeline", "draw_run", "html", "png", "result_from_logs", "timeline"]
