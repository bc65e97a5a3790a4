"""Where the next trial goes: grid, seeded random and (with optuna) TPE; and when a trial stops early.

Vertex AI runs its own search service; `vtrain local` and the emulator need one here:

- ``grid``: every combination of the parameters' values (integer ranges, discrete and
  categorical lists), in the order the job file lists them, the last parameter varying fastest.
- ``random``: each value drawn uniformly on its scale (log: uniform in log space; reverse_log:
  dense near the maximum), from a ``random.Random(seed)``: one seed, one sequence of trials.
- ``default`` (Vertex's Bayesian optimisation, Vizier): approximated by optuna's TPE sampler,
  seeded the same way, when optuna is installed; otherwise random search. Either way the caller
  is told (:attr:`Searcher.notice`): local results of ``default`` only approximate Vertex's.

Conditional parameters (`parent` + `parent_values`) are drawn with the others and then dropped from a
trial whose parent took another value (:func:`active`), as Vertex passes only the active ones; a grid
point that differs only in dropped values is run once.

The median rule (:func:`should_stop_median`) is Vertex's ``medianAutomatedStoppingSpec``: a
trial stops when its best value so far is worse than the median of the completed trials'
running averages up to the same step.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import random
import statistics
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from vtrain.tuning.config import ParameterConfig, TuningConfig

Params = dict[str, Any]
#: Completed trials the median rule needs before it stops anyone.
MEDIAN_MIN_COMPLETED = 2


def flag_value(p: ParameterConfig, value: Any) -> str:
    """The text a trial receives in `--NAME=VALUE`: integers plainly, whole discrete values
    without `.0` (so `type=int` flags accept them), doubles in full precision."""
    if p.type == "categorical":
        return str(value)
    if p.type == "integer" or (isinstance(value, float) and value.is_integer()):
        return str(int(value))
    return repr(float(value))


def trial_args(tuning: TuningConfig, params: Mapping[str, Any]) -> list[str]:
    return [f"--{p.name}={flag_value(p, params[p.name])}" for p in tuning.parameters if p.name in params]


def _draw(p: ParameterConfig, rng: random.Random) -> Any:
    if p.type in ("discrete", "categorical"):
        return rng.choice(p.grid())
    low, high = float(p.min or 0), float(p.max or 0)
    if p.type == "integer":
        low, high = low - 0.5, high + 0.5  # each whole number gets its share of the range
    if p.scale == "log" and low > 0:
        x = math.exp(rng.uniform(math.log(low), math.log(high)))
    elif p.scale == "reverse_log" and low > 0:
        x = low + high - math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        x = rng.uniform(low, high)
    if p.type == "integer":
        return min(max(round(x), int(p.min or 0)), int(p.max or 0))
    return min(max(x, low), high)


class Searcher:
    """Suggests the parameters of the next trial and learns each trial's outcome."""

    notice: str | None = None

    def suggest(self) -> Params | None:
        """The next trial's values, or None when the search space is exhausted (grid)."""
        raise NotImplementedError

    def tell(self, params: Params, value: float | None) -> None:
        """The final metric of a trial (None: it failed or reported nothing)."""


class GridSearch(Searcher):
    def __init__(self, tuning: TuningConfig) -> None:
        names = [p.name for p in tuning.parameters]
        self._points: Iterator[tuple[Any, ...]] = itertools.product(*(p.grid() for p in tuning.parameters))
        self._names = names

    def suggest(self) -> Params | None:
        point = next(self._points, None)
        return None if point is None else dict(zip(self._names, point, strict=True))


class RandomSearch(Searcher):
    def __init__(self, tuning: TuningConfig, seed: int) -> None:
        self._tuning = tuning
        self._rng = random.Random(seed)

    def suggest(self) -> Params | None:
        return {p.name: _draw(p, self._rng) for p in self._tuning.parameters}


class TpeSearch(Searcher):
    """optuna's TPE sampler through its ask-and-tell interface (in memory, nothing written)."""

    def __init__(self, tuning: TuningConfig, seed: int) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        direction: Literal["maximize", "minimize"] = "maximize" if tuning.metric.maximize else "minimize"
        self._study = optuna.create_study(direction=direction, sampler=optuna.samplers.TPESampler(seed=seed))
        self._dists = {p.name: self._distribution(p) for p in tuning.parameters}
        self._asked: dict[int, Any] = {}
        self.notice = (f"algorithm default (Vertex's Bayesian optimisation) runs here as optuna {optuna.__version__}'s "
                       "TPE sampler: an approximation, not Vertex's Vizier")

    def _distribution(self, p: ParameterConfig) -> Any:
        d = self._optuna.distributions
        if p.type == "double":
            return d.FloatDistribution(float(p.min or 0), float(p.max or 0), log=p.scale == "log")
        if p.type == "integer":
            return d.IntDistribution(int(p.min or 0), int(p.max or 0), log=p.scale == "log")
        return d.CategoricalDistribution(p.grid())

    def suggest(self) -> Params | None:
        trial = self._study.ask(self._dists)
        params = dict(trial.params)
        self._asked[id(params)] = trial
        return params

    def tell(self, params: Params, value: float | None) -> None:
        trial = self._asked.pop(id(params), None)
        if trial is None:
            return
        if value is None or not math.isfinite(value):
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        else:
            self._study.tell(trial, value)


