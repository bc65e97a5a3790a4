"""The `tuning:` block as the job config holds it: what to optimise, over which parameters, how.

Built from schema-checked data by :func:`build_tuning`; the cross-field rules (ranges, grid
needs countable parameters, parallel ≤ max, ...) live in :mod:`vtrain.jobfile.rules.tuning`. Imports
nothing of vtrain, so :mod:`vtrain.jobfile.config` can hold it without a circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: StudySpec enum names for the job file's words.
GOALS = {"maximize": "MAXIMIZE", "minimize": "MINIMIZE"}
ALGORITHMS = {"default": "ALGORITHM_UNSPECIFIED", "random": "RANDOM_SEARCH", "grid": "GRID_SEARCH"}
SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse_log": "UNIT_REVERSE_LOG_SCALE"}
MEASUREMENTS = {"last": "LAST_MEASUREMENT", "best": "BEST_MEASUREMENT"}
#: StudySpec's automated stopping specs (a oneof), by the job file's word.
STOPPING = {"median": "medianAutomatedStoppingSpec", "decay_curve": "decayCurveStoppingSpec",
            "convex": "convexAutomatedStoppingSpec"}


@dataclass(frozen=True)
class MetricConfig:
    name: str
    goal: str  # maximize | minimize

    @property
    def maximize(self) -> bool:
        return self.goal == "maximize"


@dataclass(frozen=True)
class ParameterConfig:
    """One tunable flag. `min`/`max` for double and integer, `values` for discrete and categorical;
    the rules report any other combination, so builders may rely on it."""

    name: str
    type: str  # double | integer | discrete | categorical
    min: float | int | None = None
    max: float | int | None = None
    scale: str | None = None  # linear | log | reverse_log
    values: tuple[Any, ...] = ()
    default: Any = None  # the study's first guess (Vertex: the value spec's defaultValue)
    parent: str | None = None  # a conditional parameter: tuned only when `parent` takes one of parent_values
    parent_values: tuple[Any, ...] = ()

    @property
    def countable(self) -> bool:
        """Grid search can enumerate it (Vertex: integer, discrete and categorical only)."""
        return self.type != "double"

    def grid(self) -> list[Any]:
        """Every value of a countable parameter, in order."""
        if self.type == "integer":
            assert self.min is not None and self.max is not None
            return list(range(int(self.min), int(self.max) + 1))
        if self.type == "discrete":
            return sorted(float(v) for v in self.values)
        return [str(v) for v in self.values]


@dataclass(frozen=True)
class TuningConfig:
    metrics: tuple[MetricConfig, ...]
    parameters: tuple[ParameterConfig, ...]
    max_trials: int
    algorithm: str = "default"
    parallel_trials: int = 1
    max_failed_trials: int | None = None
    early_stopping: str = "none"
    measurement_selection: str = "last"

    @property
    def metric(self) -> MetricConfig:
        """The metric that ranks trials (the first one)."""
        return self.metrics[0]

    def parameter(self, name: str) -> ParameterConfig:
        return next(p for p in self.parameters if p.name == name)


def build_tuning(raw: Mapping[str, Any] | None) -> TuningConfig | None:
    if raw is None:
        return None
    metrics = tuple(MetricConfig(m["name"], m["goal"]) for m in raw["metric"])
    parameters = tuple(
        ParameterConfig(
            name=str(name),
            type=spec["type"],
            min=spec.get("min"),
            max=spec.get("max"),
            scale=spec.get("scale"),
            values=tuple(spec.get("values") or ()),
            default=spec.get("default"),
            parent=spec.get("parent"),
            parent_values=tuple(spec.get("parent_values") or ()),
        )
        for name, spec in raw["parameters"].items()
    )
    return TuningConfig(
        metrics=metrics,
        parameters=parameters,
        max_trials=raw["max_trials"],
        algorithm=raw.get("algorithm", "default"),
        parallel_trials=raw.get("parallel_trials", 1),
        max_failed_trials=raw.get("max_failed_trials"),
        early_stopping=raw.get("early_stopping", "none"),
        measurement_selection=raw.get("measurement_selection", "last"),
    )


__all__ = ["ALGORITHMS", "GOALS", "MEASUREMENTS", "SCALES", "STOPPING", "MetricConfig", "ParameterConfig",
           "TuningConfig", "build_tuning"]
