"""The chief logs its Experiment Run's params and final metrics, as `aiplatform.log_params` /
`log_metrics` would, when the job has an experiment run.

Vertex tells a job its run the way the SDK reads it (google/cloud/aiplatform/metadata/metadata.py,
`_ExperimentTracker.experiment_run`): AIP_EXPERIMENT_NAME and AIP_EXPERIMENT_RUN_NAME, each a name
or a full context name. vtrain's request names both in full, so the project and region come from
the names. Only then, and only in the chief, is google-cloud-aiplatform imported (lazily, at exit).

What is logged: params, the trainer's own `--NAME=VALUE` / `--NAME VALUE` arguments (a tuning
trial's hyperparameters arrive so too), numbers as numbers; metrics, the last value of each metric
reported through `runtime.report_metric` (so `metric_reporter` too), logged at exit (the SDK is imported
at the first report: exit hooks cannot be added once exit has begun). When the run is backed by a
TensorBoard run (submit backs it when the job links a TensorBoard; the SDK finds it through the run's
`-tb-run` artifact), every report is also a point of that metric's time series, as
`aiplatform.log_time_series_metrics(metrics, step=..., wall_time=...)` writes it: at the report's step
(or, for a report without one, its number among that metric's reports) and time. Bounded: at most
MAX_METRICS metric names (later names are not kept) and MAX_STEPS steps a run (past that, every other
step is dropped, the last always kept, so a long run's series keeps its whole shape, thinned). A
logging error is one line on stderr, never the training's failure. VTRAIN_EXPERIMENT_API_ENDPOINT
(tests, `vtrain emulator --run-jobs` sets it) sends the calls to that endpoint over REST with anonymous
credentials.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

EXPERIMENT_ENV = "AIP_EXPERIMENT_NAME"
RUN_ENV = "AIP_EXPERIMENT_RUN_NAME"
ENDPOINT_ENV = "VTRAIN_EXPERIMENT_API_ENDPOINT"
_CONTEXT = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/metadataStores/[^/]+/contexts/"
                      r"(?P<id>[^/]+)$")  # fmt: skip
_FLAG = re.compile(r"^--([A-Za-z_][A-Za-z0-9_.-]*)(?:=(.*))?$", re.DOTALL)
MAX_PARAMS = 200
MAX_VALUE = 1000
#: Metric names kept (final values and series), and steps a run's series keep (thinned past it).
MAX_METRICS = 100
MAX_STEPS = 200

_lock = threading.Lock()
_metrics: dict[str, float] = {}
_reports: dict[str, int] = {}  # reports of each metric so far: the step of one reported without a step
_series: dict[int, dict[str, float]] = {}  # step -> the metrics reported at it
_walls: dict[int, float] = {}  # step -> when it was last reported (seconds since the epoch)
_registered = False


def run_of(env: Mapping[str, str]) -> tuple[str, str, str, str] | None:
    """(project, location, experiment, run name) of this job's run, or None when it has none."""
    experiment = _CONTEXT.match(env.get(EXPERIMENT_ENV, ""))
    run = env.get(RUN_ENV, "")
    if experiment is None or not run:
        return None
    exp_id = experiment["id"]
    m = _CONTEXT.match(run)
    run_id = m["id"] if m else run
    name = run_id[len(exp_id) + 1 :] if run_id.startswith(exp_id + "-") else run_id
    return experiment["project"], experiment["location"], exp_id, name


