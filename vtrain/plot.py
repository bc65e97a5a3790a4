"""Optional plots (`pip install 'vtrain[plot]'`): matplotlib is imported only here, only when asked."""

from __future__ import annotations

from vtrain.errors import PlotError
from vtrain.estimate import Estimate, estimate, recommended_reducers

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


def plot_scaling(est: Estimate, path: str) -> None:
    """Write a PNG of predicted steps/sec against the number of workers (1…2n)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install 'vtrain[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, points in scaling_curves(est).items():
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", markersize=3, label=label)
    ax.axvline(est.workers, color="grey", linestyle=":", label=f"this job ({est.workers} workers)")
    compute = "communication-bound" if est.step_compute_s is None else f"{est.step_compute_s:g} s compute/step"
    ax.set_title(f"Predicted steps/sec, {est.gradient_bytes / 1e9:.3g} GB gradients, {compute}")
    ax.set_xlabel("worker replicas (chief + workers)")
    ax.set_ylabel("steps / sec")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as err:
        raise PlotError(f"--plot: cannot write {path}: {err.strerror or err}") from None
    finally:
        plt.close(fig)
