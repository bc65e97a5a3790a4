"""Optional plots (`pip install 'vtrain[plot]'`): matplotlib is imported only here, only when asked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtrain.errors import EstimateError, PlotError
from vtrain.estimate import Estimate, estimate, recommended_reducers

if TYPE_CHECKING:
    from vtrain.estimate import Report

#: Points per curve: a figure 7 inches wide shows no more, and 10⁸ workers must not mean 2·10⁸ estimates.
MAX_POINTS = 200


def worker_counts(workers: int, points: int = MAX_POINTS) -> list[int]:
    """1…2n workers: every count when there are few, else `points` evenly spread, n always among them."""
    top = 2 * workers
    if top <= points:
        return list(range(1, top + 1))
    return sorted({1 + (top - 1) * i // (points - 1) for i in range(points)} | {workers})


def scaling_curves(est: Estimate) -> dict[str, list[tuple[int, float]]]:
    """Steps/sec for 1…2n workers (sampled: :func:`worker_counts`): ring, the job's reducer count, and
    reducers sized by the rule.

    Each worker keeps the estimate's NIC and GPUs; one replica with no compute
    time given has no finite rate and is left out.
    """
    m = est.reduction_server.reducers
    ring, fixed, sized = "ring all-reduce", f"reduction server, {m} reducers", "reduction server, sized by the rule"
    curves: dict[str, list[tuple[int, float]]] = {ring: [], fixed: [], sized: []}
    for n in worker_counts(est.workers):
        rule = recommended_reducers(n * est.worker_gbps, est.reducer_gbps)
        at_m, at_rule = (
            estimate(n, est.worker_gbps, k, est.reducer_gbps, est.gradient_bytes, est.step_compute_s,
                     est.alpha_s, est.gpus_per_worker)
            for k in (m, rule)
        )  # fmt: skip
        for label, exchange in ((ring, at_m.ring), (fixed, at_m.reduction_server), (sized, at_rule.reduction_server)):
            if exchange.steps_per_sec is not None:
                curves[label].append((n, exchange.steps_per_sec))
    return curves


def memory_bars(report: Report) -> dict[str, dict[str, float]]:
    """Bytes per replica by part, for each precision: what the memory panel stacks."""
    bars: dict[str, dict[str, float]] = {}
    advice = report.precision[0] if report.precision else None
    for precision in ("fp32", "mixed_bf16", "mixed_fp16"):
        from vtrain.estimate import memory_need

        acts = advice.activation_bytes[precision] if advice is not None else report.memory.activations
        need = memory_need(report.inputs.params, report.inputs.optimizer, precision, acts)
        bars[precision] = {
            "weights": need.weights,
            "16-bit copies": need.half_copies,
            "gradients": need.gradients,
            "optimizer": need.optimizer_slots,
            "activations": need.activations or 0.0,
        }
    return bars


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("plotting needs matplotlib: pip install 'vtrain[plot]'") from None
    return plt


def _scaling_axes(ax: Any, est: Estimate) -> None:
    for label, points in scaling_curves(est).items():
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", markersize=3, label=label)
    ax.axvline(est.workers, color="grey", linestyle=":", label=f"this job ({est.workers} workers)")
    compute = "communication-bound" if est.step_compute_s is None else f"{est.step_compute_s:g} s compute/step"
    ax.set_title(f"Predicted steps/sec, {est.gradient_bytes / 1e9:.3g} GB gradients, {compute}", fontsize="medium")
    ax.set_xlabel("worker replicas (chief + workers)")
    ax.set_ylabel("steps / sec")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")


def _memory_axes(ax: Any, report: Report) -> None:
    bars = memory_bars(report)
    names = list(bars)
    bottoms = [0.0] * len(names)
    for part in ("weights", "16-bit copies", "gradients", "optimizer", "activations"):
        heights = [bars[name][part] / 1e9 for name in names]
        ax.bar(names, heights, bottom=bottoms, label=part)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    for f in report.fits:
        if f.device.memory_bytes:
            ax.axhline(f.device.memory_bytes / 1e9, linestyle="--", color="black", linewidth=1)
            label = f" {f.device.name} {f.device.memory_bytes / 1e9:.0f} GB"
            ax.text(-0.4, f.device.memory_bytes / 1e9, label, va="bottom", fontsize="small")
    ax.set_title(f"Memory per replica, {report.inputs.params / 1e6:.4g}M params, {report.inputs.optimizer}",
                 fontsize="medium")  # fmt: skip
    ax.set_ylabel("GB")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")


#: What --plot writes, by the file's suffix (none: PNG); the path is written as given, nothing appended.
FORMATS = ("png", "svg", "pdf")


def plot_format(path: str) -> str:
    """The format for `path`, or PlotError for a suffix no plot is written as (x.txt)."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    if suffix not in FORMATS:
        raise EstimateError(f"--plot {path}: a plot is written as PNG, SVG or PDF; name the file .png, .svg or .pdf")
    return suffix


def _save(fig: Any, plt: Any, path: str) -> None:
    try:
        fig.savefig(path, format=plot_format(path), dpi=120, bbox_inches="tight")
    except OSError as err:
        raise PlotError(f"cannot write the plot to {path}: {err.strerror or err}") from None
    finally:
        plt.close(fig)


def plot_report(report: Report, path: str) -> None:
    """Write a PNG: predicted steps/sec against workers (1…2n), and memory per replica by precision
    against each pool's device memory, with the recommendation as the figure's title."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    _scaling_axes(left, report.est)
    _memory_axes(right, report)
    fig.suptitle(f"recommendation: {report.recommendation.summary}", fontsize="large")
    _save(fig, plt, path)


def plot_scaling(est: Estimate, path: str) -> None:
    """Write a PNG of predicted steps/sec against the number of workers (1…2n)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _scaling_axes(ax, est)
    _save(fig, plt, path)