def params_of(argv: Sequence[str]) -> dict[str, Any]:
    """The trainer's `--NAME=VALUE` and `--NAME VALUE` arguments (a bare `--flag` is true), bounded."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv) and len(out) < MAX_PARAMS:
        m = _FLAG.match(argv[i])
        i += 1
        if m is None:
            continue
        value: str | None = m.group(2)
        if value is None and i < len(argv) and not argv[i].startswith("--"):
            value, i = argv[i], i + 1
        out[m.group(1)] = True if value is None else _number(value[:MAX_VALUE])
    return out


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def experiment_run(env: Mapping[str, str] | None = None) -> str | None:
    """The name of the Experiment Run this job logs to (Vertex names it in AIP_EXPERIMENT_RUN_NAME), or None."""
    names = run_of(os.environ if env is None else env)
    return None if names is None else names[3]


def record_metric(name: str, value: float, step: int | None = None, wall_time: float | None = None) -> None:
    """Keep the latest value of `name` and its point at `step` (bounded, see the module); at the first
    report, the chief of a job with a run logs at exit."""
    global _registered
    number = float(value)
    with _lock:
        if name in _metrics or len(_metrics) < MAX_METRICS:
            _metrics[name] = number
            _reports[name] = _reports.get(name, 0) + 1
            at = int(step) if step else _reports[name]
            _series.setdefault(at, {})[name] = number
            _walls[at] = time.time() if wall_time is None else float(wall_time)
            if len(_series) > MAX_STEPS:
                _thin()
        if _registered:
            return
        _registered = True
    if run_of(os.environ) is not None and _is_chief():
        try:  # now, not at exit: importing it registers exit hooks of its own, refused once exit has begun
            import google.cloud.aiplatform  # noqa: F401
        except Exception as err:
            _warn(os.environ.get(RUN_ENV, ""), err)
            return
        atexit.register(flush)


def _thin() -> None:
    """Drop every other step, the last kept (under _lock)."""
    steps = sorted(_series)
    for at in steps[-2::-2]:
        del _series[at], _walls[at]


def _is_chief() -> bool:
    from vtrain.runtime.decision import _role

    try:
        return bool(_role(os.environ)[2])
    except Exception:  # an unreadable cluster description: a one-replica job's chief
        return True


def flush(env: Mapping[str, str] | None = None, argv: Sequence[str] | None = None) -> bool:
    """Log the params and the metrics kept so far to this job's run; False (and one line) on any error."""
    env = os.environ if env is None else env
    names = run_of(env)
    if names is None:
        return False
    project, location, experiment, run = names
    with _lock:
        metrics: dict[str, float | int | str] = dict(_metrics)
        series = {at: (dict(_series[at]), _walls[at]) for at in sorted(_series)}
    params = params_of(sys.argv[1:] if argv is None else argv)
    try:
        from google.cloud import aiplatform

        options: dict[str, Any] = {"project": project, "location": location}
        endpoint = env.get(ENDPOINT_ENV)
        if endpoint:
            from google.auth.credentials import AnonymousCredentials

            anonymous = AnonymousCredentials()
            options.update(api_transport="rest", api_endpoint=endpoint, credentials=anonymous)
        hidden = {k: os.environ.pop(k) for k in (EXPERIMENT_ENV, RUN_ENV) if k in os.environ}
        try:  # init reads them before it takes the project (and looks the experiment up with ADC's)
            aiplatform.init(**options)
        finally:
            os.environ.update(hidden)
        target = aiplatform.ExperimentRun(run, experiment=experiment, project=project, location=location)
        if params:
            target.log_params(params)
        if metrics:
            target.log_metrics(metrics)
        if series and getattr(target, "_backing_tensorboard_run", None) is not None:  # as the SDK finds it
            from google.protobuf.timestamp_pb2 import Timestamp

            for at, (values, wall) in series.items():
                stamp = Timestamp()
                stamp.FromNanoseconds(int(wall * 1e9))
                target.log_time_series_metrics(values, step=at, wall_time=stamp)
        return True
    except Exception as err:  # never the training's failure
        _warn(run, err)
        return False


def _warn(run: str, err: BaseException) -> None:
    from vtrain.foreign import printable

    print(f"vtrain.runtime: could not log to the experiment run '{printable(run, limit=200)}': "
          f"{printable(f'{type(err).__name__}: {err}', limit=500)}", file=sys.stderr, flush=True)  # fmt: skip


__all__ = ["ENDPOINT_ENV", "EXPERIMENT_ENV", "MAX_METRICS", "MAX_STEPS", "RUN_ENV", "experiment_run", "flush",
           "params_of", "record_metric", "run_of"]
