"""Money per 1,000 steps (only from prices the user supplied) and what low-communication
training (DiLoCo) would need of the network."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from vtrain.estimate.network import (
    DEFAULT_INNER_STEPS,
    STEPS_PER_REPORT,
    TARGET_UTILISATION,
    Estimate,
    _bytes_per_s,
)


@dataclass(frozen=True)
class Costs:
    """Money per 1,000 steps, only ever from prices the user supplied."""

    worker_price_per_hour: float  # all of pools 0+1 together
    reducer_price_per_hour: float  # one reducer
    ring_per_1000_steps: float
    reduction_server_per_1000_steps: float
    reducers_cheaper: bool
    break_even_reducer_price: float | None  # $/h per reducer at which both cost the same
    #: Reducers stay cheaper while a step computes less than this; 0: never; None: always.
    break_even_step_compute_s: float | None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def costs(est: Estimate, worker_price_per_hour: float, reducer_price_per_hour: float) -> Costs:
    w, p, m = worker_price_per_hour, reducer_price_per_hour, est.reduction_server.reducers
    t_ring, t_rs = est.ring.step_seconds, est.reduction_server.step_seconds
    ring_cost = w * STEPS_PER_REPORT * t_ring / 3600
    rs_cost = (w + m * p) * STEPS_PER_REPORT * t_rs / 3600
    extra = m * p
    if est.workers < 2:
        price, break_compute = None, None
    else:
        price = max(0.0, (est.speedup - 1) * w / m)
        comm_ring, comm_rs = est.ring.comm_seconds, est.reduction_server.comm_seconds
        # W·(c + t_ring) = (W + m·p)·(c + t_rs), solved for c.
        break_compute = None if extra == 0 else max(0.0, (w * comm_ring - (w + extra) * comm_rs) / extra)
    return Costs(
        worker_price_per_hour=w,
        reducer_price_per_hour=p,
        ring_per_1000_steps=ring_cost,
        reduction_server_per_1000_steps=rs_cost,
        reducers_cheaper=rs_cost < ring_cost,
        break_even_reducer_price=price,
        break_even_step_compute_s=break_compute,
    )


# --------------------------------------------------------------------------- DiLoCo


@dataclass(frozen=True)
class LowComm:
    """Bandwidth one worker needs to keep compute ≥ 90 % busy, syncing S every H steps."""

    name: str
    inner_steps: int
    bytes_per_step: float
    needed_gbps: float | None  # None without a step compute time
    utilisation: float | None  # at the worker's NIC, None without a step compute time
    min_step_compute_s: float  # compute per step that keeps 90 % busy at the worker's NIC

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def low_communication(
    grad_bytes: float,
    worker_gbps: float,
    step_compute_s: float | None,
    inner_steps: tuple[int, ...] = DEFAULT_INNER_STEPS,
    target: float = TARGET_UTILISATION,
) -> list[LowComm]:
    """Sync data-parallel (S per step) against DiLoCo (S per H inner steps).

    Uses the least any all-reduce must move, S per worker, so these are the
    most generous bandwidth needs; a ring moves up to twice that.
    """
    ratio = target / (1 - target)
    rows = []
    for h in (1, *inner_steps):
        per_step = grad_bytes / h
        wire = per_step / _bytes_per_s(worker_gbps)
        needed = util = None
        if step_compute_s:
            needed = ratio * per_step * 8 / step_compute_s / 1e9
            util = step_compute_s / (step_compute_s + wire)
        elif step_compute_s == 0:
            util = 0.0
        rows.append(
            LowComm(
                name="sync data-parallel" if h == 1 else f"DiLoCo H={h}",
                inner_steps=h,
                bytes_per_step=per_step,
                needed_gbps=needed,
                utilisation=util,
                min_step_compute_s=ratio * wire,
            )
        )
    return rows


def human_seconds(s: float | None) -> str:
    """12.5 ms, 3.20 s, '-' for unknown."""
    if s is None:
        return "-"
    if s == 0:
        return "0 s"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def verdict_line(est: Estimate, money: Costs | None) -> str:
    """Whether reducers pay in time and in cost, and where they stop paying."""
    if est.workers < 2:
        return "verdict: one replica exchanges no gradients over the network; reducers cannot help."
    rs = est.reduction_server
    if est.speedup > 1:
        time = f"reducers pay in time: {est.speedup:.2f}× the steps/sec of the ring"
    else:
        time = f"reducers do not pay in time ({est.speedup:.2f}× the ring)"
        if rs.reducer_bound and est.min_reducers_to_beat_ring is not None:
            time += f": {rs.reducers} are too few, {est.min_reducers_to_beat_ring} would beat the ring"
    if money is None:
        if est.speedup <= 1:
            return f"verdict: {time}; so not in cost either."
        return (
            f"verdict: {time}; in cost while one reducer-hour costs less than "
            f"{est.break_even_worker_hours:.3g} worker-VM-hours (give --prices for money)."
        )
    ring_cost, rs_cost = money.ring_per_1000_steps, money.reduction_server_per_1000_steps
    cost = f"in cost {'too' if money.reducers_cheaper else 'not'} (${rs_cost:.2f} vs ${ring_cost:.2f} per 1,000 steps)"
    if money.break_even_reducer_price:
        cost += f"; they stop paying above ${money.break_even_reducer_price:.2f} per reducer-hour"
    if money.break_even_step_compute_s:
        cost += f" or once a step computes more than {human_seconds(money.break_even_step_compute_s)}"
    return f"verdict: {time}; {cost}."
