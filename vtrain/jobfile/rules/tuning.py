"""The `tuning:` block: what Vertex AI's HyperparameterTuningJob would refuse, or silently misread.

Sources: StudySpec and HyperparameterTuningJob in the v1 REST reference
(https://cloud.google.com/vertex-ai/docs/reference/rest/v1/StudySpec): grid search takes only
integer, discrete and categorical parameters; discrete values are increasing and at most
1,000; log scales need positive values; parallelTrialCount and maxFailedTrialCount are
bounded by maxTrialCount. Each trial receives its values as `--NAME=VALUE`, so names must be
usable as command-line flags.
"""

from __future__ import annotations

import math
import re
from typing import Any

from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.nodes import did_you_mean
from vtrain.jobfile.rules.base import Rules, try_fix, with_suggestion
from vtrain.tuning.config import ParameterConfig, TuningConfig
from vtrain.tuning.search import matches

_FLAG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_METRIC_NAME = re.compile(r"^\S+$")
MAX_DISCRETE_VALUES = 1000
#: A grid bigger than this is surely a mistake (an integer range of millions).
MAX_GRID_POINTS = 100_000


def _path(p: ParameterConfig, *rest: str) -> tuple[str, ...]:
    return ("tuning", "parameters", p.name, *rest)


def _check_range(r: Rules, p: ParameterConfig) -> None:
    for key in ("min", "max"):
        if getattr(p, key) is None:
            r.add(_path(p, key), f"a {p.type} parameter needs both min and max; add {key}", at=_path(p, "type"))
    if p.values:
        r.add(_path(p, "values"), f"a {p.type} parameter takes min and max, not values; remove values (or use "
                                  "type: discrete for a list of numbers)")
    if p.min is None or p.max is None:
        return
    if p.type == "integer":
        for key in ("min", "max"):
            value = getattr(p, key)
            if isinstance(value, float) and not value.is_integer():
                r.add(_path(p, key), f"an integer parameter needs whole numbers, got {value}; use type: double "
                                     "for fractions")
    if p.min >= p.max:
        r.add(_path(p, "max"), f"max must be greater than min ({p.min}), got {p.max}")
    if p.scale in ("log", "reverse_log") and p.min <= 0:
        r.add(_path(p, "min"), f"a {p.scale} scale needs min > 0, got {p.min}; use scale: linear or a positive min")


def _check_values(r: Rules, p: ParameterConfig) -> None:
    for key in ("min", "max"):
        if getattr(p, key) is not None:
            r.add(_path(p, key), f"a {p.type} parameter takes a list of values, not {key}; remove {key} (or use "
                                 "type: double/integer for a range)")
    if not p.values:
        r.add(_path(p, "values"), f"a {p.type} parameter needs values: [...] with at least one value",
              at=_path(p, "type"))
        return
    if p.type == "categorical":
        if p.scale is not None:
            r.add(_path(p, "scale"), "a categorical parameter has no scale; remove scale")
        texts = [v for v in p.values if isinstance(v, str)]
        if len(texts) != len(p.values):
            r.add(_path(p, "values"), "categorical values are text; quote numbers ('32'), or use type: discrete "
                                      "for numbers")
        elif len(set(texts)) != len(texts):
            r.add(_path(p, "values"), "categorical values must differ; remove the repeated ones")
        return
    numbers = [v for v in p.values if not isinstance(v, str)]
    if len(numbers) != len(p.values):
        r.add(_path(p, "values"), "discrete values are numbers; use type: categorical for text values")
        return
    if len(numbers) > MAX_DISCRETE_VALUES:
        r.add(_path(p, "values"), f"at most {MAX_DISCRETE_VALUES} discrete values, got {len(numbers)}")
    if any(b - a < 1e-10 for a, b in zip(numbers, numbers[1:], strict=False)):
        r.add(_path(p, "values"), f"discrete values must be increasing and distinct (Vertex AI requires it); "
                                  f"write them as {sorted(set(numbers))}")
    if p.scale in ("log", "reverse_log") and min(numbers) <= 0:
        r.add(_path(p, "scale"), f"a {p.scale} scale needs values > 0; use scale: linear or positive values")


def _takes(p: ParameterConfig, value: Any) -> bool:
    """Whether `p` can take `value` (a default, or a child's parent value)."""
    if p.type == "categorical":
        return isinstance(value, str) and value in p.values
    if isinstance(value, str):
        return False
    if p.type in ("double", "integer"):
        whole = p.type == "double" or float(value).is_integer()
        return whole and p.min is not None and p.max is not None and p.min <= value <= p.max
    return any(abs(float(value) - float(v)) < 1e-10 for v in p.values if not isinstance(v, str))


def _allowed(p: ParameterConfig) -> str:
    if p.type in ("double", "integer"):
        return f"{'a whole number' if p.type == 'integer' else 'a number'} from {p.min} to {p.max}"
    return "one of " + ", ".join(map(str, p.values))


def _check_default(r: Rules, p: ParameterConfig) -> None:
    if p.default is not None and not _takes(p, p.default):
        r.add(_path(p, "default"), f"the default {p.default!r} is not a value of {p.name}; give {_allowed(p)}")


