"""From a loaded job file to the few numbers the model needs, and `vtrain render`'s hint."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from vtrain.errors import EstimateError
from vtrain.estimate.network import recommended_reducers

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig, PoolConfig


@dataclass(frozen=True)
class JobCluster:
    """What the model needs from a JobConfig: pools 0+1 and the reducers (job's or assumed).

    For a DiLoCo job the exchanging replicas are the learners (pools 1 and 2) and pool 0 is the
    syncer, whose NIC carries every learner's traffic: ``syncer_machine``/``syncer_gbps``."""

    workers: int
    machines: tuple[str, ...]  # distinct machine types of pools 0+1
    worker_gbps: float  # the slowest NIC of pools 0+1
    sizing_gbps: float  # Σ replicas × NIC Gbps, for the sizing rule
    gpus_per_worker: int  # the fewest GPUs of any replica of pools 0+1
    reducer_machine: str
    reducer_gbps: float
    job_reducers: int | None  # None: the job has no reduction_server pool
    reducer_machine_given: bool = False  # --reducer-machine named it (not the job's pool)
    syncer_machine: str | None = None  # a DiLoCo job's pool 0
    syncer_gbps: float | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def job_cluster(config: JobConfig, reducer_machine: str | None = None) -> JobCluster:
    """Read the cluster of a loaded job; an unknown machine type is an EstimateError."""
    from vtrain import catalog

    pools = exchanging_pools(config)
    red = config.reduction_server
    job_reducers = int(red.replicas) if red is not None and isinstance(red.replicas, int) else None
    machine = reducer_machine or (red.machine_type if red is not None else None)
    machine = machine or catalog.REDUCTION_SERVER_DEFAULT_MACHINE

    def gbps(machine_type: str, where: str) -> float:
        try:
            return catalog.nic_gbps(machine_type)
        except KeyError:
            raise EstimateError(f"{where}: unknown machine type {machine_type!r}") from None

    nics = [gbps(p.machine_type, f"cluster.{p.role}.machine_type") for p in pools]
    syncer = config.chief if is_diloco(config) else None
    return JobCluster(
        workers=sum(int(p.replicas) for p in pools),
        machines=tuple(dict.fromkeys(p.machine_type for p in pools)),
        worker_gbps=min(nics, default=0.0),
        sizing_gbps=sum(int(p.replicas) * nic for p, nic in zip(pools, nics, strict=True)),
        gpus_per_worker=min((catalog.gpus_per_machine(p.machine_type, p.gpus) for p in pools), default=0),
        reducer_machine=machine,
        reducer_gbps=gbps(machine, "reducer machine type"),
        job_reducers=job_reducers if job_reducers else None,
        reducer_machine_given=reducer_machine is not None,
        syncer_machine=syncer.machine_type if syncer is not None else None,
        syncer_gbps=gbps(syncer.machine_type, "cluster.chief.machine_type") if syncer is not None else None,
    )


def is_diloco(config: JobConfig) -> bool:
    return config.strategy.traffic == "diloco"


def exchanging_pools(config: JobConfig) -> list[PoolConfig]:
    """The replicas that train and exchange: chief + workers, or a DiLoCo job's learners (not its syncer)."""
    found = (config.workers, config.second_learners) if is_diloco(config) else (config.chief, config.workers)
    return [p for p in found if p is not None and int(p.replicas) > 0]


def estimate_hint(config: JobConfig) -> str | None:
    """One line for `vtrain render`: GPU replicas that all-reduce over a ring and could use reducers.

    None when the hint does not apply (fewer than 2 GPU replicas in pools 0+1,
    reducers or parameter servers already there) or the cluster cannot be read.
    """
    if config.reduction_server is not None and config.reduction_server.replicas != 0:
        return None
    if config.strategy.traffic in ("dtensor", "diloco") or not config.strategy.reducers:
        return None  # no ring all-reduce of whole gradients to speed up, or (horovod) none reducers can serve
    if config.parameter_servers is not None and config.parameter_servers.replicas != 0:
        return None
    try:
        cluster = job_cluster(config)
    except (EstimateError, TypeError, ValueError):
        return None
    if cluster.workers < 2 or cluster.gpus_per_worker < 1:
        return None
    rule = recommended_reducers(cluster.sizing_gbps, cluster.reducer_gbps)
    ranks = cluster.workers * cluster.gpus_per_worker
    job = config.source.name if config.source is not None else "JOB.yaml"
    return (
        f"estimate: {cluster.workers} GPU replicas exchange gradients by ring all-reduce; "
        f"a Reduction Server ({rule} × {cluster.reducer_machine} by the sizing rule) could make "
        f"the exchange up to {2 * (ranks - 1) / ranks:.2f}× faster. "
        f"See `vtrain estimate {job} --params N` for whether it pays."
    )
