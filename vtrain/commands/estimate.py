"""`vtrain estimate`: would a Reduction Server speed this job up, and would it pay?

The math lives in :mod:`vtrain.estimate`; this module reads the job file and
the optional price file, and prints. Money appears only from a price file the
user wrote: vtrain never ships or guesses prices.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from vtrain.commands._options import echo_json, output_option, set_option

if TYPE_CHECKING:
    from vtrain.config import JobConfig
    from vtrain.estimate import Costs, Estimate, JobCluster, LowComm


@click.command()
@click.argument("job_file", metavar="JOB.yaml", type=click.Path(dir_okay=False))
@click.option("--params", required=True, metavar="N", help="Model parameters: 340M, 1.3B, 7e9, 125000000.")
@click.option(
    "--grad-dtype",
    type=click.Choice(["fp32", "bf16", "fp16"]),
    default="fp32",
    show_default=True,
    help="Dtype of the gradients exchanged.",
)
@click.option(
    "--step-compute",
    metavar="DURATION",
    help="Compute time of one step (0.4s, 400ms). Without it: the communication-bound ceiling.",
)
@click.option(
    "--reducers",
    type=int,
    help="Reducers to compare. Default: the job's reduction_server replicas, else the sizing rule.",
)
@click.option(
    "--reducer-machine",
    metavar="TYPE",
    help="Reducer machine type. Default: the job's, else n1-highcpu-16.",
)
@click.option("--alpha", default="30us", show_default=True, metavar="DURATION", help="Latency per hop.")
@click.option(
    "--inner-steps",
    "inner_steps",
    type=int,
    multiple=True,
    metavar="H",
    help="DiLoCo inner steps to compare (repeatable). Default: 10, 100, 500.",
)
@click.option(
    "--prices",
    type=click.Path(dir_okay=False),
    help="YAML of $/hour per machine type and accelerator (see examples/prices.example.yaml).",
)
@click.option("--plot", type=click.Path(dir_okay=False), help="Draw steps/sec against workers to this PNG.")
@set_option
@output_option("text", "json")
def estimate(
    job_file: str,
    params: str,
    grad_dtype: str,
    step_compute: str | None,
    reducers: int | None,
    reducer_machine: str | None,
    alpha: str,
    inner_steps: tuple[int, ...],
    prices: str | None,
    plot: str | None,
    overrides: tuple[str, ...],
    output: str,
) -> None:
    """Predict steps/sec with ring all-reduce vs a Reduction Server, and size the reducers.

    An α–β model per step: ring 2(N−1)α + 2(N−1)/N·S/B over all N GPUs;
    reducers 2α + max(S/B, n·S/(m·B_r)), with each VM's NIC bandwidth from the
    catalog. Also what low-communication training (DiLoCo) would need.
    """
    from vtrain import estimate as model
    from vtrain.jobfile import load_config

    n_params = model.parse_params(params)
    compute = model.parse_seconds(step_compute) if step_compute is not None else None
    alpha_s = model.parse_seconds(alpha, "--alpha")
    if any(h < 1 for h in inner_steps):
        raise model.EstimateError(f"--inner-steps must be at least 1, got {min(inner_steps)}")
    config = load_config(job_file, overrides, target="local")  # staging is irrelevant here
    cluster = model.job_cluster(config, reducer_machine)
    grad = model.gradient_bytes(n_params, grad_dtype)
    rule = model.recommended_reducers(cluster.sizing_gbps, cluster.reducer_gbps)
    m = reducers if reducers is not None else cluster.job_reducers or rule
    est = model.estimate(
        cluster.workers,
        cluster.worker_gbps,
        m,
        cluster.reducer_gbps,
        grad,
        compute,
        alpha_s,
        cluster.gpus_per_worker,
        cluster.sizing_gbps,
    )
    low = model.low_communication(grad, cluster.worker_gbps, compute, inner_steps or model.DEFAULT_INNER_STEPS)
    money = None
    if prices is not None:
        worker_price, reducer_price = cluster_prices(load_prices(prices), config, cluster.reducer_machine)
        money = model.costs(est, worker_price, reducer_price)
    verdict = verdict_line(est, money)
    caveats = notes(config, cluster)
    study = _study(config, est, money)
    if plot is not None:
        from vtrain.plot import plot_scaling

        plot_scaling(est, plot)
    if output == "json":
        echo_json(
            {
                "job": job_file,
                "params": n_params,
                "grad_dtype": grad_dtype,
                "cluster": cluster.to_dict(),
                **est.to_dict(),
                "low_communication": [row.to_dict() for row in low],
                "costs": money.to_dict() if money else None,
                "verdict": verdict,
                "notes": caveats,
                "tuning": study,
            }
        )
        return
    click.echo(format_text(job_file, config, cluster, n_params, grad_dtype, est, low, money, verdict))
    if study is not None:
        from vtrain.tuning.estimate import study_lines

        for line in study_lines(study):
            click.echo(line)
    for note in caveats:
        click.echo(f"note: {note}")
    if plot is not None:
        click.echo(f"plot: {plot}")


def _study(config: JobConfig, est: Estimate, money: Costs | None) -> dict[str, Any] | None:
    """A tuning job: the trial's numbers for the exchange it would use, × trials and waves."""
    if config.tuning is None:
        return None
    from vtrain.tuning.estimate import study_estimate

    reducers = config.reduction_server is not None
    exchange = est.reduction_server if reducers else est.ring
    cost = None if money is None else (money.reduction_server_per_1000_steps if reducers else money.ring_per_1000_steps)
    return study_estimate(config.tuning, exchange, cost)


