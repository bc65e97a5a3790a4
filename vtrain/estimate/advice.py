"""Which parallelism for this model on this cluster, with the reason and the numbers.

The order of the questions is the order in which they rule options out:

1. Does a replica's training state fit its device? If not, no amount of data parallelism helps:
   shard the state (model parallel). How many devices the sharded state needs comes from
   :mod:`.memory`.
2. Does the cluster span regions? One synchronous all-reduce over a WAN is hopeless; DiLoCo syncs
   once every H steps (one Vertex job per region, learners talking to one syncer).
3. One replica exchanges nothing over the network: one machine (MirroredStrategy over its GPUs).
4. Otherwise data parallel: the ring if it keeps compute ≥ 90 % busy; a Reduction Server (GPU
   workers only) when it pays; DiLoCo when even the best exchange leaves the network at least
   as long as the compute (utilisation < 50 %).

Pure: numbers in, a :class:`Recommendation` out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from vtrain.estimate.diloco import DilocoTraffic
from vtrain.estimate.dtensor import MeshPlan, mesh_plan, suggest_mesh
from vtrain.estimate.memory import Fit, human_bytes
from vtrain.estimate.network import TARGET_UTILISATION, Estimate

#: Below this utilisation the network takes at least as long as the compute: low-communication territory.
LOW_UTILISATION = 0.5
#: A Reduction Server must beat the ring by this much to be worth another pool.
MIN_SPEEDUP = 1.05

KINDS = ("single_machine", "ring", "reduction_server", "diloco", "model_parallel")

SHARDING_OPTIONS = (
    "DTensor (tf.experimental.dtensor): a Mesh over the devices and Layouts that shard the large weights "
    "(their gradients and optimizer slots follow)",
    "ParameterServerStrategy with a variable_partitioner (tf.distribute.experimental.partitioners."
    "MinSizePartitioner / MaxSizePartitioner): variables split across parameter servers' host memory",
    "TPUStrategy with TPUEmbedding for very large embedding tables (sharded across TPU cores)",
)


@dataclass(frozen=True)
class Recommendation:
    """The parallelism to use, why, and the numbers behind it."""

    kind: str  # one of KINDS
    summary: str
    reasons: list[str]
    numbers: dict[str, float | int | str | None] = field(default_factory=dict)
    options: list[str] = field(default_factory=list)  # how to do it in TensorFlow / the job file
    job_file: str | None = None  # job-file lines to paste (model parallel: the dtensor block)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


_gb = human_bytes


def _util(compute: float, comm: float) -> float:
    return compute / (compute + comm) if compute + comm > 0 else 1.0


def _overlapped(compute: float, comm: float) -> float:
    """Busy share when the exchange overlaps the next round's compute: a round lasts the longer of the two."""
    return compute / max(compute, comm) if max(compute, comm) > 0 else 1.0


def _network(seconds: float) -> str:
    return "no network" if seconds == 0 else f"{seconds * 1e3:.1f} ms of network" if seconds < 1 else (
        f"{seconds:.2f} s of network")


def _dtensor_plan(fit: Fit, state: float, est: Estimate) -> MeshPlan | None:
    """The mesh that holds the sharded state on this job's machines (None: on TPUs, or nothing fits)."""
    if fit.sharded_devices is None or fit.device.kind == "tpu":
        return None
    per = max(1, fit.device.per_replica)
    replicas = max(1, est.workers)
    mesh, new = suggest_mesh(fit.sharded_devices, replicas, per)
    return mesh_plan(mesh, replicas=new, devices_per_replica=per, state_bytes=state,
                     activations=fit.need_bytes - state or None, grad_bytes=est.gradient_bytes,
                     device_bytes=fit.device.memory_bytes, nic_gbps=est.worker_gbps, alpha_s=est.alpha_s,
                     replicas_changed=new != replicas)  # fmt: skip


