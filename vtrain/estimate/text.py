"""`vtrain estimate` as text: the exchange table, the sizing, memory per replica, precision, and the
recommendation. Pure string building over a :class:`~vtrain.estimate.report.Report`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vtrain.estimate.costs import human_seconds, verdict_line
from vtrain.estimate.memory import human_bytes
from vtrain.estimate.network import DTYPE_BYTES, TARGET_UTILISATION

if TYPE_CHECKING:
    from vtrain.estimate.costs import LowComm
    from vtrain.estimate.jobs import JobCluster
    from vtrain.estimate.network import Estimate
    from vtrain.estimate.report import Report


_bytes = human_bytes
_secs = human_seconds


def _count(n: int) -> str:
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:.4g}{unit}"
    return str(n)


def _rate(x: float | None) -> str:
    return "unbounded" if x is None else f"{x:.2f}"


def _exchange_text(report: Report) -> str:
    job_file, cluster, est, low, money = report.job, report.cluster, report.est, report.low, report.money
    params, dtype, verdict = report.inputs.params, report.inputs.grad_dtype, verdict_line(est, money)
    ring, rs, rec = est.ring, est.reduction_server, est.at_recommended
    origin = "from the job" if cluster.job_reducers else "assumed: the job has none"
    if cluster.job_reducers and rs.reducers != cluster.job_reducers:
        origin = f"--reducers; the job has {cluster.job_reducers}"
    if cluster.reducer_machine_given:  # the count may be the job's, the machine is the flag's
        origin += "; machine from --reducer-machine"
    gpus = f", {est.gpus_per_worker} GPUs each ({est.ring_ranks} ring ranks)" if est.gpus_per_worker else ""
    compute = (
        f"{_secs(est.step_compute_s)} per step"
        if est.step_compute_s is not None
        else "not given: communication-bound ceiling"
    )
    lines = [
        f"{report.name} ({job_file})",
        f"  workers     {est.workers} × {' / '.join(cluster.machines)} {_who(cluster)}{gpus}, "
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
            f"  prices      ${money.worker_price_per_hour:.2f}/h for "
            f"{'the learners' if cluster.syncer_machine else 'pools 0+1'}, "
            f"${money.reducer_price_per_hour:.2f}/h per reducer (from your price file)"
        )
    lines += ["", _sizing(est, cluster, rec), "", _low_text(low, cluster.worker_gbps, TARGET_UTILISATION),
              _diloco_text(report)]
    return "\n".join(lines + ["", verdict])


def _who(cluster: JobCluster) -> str:
    if cluster.syncer_machine is not None:
        return f"(DiLoCo learners; the syncer: {cluster.syncer_machine}, {cluster.syncer_gbps:g} Gbps)"
    return "(chief + workers)"


def _diloco_text(report: Report) -> str:
    """DiLoCo per step at each H, with the bytes vtrain's implementation sends for the job's compression."""
    cluster, job = report.cluster, report.config_diloco
    codec = f", {job[1]}" if job is not None and job[1] != "none" else ""
    syncer = cluster.syncer_machine or f"{cluster.reducer_machine} (assumed)"
    lines = [f"  DiLoCo per step{codec}: each learner sends its change once every H steps; syncer {syncer}"]
    for row in report.diloco:
        mark = " (this job)" if job is not None and row.inner_steps == job[0] else ""
        lines.append(
            f"    {f'H={row.inner_steps}{mark}':<20} sent per learner {_bytes(row.sent_per_learner_per_step):>10}   "
            f"syncer in/out {_bytes(row.syncer_bytes_per_step):>10}   communication {_secs(row.comm_seconds_per_step)}"
        )
    return "\n".join(lines)


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
        if row.needed_gbps is not None:
            need = f"needs {row.needed_gbps:.3g} Gbps"
        else:  # a given 0 s of compute hides nothing behind any bandwidth; None: not given
            need = "never (0 s compute)" if row.utilisation == 0.0 else "needs --step-compute"
        lines.append(
            f"    {row.name:<20} S {every:<17} {need:<20} "
            f"(at {nic:g} Gbps: a step must compute ≥ {_secs(row.min_step_compute_s)})"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- the advisor's sections


def _memory_text(report: Report) -> str:
    need = report.memory
    opt = f"{need.optimizer}, {need.precision}: {need.bytes_per_param:g} B/param"
    parts = [f"weights {_bytes(need.weights)}"]
    if need.half_copies:
        parts.append(f"16-bit copies {_bytes(need.half_copies)}")
    parts += [f"gradients {_bytes(need.gradients)}", f"optimizer {_bytes(need.optimizer_slots)}"]
    acts = "not given: the verdict covers the training state only" if need.activations is None else _bytes(
        need.activations)  # fmt: skip
    lines = [
        f"  memory per replica ({opt})",
        f"    state        {' + '.join(parts)} = {_bytes(need.state)}",
        f"    activations  {acts}",
    ]
    for f in report.fits:
        dev = f.device
        mem = "unknown memory" if dev.memory_bytes is None else _bytes(dev.memory_bytes)
        if f.verdict == "unknown":
            verdict = "memory not in the catalog"
        elif f.verdict == "does not fit":
            verdict = f"does not fit: needs {_bytes(f.need_bytes)}"
            if f.sharded_devices:
                verdict += f"; sharded over ≥ {f.sharded_devices} devices ({f.sharded_machines} × {f.machine_type})"
        elif f.verdict == "tight":
            verdict = f"fits with {f.headroom:.0%} headroom (tight: TF and the allocator need some)"
        else:
            verdict = f"fits, {f.headroom:.0%} headroom"
        lines.append(f"    {f.role + ' ' + f.machine_type:<28} {dev.name} {mem}: {verdict}")
    return "\n".join(lines)


def _mesh_text(report: Report) -> str:
    """This DTensor job's own mesh: what a device holds, and what it sends per step."""
    plan = report.mesh
    if plan is None:
        return ""
    mesh = ", ".join(f"{name}: {size}" for name, size in plan.mesh)
    held = f"state {_bytes(plan.state_bytes_per_device * plan.model)} / {plan.model}"
    if plan.activation_bytes_per_device is not None:
        held += f" + activations {_bytes(plan.activation_bytes_per_device)}"
    room = "" if plan.device_bytes is None else f" of {_bytes(plan.device_bytes)}"
    verdict = {True: "fits", False: "does not fit", None: "memory not in the catalog"}[plan.fits]
    where = "within each replica" if plan.model_within_replica else "across replicas"
    return "\n".join([
        f"  dtensor mesh {{{mesh}}}: {plan.replicas} replica(s) x {plan.devices_per_replica} device(s)",
        f"    per device   {held} = {_bytes(plan.bytes_per_device)}{room}: {verdict}",
        f"    per step     {_bytes(plan.model_bytes_per_step)} over the sharding dimensions ({where}) + "
        f"{_bytes(plan.batch_bytes_per_step)} gradient all-reduce over batch; "
        f"network {_secs(plan.network_seconds_per_step)}",
    ])