def optuna_available() -> bool:
    return importlib.util.find_spec("optuna") is not None


def matches(parent: ParameterConfig, value: Any, wanted: Sequence[Any]) -> bool:
    """Whether `parent` taking `value` is one of a child's `parent_values`."""
    if parent.type == "categorical":
        return str(value) in {str(v) for v in wanted}
    return any(not isinstance(v, str) and abs(float(value) - float(v)) < 1e-9 for v in wanted)


def active(tuning: TuningConfig, params: Mapping[str, Any]) -> Params:
    """`params` without the conditional parameters whose parent is absent or took another value."""
    by_name = {p.name: p for p in tuning.parameters}
    kept: Params = {}

    def on(p: ParameterConfig, depth: int = 0) -> bool:
        if p.parent is None:
            return True
        parent = by_name.get(p.parent)
        if parent is None or parent.name not in params or depth > len(by_name):  # (a circle: validate refuses it)
            return False
        return on(parent, depth + 1) and matches(parent, params[parent.name], p.parent_values)

    for name, value in params.items():
        p = by_name.get(name)
        if p is not None and on(p):
            kept[name] = value
    return kept


class ConditionalSearch(Searcher):
    """Any searcher with the conditional parameters of each suggestion dropped where they do not apply."""

    def __init__(self, inner: Searcher, tuning: TuningConfig) -> None:
        self._inner, self._tuning = inner, tuning
        self.notice = inner.notice
        self._drawn: dict[int, Params] = {}
        self._seen: set[tuple[tuple[str, str], ...]] = set()

    def suggest(self) -> Params | None:
        while True:
            drawn = self._inner.suggest()
            if drawn is None:
                return None
            params = active(self._tuning, drawn)
            key = tuple(sorted((k, repr(v)) for k, v in params.items()))
            if isinstance(self._inner, GridSearch) and key in self._seen:
                continue  # the same trial as one already run: only dropped values differ
            self._seen.add(key)
            self._drawn[id(params)] = drawn
            return params

    def tell(self, params: Params, value: float | None) -> None:
        self._inner.tell(self._drawn.pop(id(params), params), value)


def make_searcher(tuning: TuningConfig, seed: int = 0) -> Searcher:
    """The searcher for the job's algorithm (see the module docstring for `default`)."""
    searcher: Searcher
    if tuning.algorithm == "grid":
        searcher = GridSearch(tuning)
    elif tuning.algorithm == "default" and optuna_available():
        searcher = TpeSearch(tuning, seed)
    else:
        searcher = RandomSearch(tuning, seed)
        if tuning.algorithm == "default":
            searcher.notice = ("algorithm default (Vertex's Bayesian optimisation) runs here as random search: "
                               "install optuna (pip install 'vtrain[tune]') for a TPE approximation")
    if any(p.parent is not None for p in tuning.parameters):
        return ConditionalSearch(searcher, tuning)
    return searcher


def running_average(reports: Sequence[tuple[int, float]], step: int) -> float | None:
    values = [v for s, v in reports if s <= step]
    return sum(values) / len(values) if values else None


def should_stop_median(reports: Sequence[tuple[int, float]], completed: Sequence[Sequence[tuple[int, float]]],
                       maximize: bool) -> bool:
    """Vertex's median rule for a running trial's (step, value) reports against completed trials'."""
    if not reports or len(completed) < MEDIAN_MIN_COMPLETED:
        return False
    step = max(s for s, _ in reports)
    best = max(v for _, v in reports) if maximize else min(v for _, v in reports)
    averages = [a for a in (running_average(c, step) for c in completed) if a is not None]
    if len(averages) < MEDIAN_MIN_COMPLETED:
        return False
    median = statistics.median(averages)
    return best < median if maximize else best > median


def best_index(values: Sequence[float | None], maximize: bool) -> int | None:
    """Index of the best final value (the first of equals); None when no trial has one."""
    scored = [(v, i) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if not scored:
        return None
    if maximize:
        return max(scored, key=lambda vi: (vi[0], -vi[1]))[1]
    return min(scored)[1]


__all__ = [
    "GridSearch",
    "ConditionalSearch",
    "RandomSearch",
    "Searcher",
    "TpeSearch",
    "active",
    "best_index",
    "flag_value",
    "make_searcher",
    "matches",
    "optuna_available",
    "should_stop_median",
    "trial_args",
]