def notes(config: JobConfig, cluster: JobCluster) -> list[str]:
    """Where the comparison is hypothetical for this job, and why."""
    from vtrain.catalog import is_tpu_machine

    out = []
    if config.parameter_servers is not None and config.parameter_servers.replicas != 0:
        out.append("this job uses parameter servers, not all-reduce: the numbers show what switching would give")
    if cluster.workers > 1 and cluster.gpus_per_worker == 0:
        if any(is_tpu_machine(machine) for machine in cluster.machines):
            out.append("TPUs exchange gradients over their own interconnect; Reduction Server is for GPU workers")
        else:
            out.append("Vertex's Reduction Server needs GPU workers using NCCL all-reduce; this is hypothetical")
    return out


# --------------------------------------------------------------------------- prices


def load_prices(path: str) -> dict[str, dict[str, float]]:
    """Read `machines:` and `accelerators:` ($/hour) from a user's price file."""
    import yaml

    from vtrain.catalog import normalize_accelerator
    from vtrain.estimate import EstimateError

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EstimateError(f"--prices: file not found: {path}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise EstimateError(f"--prices: cannot read {path}: {' '.join(str(err).split())}") from None
    if not isinstance(data, dict):
        raise EstimateError(f"--prices: {path} must be a mapping with machines: and accelerators:")
    unknown = sorted(set(data) - {"currency", "machines", "accelerators"})
    if unknown:
        raise EstimateError(f"--prices: {path}: unknown key {unknown[0]!r} (allowed: machines, accelerators)")
    out: dict[str, dict[str, float]] = {}
    for section in ("machines", "accelerators"):
        table = data.get(section) or {}
        if not isinstance(table, dict):
            raise EstimateError(f"--prices: {path}: {section} must map names to $/hour")
        out[section] = {}
        for name, price in table.items():
            if price is None:
                continue  # left blank in the example: not a price
            if isinstance(price, bool) or not isinstance(price, int | float) or price < 0:
                raise EstimateError(f"--prices: {path}: {section}.{name} must be a number ≥ 0, got {price!r}")
            key = (normalize_accelerator(str(name)) or str(name)) if section == "accelerators" else str(name)
            out[section][key] = float(price)
    return out


def cluster_prices(prices: dict[str, dict[str, float]], config: JobConfig, reducer_machine: str) -> tuple[float, float]:
    """($/h of all of pools 0+1, $/h of one reducer); every price must be in the file."""
    from vtrain.estimate import EstimateError

    machines, accelerators = prices["machines"], prices["accelerators"]
    missing: list[str] = []
    total = 0.0
    for pool in (config.chief, config.workers):
        if pool is None or int(pool.replicas) == 0:
            continue
        per_replica = machines.get(pool.machine_type)
        if per_replica is None:
            missing.append(f"machines.{pool.machine_type}")
            per_replica = 0.0
        if pool.accelerator and pool.accelerator_count:
            acc = accelerators.get(pool.accelerator)
            if acc is None:
                missing.append(f"accelerators.{pool.accelerator}")
                acc = 0.0
            per_replica += acc * pool.accelerator_count
        total += per_replica * int(pool.replicas)
    if reducer_machine not in machines:
        missing.append(f"machines.{reducer_machine}")
    if missing:
        needed = ", ".join(dict.fromkeys(missing))
        raise EstimateError(f"--prices: no price for {needed}; vtrain never guesses prices, add them")
    return total, machines[reducer_machine]


# --------------------------------------------------------------------------- text


def _bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _secs(s: float | None) -> str:
    if s is None:
        return "-"
    if s == 0:
        return "0 s"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _count(n: int) -> str:
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:.4g}{unit}"
    return str(n)


def _rate(x: float | None) -> str:
    return "unbounded" if x is None else f"{x:.2f}"


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
        cost += f" or once a step computes more than {_secs(money.break_even_step_compute_s)}"
    return f"verdict: {time}; {cost}."