def _model_parallel(fit: Fit, state: float, cluster_devices: int, est: Estimate) -> Recommendation:
    dev = fit.device
    memory = dev.memory_bytes or 0.0
    reasons = [
        f"data parallelism keeps a full copy of weights, gradients and optimizer slots on every device: "
        f"{_gb(fit.need_bytes)} per replica against {_gb(memory)} on one {dev.name} "
        f"({_gb(fit.usable_bytes or 0)} usable)",
    ]
    numbers: dict[str, float | int | str | None] = {
        "need_bytes": fit.need_bytes,
        "device_bytes": memory,
        "state_bytes": state,
        "sharded_devices": fit.sharded_devices,
        "sharded_machines": fit.sharded_machines,
        "cluster_devices": cluster_devices,
    }
    if fit.sharded_devices is None:
        reasons.append(
            "the activations alone exceed the device: lower the per-replica batch or recompute activations "
            "(gradient checkpointing) before sharding can help"
        )
        summary = "model parallel: the activations alone do not fit one device"
    else:
        have = "this cluster has" if cluster_devices >= fit.sharded_devices else "this cluster has only"
        reasons.append(
            f"sharded (weights, gradients and slots split, activations per device) the state needs ≥ "
            f"{fit.sharded_devices} × {dev.name} = {fit.sharded_machines} × {fit.machine_type}; "
            f"{have} {cluster_devices}"
        )
        where = f"{fit.sharded_machines} × {fit.machine_type}"
        summary = f"model parallel / sharded over ≥ {fit.sharded_devices} devices ({where})"
    reasons.append(
        "mixed precision does not shrink the state (it adds 16-bit copies); "
        "sgd or adafactor instead of adam saves 8 B per parameter"
    )
    plan = _dtensor_plan(fit, state, est)
    block = None
    if plan is not None:
        mesh = ", ".join(f"{name} {size}" for name, size in plan.mesh)
        where = "within each replica" if plan.model_within_replica else "across replicas, over the network"
        reasons.append(
            f"with DTensor, mesh {mesh} over {plan.replicas} replica(s) x {plan.devices_per_replica} device(s): "
            f"{_gb(plan.bytes_per_device)} per device ({_gb(state)} state / {plan.model}"
            + (f" + {_gb(plan.activation_bytes_per_device)} activations" if plan.activation_bytes_per_device else "")
            + f"); per step each device moves {_gb(plan.model_bytes_per_step)} over `model` ({where}) and "
            f"{_gb(plan.batch_bytes_per_step)} over `batch`, {_network(plan.network_seconds_per_step)}"
        )
        if not plan.model_within_replica:
            reasons.append(f"`model` ({plan.model}) spans {plan.model // plan.devices_per_replica} machines of "
                           f"{plan.devices_per_replica} device(s): machines with more GPUs keep it on NVLink")
        numbers.update(dtensor_bytes_per_device=plan.bytes_per_device,
                       dtensor_network_seconds_per_step=plan.network_seconds_per_step)
        block = plan.block()
    options = list(SHARDING_OPTIONS)
    if block is not None:
        options[0] = "distribution_strategy: dtensor (vtrain's DTensor runtime and the model-parallel template): " \
                     "paste the block below"
    return Recommendation("model_parallel", summary, reasons, numbers, options, block)


def _diloco(rows: list[DilocoTraffic], compute: float | None, why: str) -> Recommendation:
    chosen = rows[-1]
    if compute is not None:
        chosen = next((r for r in rows if _util(compute, r.comm_seconds_per_step) >= TARGET_UTILISATION), rows[-1])
    comm = chosen.comm_seconds_per_step
    busy = _util(compute, comm) if compute is not None else None
    busy_overlapped = _overlapped(compute, comm) if compute is not None else None
    numbers: dict[str, float | int | str | None] = {
        "inner_steps": chosen.inner_steps,
        "bytes_per_learner_per_step": chosen.sent_per_learner_per_step,
        "comm_seconds_per_step": comm,
        "utilisation": busy,
        "utilisation_with_overlap": busy_overlapped,
    }
    reasons = [
        why,
        f"DiLoCo with H = {chosen.inner_steps}: each learner sends {_gb(chosen.sent_per_learner_per_step)} "
        f"per inner step (and receives as much), {comm * 1e3:.3g} ms of network per step"
        + (f", compute {busy:.0%} busy" if busy is not None else ""),
    ]
    if busy is not None and busy_overlapped is not None and busy_overlapped - busy >= 0.01:
        reasons.append(f"with `diloco: {{overlap: true}}` a round's exchange runs behind the next round's steps: "
                       f"compute {busy_overlapped:.0%} busy (a few steps start from the "
                       f"pre-merge model: +0.1–0.2% loss on benchmarks/diloco.py's CPU job)")
    options = ["learners as worker pools, the syncer as pool 0 on a CPU machine (vtrain's DiLoCo)"]
    return Recommendation("diloco", f"DiLoCo (H = {chosen.inner_steps})", reasons, numbers, options)


