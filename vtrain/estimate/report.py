"""One job file and the user's numbers → the whole advice: exchange model, memory fit, precision,
parallelism, money. What `vtrain estimate` prints (as text or JSON) and what the SDK returns.

The JSON shape (`Report.to_dict`) is documented in the manual (docs/guides/choosing-parallelism.md)
and its keys only grow: the ring vs Reduction Server keys of the first version stay where they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vtrain.errors import EstimateError
from vtrain.estimate.advice import Recommendation, recommend
from vtrain.estimate.costs import Costs, LowComm, costs, low_communication, verdict_line
from vtrain.estimate.diloco import DilocoTraffic, diloco_traffic
from vtrain.estimate.dtensor import MeshPlan, mesh_plan
from vtrain.estimate.jobs import JobCluster, exchanging_pools, job_cluster
from vtrain.estimate.memory import Fit, MemoryNeed, memory_need, pool_fits
from vtrain.estimate.network import (
    DEFAULT_ALPHA_S,
    DEFAULT_INNER_STEPS,
    Estimate,
    estimate,
    gradient_bytes,
    recommended_reducers,
)
from vtrain.estimate.precision import PrecisionAdvice, precision_advice
from vtrain.estimate.prices import Prices, cluster_prices

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig

SCHEMA_VERSION = 2


@dataclass(frozen=True)
class Inputs:
    """What the user knows about the model and asks about; everything but `params` has a default."""

    params: int
    grad_dtype: str = "fp32"
    step_compute_s: float | None = None
    reducers: int | None = None
    reducer_machine: str | None = None
    alpha_s: float = DEFAULT_ALPHA_S
    inner_steps: tuple[int, ...] = DEFAULT_INNER_STEPS
    optimizer: str = "adam"
    precision: str = "fp32"
    activations: float | None = None  # bytes per replica, measured under `precision`
    regions: int = 1
    prices: Prices | None = None


@dataclass(frozen=True)
class Report:
    """Everything `vtrain estimate` knows about one job; `to_dict` is the documented JSON."""

    job: str
    name: str
    inputs: Inputs
    cluster: JobCluster
    est: Estimate
    low: list[LowComm]
    money: Costs | None
    memory: MemoryNeed
    fits: list[Fit]
    precision: list[PrecisionAdvice]
    diloco: list[DilocoTraffic]
    recommendation: Recommendation
    notes: list[str] = field(default_factory=list)
    config_diloco: tuple[int, str] | None = None  # a DiLoCo job's own (inner_steps, compression)
    mesh: MeshPlan | None = None  # a DTensor job's own mesh: memory and traffic per device

    def to_dict(self) -> dict[str, object]:
        i = self.inputs
        return {
            "schema_version": SCHEMA_VERSION,
            "job": self.job,
            "params": i.params,
            "grad_dtype": i.grad_dtype,
            "optimizer": i.optimizer,
            "precision": i.precision,
            "regions": i.regions,
            "cluster": self.cluster.to_dict(),
            **self.est.to_dict(),
            "low_communication": [row.to_dict() for row in self.low],
            "costs": self.money.to_dict() if self.money else None,
            "verdict": verdict_line(self.est, self.money),
            "memory": {
                "need": self.memory.to_dict(),
                "pools": [f.to_dict() for f in self.fits],
            },
            "precision_advice": [p.to_dict() for p in self.precision],
            "diloco": [row.to_dict() for row in self.diloco],
            "diloco_job": None if self.config_diloco is None else dict(
                zip(("inner_steps", "compression"), self.config_diloco, strict=True)),
            "dtensor": None if self.mesh is None else self.mesh.to_dict(),
            "recommendation": self.recommendation.to_dict(),
            "notes": self.notes,
        }


def _notes(config: JobConfig, cluster: JobCluster, params: int) -> list[str]:
    """Where the comparison is hypothetical for this job, and why."""
    from vtrain.catalog import is_tpu_machine

    out = []
    if config.diloco is not None and cluster.syncer_machine is not None:
        # The syncer keeps fp32 global parameters, outer momentum and the downlink residual.
        held = 3 * 4 * params
        out.append(f"this job trains with DiLoCo: the ring and Reduction Server columns show synchronous data "
                   f"parallel over its {cluster.workers} learners; pool 0 ({cluster.syncer_machine}) is the "
                   f"syncer, holding about {held / 1e9:.2f} GB (fp32 parameters, outer momentum, residual) plus "
                   f"up to max_staleness = {config.diloco.max_staleness} rounds of updates")
    if config.used_dtensor is not None:
        out.append("this job trains with DTensor: the ring and Reduction Server columns show what data parallel "
                   "over its replicas would exchange; its own mesh's numbers are under `dtensor`")
    if config.parameter_servers is not None and config.parameter_servers.replicas != 0:
        out.append("this job uses parameter servers, not all-reduce: the numbers show what switching would give")
    if cluster.workers > 1 and cluster.gpus_per_worker == 0:
        if any(is_tpu_machine(machine) for machine in cluster.machines):
            out.append("TPUs exchange gradients over their own interconnect; Reduction Server is for GPU workers")
        else:
            out.append("Vertex's Reduction Server needs GPU workers using NCCL all-reduce; this is hypothetical")
    return out


def advise(config: JobConfig, inputs: Inputs, job: str = "") -> Report:
    """The full advice for a loaded job; an unusable input is an :class:`EstimateError` naming the value."""
    if inputs.regions < 1:
        raise EstimateError(f"a cluster spans at least 1 region, got {inputs.regions}")
    if any(h < 1 for h in inputs.inner_steps):
        raise EstimateError(f"DiLoCo inner steps must be at least 1, got {min(inputs.inner_steps)}")
    cluster = job_cluster(config, inputs.reducer_machine)
    grad = gradient_bytes(inputs.params, inputs.grad_dtype)
    rule = recommended_reducers(cluster.sizing_gbps, cluster.reducer_gbps) if cluster.workers else 1
    m = inputs.reducers if inputs.reducers is not None else cluster.job_reducers or rule
    est = estimate(
        cluster.workers,
        cluster.worker_gbps,
        m,
        cluster.reducer_gbps,
        grad,
        inputs.step_compute_s,
        inputs.alpha_s,
        cluster.gpus_per_worker,
        cluster.sizing_gbps,
    )
    inner = inputs.inner_steps or DEFAULT_INNER_STEPS
    low = low_communication(grad, cluster.worker_gbps, inputs.step_compute_s, inner)
    money = None
    if inputs.prices is not None:
        money = costs(est, *cluster_prices(inputs.prices, config, cluster.reducer_machine))
    pools = exchanging_pools(config)  # a DiLoCo syncer holds no training state: see _notes
    need = memory_need(inputs.params, inputs.optimizer, inputs.precision, inputs.activations)
    fits = pool_fits(pools, need)
    advice = [
        precision_advice(f.device, inputs.params, inputs.optimizer, inputs.activations, inputs.precision) for f in fits
    ]
    # A DiLoCo job: the bytes its own settings put on the wire (vtrain.diloco.traffic), at its H too.
    compression = config.diloco.compression if config.diloco is not None else None
    if config.diloco is not None:
        inner = (*inner, config.diloco.inner_steps)
    traffic = [
        diloco_traffic(inputs.params, cluster.workers, h, cluster.worker_gbps,
                       cluster.syncer_gbps or cluster.reducer_gbps, inputs.alpha_s, compression=compression)
        for h in sorted(set(inner))
    ]
    devices = min((f.device.per_replica for f in fits), default=1)
    rec = recommend(
        fits,
        est,
        traffic,
        need.state,
        devices,
        gpu_workers=cluster.gpus_per_worker > 0,
        tpu=any(f.device.kind == "tpu" for f in fits),
        regions=inputs.regions,
    )
    if not config.strategy.reducers and rec.kind == "reduction_server":
        # vtrain.horovod's all-reduce is the ring column; the rules refuse reducers for a horovod job.
        rec.reasons.append("this job's horovod ranks run without Reduction Server (its ring column is theirs): "
                           "the reducers need the script ported to MultiWorkerMirroredStrategy")
    return Report(job, config.name, inputs, cluster, est, low, money, need, fits, advice, traffic, rec,
                  _notes(config, cluster, inputs.params),
                  (config.diloco.inner_steps, config.diloco.compression) if config.diloco is not None else None,
                  _job_mesh(config, est, need, fits))


def _job_mesh(config: JobConfig, est: Estimate, need: MemoryNeed, fits: list[Fit]) -> MeshPlan | None:
    """A DTensor job's own mesh on its machines. A CPU replica's logical devices share its host RAM:
    each one is given its share of it."""
    dtensor = config.used_dtensor
    if dtensor is None or not fits or not dtensor.mesh:
        return None
    replicas = max(1, est.workers)
    device = fits[0].device
    if device.kind == "cpu":
        per = max(1, dtensor.size // replicas)
        memory = device.memory_bytes / per if device.memory_bytes is not None else None
    else:
        per, memory = max(1, device.per_replica), device.memory_bytes
    return mesh_plan(dtensor.mesh, replicas=replicas, devices_per_replica=per, state_bytes=need.state,
                     activations=need.activations, grad_bytes=est.gradient_bytes, device_bytes=memory,
                     nic_gbps=est.worker_gbps, alpha_s=est.alpha_s)
