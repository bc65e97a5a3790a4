"""The data of TensorBoard time series in the emulator, as the SDK writes and reads it
(`log_time_series_metrics`, `get_experiment_df`, `TensorboardRun.read_time_series_data`):

    POST .../experiments/E/runs/R:write          WriteTensorboardRunDataRequest → {}
    POST .../experiments/E:write                 WriteTensorboardExperimentDataRequest → {}
    POST .../experiments/E:batchCreate           BatchCreateTensorboardTimeSeriesRequest
    POST .../experiments/E/runs:batchCreate      BatchCreateTensorboardRunsRequest
    GET  .../tensorboards/T:batchRead?timeSeries=NAME&timeSeries=...   each series' points
    GET  .../runs/R/timeSeries/S:read?maxDataPoints=N                  one series' points

A point is kept as the client sent it (parsed strictly into `TimeSeriesData`); a series' output-only
`metadata` (maxStep, maxWallTime) follows its points. Points go to series of the run that exist;
an unknown series or run is a 404, as on Vertex.
"""

from __future__ import annotations

from typing import Any

from google.cloud.aiplatform_v1 import types

from vtrain.emulator.errors import invalid_argument, not_found
from vtrain.emulator.wire import parse_message as _parse_message

#: Points a series keeps at most (older ones are dropped first), and the most a read answers.
MAX_POINTS = 10_000
READ_POINTS = 1000


def _data(res: Any, run: str, items: Any) -> None:
    if not isinstance(items, list):
        raise invalid_argument("Invalid JSON payload received. 'timeSeriesData' is a list of TimeSeriesData.")
    parsed = [_parse_message(item, types.TimeSeriesData, "TimeSeriesData") for item in items]
    for item in parsed:
        series = f"{run}/timeSeries/{item.get('tensorboardTimeSeriesId', '')}"
        if series not in res.items:
            raise not_found(f"TensorboardTimeSeries {series[:300]} is not found.")
    for item in parsed:
        series = f"{run}/timeSeries/{item['tensorboardTimeSeriesId']}"
        points = res.points.setdefault(series, [])
        points.extend(item.get("values", []))
        del points[:-MAX_POINTS]
        if points:
            last = max(points, key=lambda p: int(p.get("step", 0)))
            res.items[series]["metadata"] = {"maxStep": str(last.get("step", "0")),
                                             **({"maxWallTime": last["wallTime"]} if "wallTime" in last else {})}


def write_run(res: Any, name: str, doc: dict[str, Any], _: Any) -> dict[str, Any]:
    _data(res, name, doc.get("timeSeriesData", []))
    return {}


def write_experiment(res: Any, name: str, doc: dict[str, Any], _: Any) -> dict[str, Any]:
    requests = doc.get("writeRunDataRequests", [])
    if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
        raise invalid_argument("Invalid JSON payload received. 'writeRunDataRequests' is a list.")
    for request in requests:
        run = str(request.get("tensorboardRun", ""))
        if not run.startswith(name + "/runs/") or run not in res.items:
            raise not_found(f"TensorboardRun {run[:300]} is not found in {name}.")
        _data(res, run, request.get("timeSeriesData", []))
    return {}


def _series_data(res: Any, series: str, limit: int) -> dict[str, Any]:
    meta = res.items[series]
    points = res.points.get(series, [])[-limit:]
    data: dict[str, Any] = {"tensorboardTimeSeriesId": series.rsplit("/", 1)[-1],
                            "valueType": meta.get("valueType", "VALUE_TYPE_UNSPECIFIED")}  # fmt: skip
    if points:
        data["values"] = points
    return data


def batch_read(res: Any, name: str, _: dict[str, Any], multi: dict[str, list[str]]) -> dict[str, Any]:
    wanted = multi.get("timeSeries", [])
    if not wanted:
        raise invalid_argument("time_series is required.", [("time_series", "required")])
    missing = [s for s in wanted if not s.startswith(name + "/") or s not in res.items]
    if missing:
        raise not_found(f"TensorboardTimeSeries {missing[0][:300]} is not found.")
    return {"timeSeriesData": [_series_data(res, s, READ_POINTS) for s in wanted]}


def read(res: Any, name: str, _: dict[str, Any], multi: dict[str, list[str]]) -> dict[str, Any]:
    raw = (multi.get("maxDataPoints") or ["0"])[-1]
    if not (raw.isascii() and raw.isdigit() and len(raw) < 10):
        raise invalid_argument(f"Invalid value at 'max_data_points' (TYPE_INT32), \"{raw[:30]}\"")
    limit = min(int(raw) or READ_POINTS, READ_POINTS)
    return {"timeSeriesData": _series_data(res, name, limit)}


VERBS: dict[tuple[str, str, str], Any] = {
    ("TensorboardRun", "write", "POST"): write_run,
    ("TensorboardExperiment", "write", "POST"): write_experiment,
    ("Tensorboard", "batchRead", "GET"): batch_read,
    ("TensorboardTimeSeries", "read", "GET"): read,
}

__all__ = ["MAX_POINTS", "VERBS"]
