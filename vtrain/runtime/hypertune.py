"""Reporting a trial's metric the way Vertex AI's hyperparameter tuning service reads it.

Vertex passes each trial's values as `--NAME=VALUE` arguments and reads the metric back from
a file inside the replica, in the format of Google's `cloudml-hypertune` package: the file
named by CLOUD_ML_HP_METRIC_FILE (default /tmp/hypertune/output.metrics) holds the latest 100
reports, one JSON object per line with sorted keys:

    {"checkpoint_path": "", "global_step": "3", "loss": "0.25", "timestamp": 1718000000.5, "trial": "2"}

(the value and the step as text, the trial from CLOUD_ML_TRIAL_ID, "0" outside a trial). The
file is rewritten whole at each report, as that package does. `vtrain local` sets both variables
for each trial and reads the same file, so a trainer that reports here is tuned alike on
Vertex and on this machine. No dependency: the format is written here, and the tests check it
against the package itself.

    from vtrain import runtime
    runtime.report_metric("accuracy", 0.93, step=epoch)
    model.fit(..., callbacks=[runtime.metric_reporter(keras, "val_accuracy")])
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from vtrain.runtime.decision import _role

METRIC_FILE_ENV = "CLOUD_ML_HP_METRIC_FILE"
TRIAL_ID_ENV = "CLOUD_ML_TRIAL_ID"
DEFAULT_METRIC_FILE = "/tmp/hypertune/output.metrics"  # noqa: S108 - Vertex's fixed path
#: The tag the package uses when the caller names none.
DEFAULT_METRIC_TAG = "training/hptuning/metric"
#: Reports kept in the file (the package keeps this many).
MAX_ENTRIES = 100
_RESERVED = frozenset({"timestamp", "trial", "global_step", "checkpoint_path"})


@dataclass(frozen=True)
class Report:
    """One line of the metric file, read back."""

    name: str
    value: float
    step: int
    timestamp: float
    trial: str


def trial_id() -> str | None:
    """This trial's ID (Vertex sets CLOUD_ML_TRIAL_ID in every trial's replicas); None outside a trial."""
    return os.environ.get(TRIAL_ID_ENV) or None


def metric_file() -> Path:
    return Path(os.environ.get(METRIC_FILE_ENV) or DEFAULT_METRIC_FILE)


class _Writer:
    """The reports of this process, kept and rewritten as the package does."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: deque[dict[str, Any]] = deque(maxlen=MAX_ENTRIES)
        self.path: Path | None = None

    def add(self, path: Path, entry: dict[str, Any]) -> None:
        with self.lock:
            if path != self.path:  # a new file (tests switch it): start its history afresh
                self.path, self.entries = path, deque(maxlen=MAX_ENTRIES)
            self.entries.append(entry)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in self.entries), encoding="utf-8")
            os.replace(tmp, path)  # a reader never sees half a file


_WRITER = _Writer()


def report_metric(name: str, value: float, step: int | None = None, checkpoint_path: str = "") -> None:
    """Report `value` of metric `name` at `step` to the tuning service (Vertex AI or `vtrain local`).

    Report the metric the job file's `tuning.metric.name` names; the last report of a trial
    is its final measurement, the earlier ones feed median early stopping.
    """
    if not isinstance(name, str) or not name or name in _RESERVED:
        raise ValueError(f"metric name must be a non-empty text other than {', '.join(sorted(_RESERVED))}")
    number, now = float(value), time.time()
    entry = {
        "timestamp": now,
        "trial": str(trial_id() or 0),
        name: str(number),
        "global_step": str(int(step) if step else 0),
        "checkpoint_path": checkpoint_path,
    }
    _WRITER.add(metric_file(), entry)
    from vtrain.runtime.experiment_log import record_metric

    record_metric(name, number, step, now)  # the run's metrics (and series), logged at exit


def read_reports(path: str | os.PathLike[str]) -> list[Report]:
    """Every report in a metric file, oldest first; lines that are not reports are skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        for key, raw in data.items():
            if key in _RESERVED:
                continue
            try:
                out.append(Report(key, float(raw), int(float(data.get("global_step") or 0)),
                                  float(data.get("timestamp") or 0.0), str(data.get("trial", "0"))))
            except (TypeError, ValueError):
                continue
    return out


def metric_reporter(keras: ModuleType, metric: str = "val_loss", name: str | None = None) -> Any:
    """A Keras callback that reports `logs[metric]` at the end of each epoch (step = epoch number),
    as `name` (default: `metric`). Only the chief reports: its file is the one Vertex reads."""
    reported = name or metric
    chief = _role(os.environ)[2]

    class MetricReporter(keras.callbacks.Callback):  # type: ignore[misc,name-defined]
        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            logs = logs or {}
            if metric not in logs:
                known = ", ".join(sorted(logs)) or "none"
                raise ValueError(f"metric_reporter: Keras logged no '{metric}' this epoch; logged: {known}")
            if chief:
                report_metric(reported, float(logs[metric]), step=epoch + 1)

    return MetricReporter()


__all__ = [
    "DEFAULT_METRIC_FILE",
    "METRIC_FILE_ENV",
    "TRIAL_ID_ENV",
    "Report",
    "metric_file",
    "metric_reporter",
    "read_reports",
    "report_metric",
    "trial_id",
]
