"""The advice for a job from its rehearsal: the profile's measurements, the user's flags over them, the
advisor's defaults under both, the range a derived step time implies, and the text and JSON of it.

:func:`advise_from_run` returns the ordinary :class:`~vtrain.estimate.report.Report` (so a run and
the same numbers typed by hand give the same advice, by construction) plus where each input came from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from vtrain.errors import EstimateError
from vtrain.estimate.costs import verdict_line
from vtrain.estimate.fromrun import UTILISATION_RANGE, Run, Source, measured_inputs, memory_check
from vtrain.estimate.jobs import exchanging_pools
from vtrain.estimate.memory import human_bytes, pool_device
from vtrain.estimate.report import Inputs, Report, advise

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig

#: The inputs a profile can fill, in the order the text shows them.
SOURCED = ("params", "grad_dtype", "optimizer", "precision", "activations", "step_compute_s")
_LABEL = {"params": "parameters", "grad_dtype": "gradient dtype", "optimizer": "optimizer", "precision": "precision",
          "activations": "activations", "step_compute_s": "step compute", "utilisation": "utilisation"}


@dataclass(frozen=True)
class RunAdvice:
    """A Report made from a run, each input's source, the fallbacks, and the utilisation range."""

    report: Report
    run: Run
    sources: dict[str, Source]
    lines: list[str]
    span: list[dict[str, Any]]  # the advice at each end of UTILISATION_RANGE (empty: step compute not derived)
    memory: dict[str, Any]

    @property
    def verdict_changes(self) -> bool | None:
        if not self.span:
            return None
        return len({(row["recommendation"], row["reducers_pay"]) for row in self.span}) > 1

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.report.to_dict(),
            "from_run": {
                "run": str(self.run.path),
                "job_id": self.run.job_id,
                "state": self.run.state,
                "replicas": sorted(self.run.profiles),
                "inputs": {name: {**s.to_dict(), "run": str(self.run.path) if s.source == "measured" else None}
                           for name, s in self.sources.items()},
                "warnings": self.lines,
                "utilisation_range": self.span,
                "verdict_changes_in_range": self.verdict_changes,
                "memory_check": self.memory,
            },
        }


def _seconds(value: float) -> str:
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"


def _value(name: str, value: Any) -> str:
    if value is None:
        return "not known"
    if name == "params":
        return f"{value:,}"
    if name == "activations":
        return human_bytes(value)
    if name == "step_compute_s":
        return _seconds(value)
    if name == "utilisation":
        return f"{value:.0%}"
    return str(value)


def advise_from_run(config: JobConfig, run: Run, given: dict[str, Any], defaults: Inputs, job: str = "",
                    utilisation: float | None = None) -> RunAdvice:
    """Advise `config` from `run`: `given` (flags the user typed) over measurements over `defaults`."""
    from vtrain.estimate.fromrun import DEFAULT_UTILISATION

    pools = exchanging_pools(config)
    if not pools:
        raise EstimateError("the job has no training pool to size")
    device = pool_device(pools[-1])  # the workers' device (the chief's when there are none)
    util = utilisation if utilisation is not None else DEFAULT_UTILISATION
    measured, lines = measured_inputs(run, device, util)
    sources: dict[str, Source] = {}
    for name in SOURCED:
        if given.get(name) is not None:
            was = measured.get(name)
            also = f"; the run measured {_value(name, was.value)}" if was is not None else ""
            sources[name] = Source(given[name], "given", f"the flag{also}")
        elif name in measured:
            sources[name] = measured[name]
        else:
            sources[name] = Source(getattr(defaults, name), "assumed", "the advisor's default")
    derived = sources["step_compute_s"].source == "measured" and "FLOPs" in sources["step_compute_s"].detail
    if derived:
        sources["utilisation"] = Source(util, "given" if utilisation is not None else "assumed",
                                        "of the target's peak FLOPs")
    if "params" not in measured and given.get("params") is None:
        raise EstimateError(f"{run.path}: the profile has no parameter count (the trainer attached no model: "
                            "runtime.profile(model, optimizer) or runtime.profile_callback); give --params")
    inputs = replace(defaults, **{name: sources[name].value for name in SOURCED})
    report = advise(config, inputs, job)
    span = []
    if derived:
        for u in UTILISATION_RANGE:
            seconds = sources["step_compute_s"].value * util / u
            other = advise(config, replace(inputs, step_compute_s=seconds), job)
            span.append({"utilisation": u, "step_compute_s": seconds, "recommendation": other.recommendation.kind,
                         "summary": other.recommendation.summary, "reducers_pay": other.est.speedup > 1,
                         "verdict": verdict_line(other.est, other.money)})
    need = report.memory
    return RunAdvice(report, run, sources, [*run.warnings, *lines], span, memory_check(run, need.state, need.total))


def format_from_run(advice: RunAdvice) -> str:
    """The inputs block that heads the text report: measured first, then given, then assumed."""
    run = advice.run
    state = (run.state or "no result").removeprefix("JOB_STATE_").lower()
    lines = [f"from run {run.path} ({run.job_id}, {state}; profiles: {', '.join(sorted(run.profiles))})"]
    order = {"measured": 0, "given": 1, "assumed": 2}
    for name, s in sorted(advice.sources.items(), key=lambda kv: order[kv[1].source]):
        lines.append(f"  {s.source:<9}{_LABEL[name]:<16}{_value(name, s.value):<14}{s.detail}")
    mem = advice.memory
    state, model = human_bytes(mem["measured_state_bytes"]), human_bytes(mem["model_state_bytes"])
    lines.append(f"  memory   training state {state} in the variables vs {model} by the advisor's model")
    if mem.get("peak_bytes"):
        where = "the device's peak" if mem["peak_kind"] == "device" else "peak RSS"
        attached = mem.get("baseline_bytes")
        base = f", {human_bytes(attached)} when the model was attached" if attached else ""
        lines.append(f"  memory   {where} {human_bytes(mem['peak_bytes'])}{base}")
        if mem.get("training_ratio") is not None:
            lines.append(f"  memory   training took {human_bytes(mem['training_bytes'])} with the weights, "
                         f"{mem['training_ratio']:.2f}× the {human_bytes(mem['model_total_bytes'])} the model predicts "
                         "(state + activations)")
    for row in advice.span:
        lines.append(f"  at {row['utilisation']:.0%} utilisation: step compute {_seconds(row['step_compute_s'])} → "
                     f"{row['recommendation']}")
    if advice.verdict_changes is not None:
        lo, hi = UTILISATION_RANGE
        lines.append(f"  the recommendation {'changes' if advice.verdict_changes else 'does not change'} "
                     f"between {lo:.0%} and {hi:.0%} utilisation")
    lines += [f"warning: {line}" for line in advice.lines]
    return "\n".join(lines)


__all__ = ["SOURCED", "RunAdvice", "advise_from_run", "format_from_run"]