def format_text(
    job_file: str,
    config: JobConfig,
    cluster: JobCluster,
    params: int,
    dtype: str,
    est: Estimate,
    low: list[LowComm],
    money: Costs | None,
    verdict: str,
) -> str:
    from vtrain.estimate import DTYPE_BYTES, TARGET_UTILISATION

    ring, rs, rec = est.ring, est.reduction_server, est.at_recommended
    origin = "from the job" if cluster.job_reducers else "assumed: the job has none"
    if cluster.job_reducers and rs.reducers != cluster.job_reducers:
        origin = f"--reducers; the job has {cluster.job_reducers}"
    gpus = f", {est.gpus_per_worker} GPUs each ({est.ring_ranks} ring ranks)" if est.gpus_per_worker else ""
    compute = (
        f"{_secs(est.step_compute_s)} per step"
        if est.step_compute_s is not None
        else "not given: communication-bound ceiling"
    )
    lines = [
        f"{config.name} ({job_file})",
        f"  workers     {est.workers} × {' / '.join(cluster.machines)} (chief + workers){gpus}, "
        f"{cluster.worker_gbps:g} Gbps NIC",
        f"  reducers    {rs.reducers} × {cluster.reducer_machine}, {cluster.reducer_gbps:g} Gbps ({origin})",
        f"  gradient    {_count(params)} params × {DTYPE_BYTES[dtype]} B ({dtype}) = {_bytes(est.gradient_bytes)}",
        f"  compute     {compute}",
        f"  model       α = {est.alpha_s * 1e6:g} µs per hop; per-VM NIC bound; no compute/comm overlap",
        "",
        f"  {'':26}{'ring all-reduce':>16}{'reduction server':>18}",
        f"  {'sent per worker per step':26}{_bytes(ring.bytes_sent_per_worker):>16}"
        f"{_bytes(rs.bytes_sent_per_worker):>18}",
        f"  {'communication per step':26}{_secs(ring.comm_seconds):>16}{_secs(rs.comm_seconds):>18}"
        + ("  reducer-bound" if rs.reducer_bound else ""),
        f"  {'steps/sec':26}{_rate(ring.steps_per_sec):>16}{_rate(rs.steps_per_sec):>18}",
        f"  {'speed-up':26}{'1.00×':>16}{f'{est.speedup:.2f}×':>18}",
        f"  {'VM-hours / 1,000 steps':26}{ring.worker_hours:>16.3f}{rs.worker_hours:>18.3f}",
        f"  {'GPU-hours / 1,000 steps':26}{ring.gpu_hours:>16.3f}{rs.gpu_hours:>18.3f}",
        f"  {'reducer-hours / 1,000':26}{'-':>16}{rs.reducer_hours:>18.3f}",
    ]
    if money is not None:
        lines.append(
            f"  {'cost / 1,000 steps':26}{f'${money.ring_per_1000_steps:.2f}':>16}"
            f"{f'${money.reduction_server_per_1000_steps:.2f}':>18}"
        )
        lines.append(
            f"  prices      ${money.worker_price_per_hour:.2f}/h for pools 0+1, "
            f"${money.reducer_price_per_hour:.2f}/h per reducer (from your price file)"
        )
    lines += ["", _sizing(est, cluster, rec), "", _low_text(low, cluster.worker_gbps, TARGET_UTILISATION)]
    return "\n".join(lines + ["", verdict])


def _sizing(est: Estimate, cluster: JobCluster, rec: Any) -> str:
    rule = est.recommended_reducers
    if cluster.sizing_gbps == est.workers * cluster.worker_gbps:
        total = f"{est.workers} × {cluster.worker_gbps:g} Gbps"
    else:
        total = f"Σ {cluster.sizing_gbps:g} Gbps"
    speedup = est.ring.step_seconds / rec.step_seconds if rec.step_seconds else 1.0
    text = (
        f"  sizing      ⌈{total} / {cluster.reducer_gbps:g} Gbps⌉ = {rule} reducers: "
        f"{_rate(rec.steps_per_sec)} steps/sec, {speedup:.2f}× the ring\n"
        f"              (bandwidth alone caps it at 2(N−1)/N = {est.ceiling:.2f}×; "
        f"the ring also waits 2(N−1) = {2 * (est.ring_ranks - 1)} hops of α)"
    )
    m = est.reduction_server.reducers
    if m < rule:
        text += f"\n              with {m} (< {rule}) the reducers set the pace"
    elif m > rule:
        text += f"\n              {m - rule} reducer(s) past the rule add cost, not speed"
    beat = est.min_reducers_to_beat_ring
    text += (
        f"\n              fewer than {beat} reducers are slower than the ring"
        if beat and beat > 1
        else ("\n              no pool size beats the ring here" if beat is None and est.workers > 1 else "")
    )
    return text


def _low_text(low: list[LowComm], nic: float, target: float) -> str:
    pct = f"{target:.0%}"
    lines = [f"  low-communication training: per-worker bandwidth to keep compute ≥ {pct} busy"]
    for row in low:
        every = "every step" if row.inner_steps == 1 else f"every {row.inner_steps} steps"
        need = f"needs {row.needed_gbps:.3g} Gbps" if row.needed_gbps is not None else "needs --step-compute"
        lines.append(
            f"    {row.name:<20} S {every:<17} {need:<20} "
            f"(at {nic:g} Gbps: a step must compute ≥ {_secs(row.min_step_compute_s)})"
        )
    return "\n".join(lines)
