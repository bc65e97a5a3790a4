"""Cross-field rules: what Vertex AI would reject, found before anything is uploaded.

:func:`validate` checks a built :class:`~vtrain.jobfile.config.JobConfig` and returns a
normalized copy (accelerator aliases → enum names, machine-implied GPUs filled
in, `replicas: auto` reducers sized, default TPU topologies) plus every problem
found. Each message says what is wrong, what is allowed, and how to fix it.
"""

from __future__ import annotations

from dataclasses import replace

from vtrain.errors import Problem
from vtrain.jobfile.config import JobConfig, PoolConfig
from vtrain.jobfile.rules.base import Rules
from vtrain.jobfile.rules.diloco import check_diloco
from vtrain.jobfile.rules.dtensor import check_dtensor
from vtrain.jobfile.rules.horovod import check_horovod
from vtrain.jobfile.rules.job import check_env, check_job_fields, check_scheduling
from vtrain.jobfile.rules.machines import check_boot_disk, check_cluster, check_machine
from vtrain.jobfile.rules.model import check_model
from vtrain.jobfile.rules.passthrough import check_passthrough
from vtrain.jobfile.rules.pools import check_pools, check_services
from vtrain.jobfile.rules.trainer import check_strategy, check_trainer
from vtrain.jobfile.rules.tuning import check_tuning

__all__ = ["validate"]


def _machine_key(pool: PoolConfig) -> tuple[object, ...]:
    return (pool.machine_type, pool.accelerator, pool.accelerator_count, pool.tpu_topology, pool.boot_disk,
            pool.gpu_partition_size)


def validate(config: JobConfig, *, target: str = "vertex") -> tuple[JobConfig, list[Problem]]:
    """Check every rule; return the normalized config and all problems (errors and warnings)."""
    r = Rules(config, target)
    pools: dict[str, PoolConfig] = {}
    chief_machine = _machine_key(config.chief)
    for pool in [config.chief, config.workers, config.parameter_servers, config.reduction_server, config.evaluator,
                 config.second_learners]:
        if pool is None:
            continue
        if pool.role != "chief" and _machine_key(pool) == chief_machine:
            # Same machine as the chief (usually inherited): reuse its verdict, report nothing twice.
            chief = pools["chief"]
            pools[pool.role] = replace(pool, accelerator=chief.accelerator, accelerator_count=chief.accelerator_count,
                                       tpu_topology=chief.tpu_topology)
        else:
            pools[pool.role] = check_machine(r, pool)
            check_boot_disk(r, pool)
    config = replace(
        config,
        chief=pools["chief"],
        workers=pools.get("workers"),
        parameter_servers=pools.get("parameter_servers"),
        reduction_server=pools.get("reduction_server"),
        evaluator=pools.get("evaluator"),
        second_learners=pools.get("second_learners"),
    )
    r.config = config
    config = check_cluster(r, config)
    r.config = config
    check_trainer(r, config)
    check_strategy(r, config)
    check_diloco(r, config)
    check_dtensor(r, config)
    check_horovod(r, config)
    check_job_fields(r, config)
    check_env(r, config)
    check_scheduling(r, config)
    check_tuning(r, config)
    check_pools(r, config)
    check_services(r, config)
    check_passthrough(r, config)
    check_model(r, config)
    return config, r.problems