def _precision_text(report: Report) -> str:
    lines = []
    for p in report.precision:
        scale = " with loss scaling" if p.loss_scaling else ""
        lines.append(f"  precision    {p.device}: {p.recommended} ({p.keras_policy}{scale})")
        lines.append(f"               {p.reason}")
        if p.recommended != "fp32":
            fp32, mixed = p.state_bytes["fp32"], p.state_bytes[p.recommended]
            act = p.activation_bytes[p.recommended]
            acts = f", activations {_bytes(act)}" if act is not None else ", activations halved"
            lines.append(
                f"               state {_bytes(fp32)} fp32 → {_bytes(mixed)} mixed{acts}; "
                f"compute at most {p.speedup_bound:g}× faster"
            )
        if p.caution:
            lines.append(f"               caution: {p.caution}")
    return "\n".join(lines)


def _recommendation_text(report: Report) -> str:
    rec = report.recommendation
    lines = [f"recommendation: {rec.summary}"]
    lines += [f"  - {reason}" for reason in rec.reasons]
    lines += [f"  use: {option}" for option in rec.options]
    if rec.job_file:
        lines.append("  in the job file (`vtrain init DIR --template model-parallel` has a trainer for it):")
        lines += [f"    {line}" for line in rec.job_file.splitlines()]
    return "\n".join(lines)


def format_report(report: Report) -> str:
    """The whole text report, notes last."""
    blocks = [
        _exchange_text(report),
        "",
        _memory_text(report),
        *([_mesh_text(report)] if report.mesh is not None else []),
        _precision_text(report),
        "",
        _recommendation_text(report),
    ]
    return "\n".join(blocks + [f"note: {note}" for note in report.notes])
