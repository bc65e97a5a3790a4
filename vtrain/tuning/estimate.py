"""A study's cost in the units `vtrain estimate` reports per trial: every number × trials, time × waves.

A tuning job runs `max_trials` copies of the trial job, `parallel_trials` at a time, so its
machine-hours (and money) are a trial's times `max_trials`, and its wall time a trial's times
the number of waves, ⌈max_trials / parallel_trials⌉ (early stopping and failures only lower
both). Kept apart from :mod:`vtrain.estimate` so the per-trial model can change freely: it
takes the per-1,000-step numbers of the exchange the job would use and scales them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from vtrain.tuning.config import TuningConfig


@dataclass(frozen=True)
class StudyScale:
    trials: int
    parallel: int
    waves: int  # ⌈trials / parallel⌉: how many trial durations the study lasts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def study_scale(tuning: TuningConfig) -> StudyScale:
    parallel = max(1, min(tuning.parallel_trials, tuning.max_trials))
    return StudyScale(tuning.max_trials, parallel, math.ceil(tuning.max_trials / parallel))


def study_estimate(tuning: TuningConfig, exchange: Any, cost_per_1000_steps: float | None = None) -> dict[str, Any]:
    """Per 1,000 steps of every trial: the study's wall time, VM-, GPU- and reducer-hours (and money).

    `exchange` is the :class:`vtrain.estimate.Exchange` the trial job would use (ring or reducers).
    """
    scale = study_scale(tuning)
    steps = exchange.steps_per_sec
    out: dict[str, Any] = {
        **scale.to_dict(),
        "method": exchange.method,
        "wall_seconds_per_1000_steps": None if not steps else scale.waves * 1000 / steps,
        "worker_hours_per_1000_steps": scale.trials * exchange.worker_hours,
        "gpu_hours_per_1000_steps": scale.trials * exchange.gpu_hours,
        "reducer_hours_per_1000_steps": scale.trials * getattr(exchange, "reducer_hours", 0.0),
        "cost_per_1000_steps": None if cost_per_1000_steps is None else scale.trials * cost_per_1000_steps,
    }
    return out


def study_lines(result: dict[str, Any]) -> list[str]:
    """The text `vtrain estimate` prints under its per-trial table."""
    wall = result["wall_seconds_per_1000_steps"]
    lines = [
        f"tuning: {result['trials']} trials, {result['parallel']} at a time ({result['waves']} waves), "
        f"{result['method']}; per 1,000 steps of every trial:",
        f"  wall time {'-' if wall is None else f'{wall / 3600:.3g} h'}, "
        f"{result['worker_hours_per_1000_steps']:.3f} VM-hours, {result['gpu_hours_per_1000_steps']:.3f} GPU-hours"
        + (f", {result['reducer_hours_per_1000_steps']:.3f} reducer-hours"
           if result["reducer_hours_per_1000_steps"] else ""),
    ]
    if result["cost_per_1000_steps"] is not None:
        lines.append(f"  cost ${result['cost_per_1000_steps']:.2f} (early stopping and failed trials cost less)")
    return lines


__all__ = ["StudyScale", "study_estimate", "study_lines", "study_scale"]