def recommend(
    fits: list[Fit],
    est: Estimate,
    diloco: list[DilocoTraffic],
    state_bytes: float,
    devices_per_replica: int,
    gpu_workers: bool,
    tpu: bool,
    regions: int = 1,
) -> Recommendation:
    """The parallelism for this model on this cluster; `diloco` rows are ordered by growing H."""
    n, compute = est.workers, est.step_compute_s
    devices = n * max(1, devices_per_replica)
    short = [f for f in fits if f.verdict == "does not fit"]
    if short:
        return _model_parallel(short[0], state_bytes, devices, est)
    tight = [f"fits with only {f.headroom:.0%} headroom on {f.device.name}: measure before trusting it"
             for f in fits if f.verdict == "tight" and f.headroom is not None]  # fmt: skip
    if regions > 1:
        rec = _diloco(diloco, compute, f"the cluster spans {regions} regions: a synchronous all-reduce "
                      "over the WAN would stall every step; a Vertex job runs in one region")  # fmt: skip
        return Recommendation(rec.kind, rec.summary, tight + rec.reasons, rec.numbers, rec.options)
    if n < 2:
        where = (
            "TPUStrategy over the slice's cores" if tpu
            else f"MirroredStrategy over its {devices_per_replica} GPUs" if devices_per_replica > 1
            else "the default strategy"
        )  # fmt: skip
        return Recommendation(
            "single_machine",
            f"one machine ({where})",
            [*tight, "one replica exchanges no gradients over the network"],
            {"devices": devices},
            ["distribution_strategy: auto"],
        )
    ring, rs = est.ring, est.at_recommended
    speedup = ring.step_seconds / rs.step_seconds if rs.step_seconds > 0 else 1.0
    numbers: dict[str, float | int | str | None] = {
        "ring_comm_seconds": ring.comm_seconds,
        "reduction_server_comm_seconds": rs.comm_seconds if gpu_workers else None,
        "recommended_reducers": est.recommended_reducers if gpu_workers else None,
        "speedup": speedup if gpu_workers else None,
    }
    rs_rec = Recommendation(
        "reduction_server",
        f"data parallel + Reduction Server ({est.recommended_reducers} reducers)",
        [*tight, f"{speedup:.2f}× the ring's steps/sec with {est.recommended_reducers} reducers (sizing rule)"],
        numbers,
        [f"cluster.reduction_server: {{replicas: {est.recommended_reducers}}}", "distribution_strategy: auto (NCCL)"],
    )
    ring_rec = Recommendation(
        "ring", "data parallel (ring all-reduce)", list(tight), numbers, ["distribution_strategy: auto"]
    )
    if compute is None:
        if gpu_workers and speedup >= MIN_SPEEDUP:
            rs_rec.reasons.append(
                "communication-bound ceiling; give a step compute time to see whether DiLoCo is needed"
            )
            return rs_rec
        ring_rec.reasons.append(
            "Vertex's Reduction Server needs GPU workers" if not gpu_workers
            else f"a Reduction Server would give only {speedup:.2f}×"
        )  # fmt: skip
        return ring_rec
    ring_util = _util(compute, ring.comm_seconds)
    best_util = max(ring_util, _util(compute, rs.comm_seconds)) if gpu_workers else ring_util
    numbers["ring_utilisation"] = ring_util
    numbers["best_utilisation"] = best_util
    if ring_util >= TARGET_UTILISATION:
        ring_rec.reasons.append(f"the ring keeps compute {ring_util:.0%} busy: the network is not the bottleneck")
        return ring_rec
    if best_util < LOW_UTILISATION:
        return _diloco(diloco, compute, f"even the best synchronous exchange leaves compute {best_util:.0%} busy: "
                       "the network takes longer than the step's compute")  # fmt: skip
    if gpu_workers and speedup >= MIN_SPEEDUP:
        rs_rec.reasons.append(f"compute {best_util:.0%} busy with reducers against {ring_util:.0%} with the ring")
        return rs_rec
    ring_rec.reasons.append(
        f"compute {ring_util:.0%} busy; "
        + ("Vertex's Reduction Server needs GPU workers" if not gpu_workers else f"reducers give only {speedup:.2f}×")
    )
    return ring_rec