def _check_conditions(r: Rules, tuning: TuningConfig) -> None:
    """parent + parent_values: the parent exists, is countable, can take those values; no circle."""
    names = [p.name for p in tuning.parameters]
    by_name = {p.name: p for p in tuning.parameters}
    for p in tuning.parameters:
        if p.parent is None:
            if p.parent_values:
                r.add(_path(p, "parent_values"), "parent_values needs parent: the parameter whose values they are")
            continue
        parent = by_name.get(p.parent)
        if p.parent == p.name or parent is None:
            others = [n for n in names if n != p.name]
            listed = f" parameters: {', '.join(others)}" if others else " add the parent parameter"
            r.add(_path(p, "parent"), with_suggestion(f"'{p.parent}' is not another parameter of this study",
                                                      did_you_mean(p.parent, others) or listed))
            continue
        if parent.type == "double":
            r.add(_path(p, "parent"), f"{parent.name} is a double (a range): a parent must be integer, discrete or "
                                      "categorical, so a trial's value can match parent_values")
            continue
        if not p.parent_values:
            r.add(_path(p, "parent_values"), f"a conditional parameter needs parent_values: the values of "
                                             f"{parent.name} it is tuned under ({_allowed(parent)})",
                  at=_path(p, "parent"))
        for i, value in enumerate(p.parent_values):
            if not _takes(parent, value):
                r.add((*_path(p, "parent_values"), i), f"{value!r} is not a value of {parent.name}; give "
                                                       f"{_allowed(parent)}")
        seen: set[str] = {p.name}
        up: ParameterConfig | None = parent
        while up is not None and up.parent is not None:  # a circle of parents would nest forever
            if up.name in seen or up.parent in seen:
                r.add(_path(p, "parent"), f"parents go round in a circle ({' -> '.join([*seen, up.parent])}); "
                                          "one parameter must have no parent")
                break
            seen.add(up.name)
            up = by_name.get(up.parent)


def _grid_size(tuning: TuningConfig) -> int:
    """Distinct trials of the grid: a conditional parameter multiplies only its parent's values it is under."""
    children: dict[str, list[ParameterConfig]] = {}
    for p in tuning.parameters:
        if p.parent is not None:
            children.setdefault(p.parent, []).append(p)

    def size(p: ParameterConfig, depth: int = 0) -> int:
        own = len(p.values) if p.type != "integer" else int(p.max or 0) - int(p.min or 0) + 1
        below = children.get(p.name, [])
        if not below or depth > len(tuning.parameters):
            return own
        if own > MAX_GRID_POINTS:
            return own  # too big already: counting its values one by one is not worth it
        return sum(math.prod(size(c, depth + 1) for c in below if matches(p, value, c.parent_values))
                   for value in p.grid())

    return math.prod(size(p) for p in tuning.parameters if p.parent is None)


def check_tuning(r: Rules, config: JobConfig) -> None:
    tuning = config.tuning
    if tuning is None:
        return
    before = len(r.problems)
    seen: set[str] = set()
    for i, metric in enumerate(tuning.metrics):
        path = ("tuning", "metric", i, "name") if len(tuning.metrics) > 1 else ("tuning", "metric", "name")
        if not _METRIC_NAME.match(metric.name):
            r.add(path, f"metric name '{metric.name}' must be one word without spaces, as the trainer reports it "
                        "(e.g. accuracy, val_loss)")
        elif metric.name in seen:
            r.add(path, f"metric '{metric.name}' is listed twice; keep only one")
        seen.add(metric.name)
    if not tuning.parameters:
        r.add(("tuning", "parameters"), "needs at least one parameter, e.g. learning_rate: {type: double, "
                                        "min: 0.001, max: 0.1}")
    taken = {q.name for q in tuning.parameters}
    for p in tuning.parameters:
        if not _FLAG_NAME.match(p.name):
            fixed = re.sub(r"[^A-Za-z0-9_-]", "_", p.name).lstrip("_-0123456789")
            r.add(("tuning", "parameters", p.name), f"'{p.name}' is passed to the trainer as --{p.name}=VALUE, so it "
                                                    "must be a flag name (a letter, then letters, digits, _ or -)"
                                                    + try_fix(lambda n: bool(_FLAG_NAME.match(n)) and n not in taken,
                                                              fixed, "param"))
        if p.type in ("double", "integer"):
            _check_range(r, p)
        else:
            _check_values(r, p)
        _check_default(r, p)
    _check_conditions(r, tuning)
    if r.target == "local" and tuning.early_stopping in ("decay_curve", "convex"):
        r.warn(("tuning", "early_stopping"), f"`vtrain local` applies median early stopping only: with "
                                             f"{tuning.early_stopping}, every trial runs to its end here")

    if tuning.algorithm == "grid":
        for p in tuning.parameters:
            if not p.countable:
                r.add(_path(p, "type"), "grid search needs integer, discrete or categorical parameters; make it "
                                        "discrete with values: [...] or use algorithm: random")
        if all(p.countable for p in tuning.parameters) and len(r.problems) == before:
            size = _grid_size(tuning)
            if size > MAX_GRID_POINTS:
                r.add(("tuning", "parameters"), f"the grid has {size:,} points; at most {MAX_GRID_POINTS:,} make "
                                                "sense: use fewer values or algorithm: random")
            elif tuning.max_trials > size:
                r.warn(("tuning", "max_trials"), f"the grid has only {size} points: {size} trials will run, not "
                                                 f"{tuning.max_trials}; set max_trials: {size}")
    if tuning.parallel_trials > tuning.max_trials:
        r.add(("tuning", "parallel_trials"), f"must be at most max_trials ({tuning.max_trials}), got "
                                             f"{tuning.parallel_trials}")
    if tuning.max_failed_trials is not None and tuning.max_failed_trials > tuning.max_trials:
        r.add(("tuning", "max_failed_trials"), f"must be at most max_trials ({tuning.max_trials}), got "
                                               f"{tuning.max_failed_trials}")


__all__ = ["check_tuning"]
