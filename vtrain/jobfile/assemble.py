"""A checked job file's data → :class:`~vtrain.jobfile.config.JobConfig`: :func:`build_config`.

Where the job config's defaults and inheritance are applied (workers and the evaluator take the chief's machine;
parameter servers a CPU machine; the DiLoCo and DTensor blocks as the strategy uses them), and the paths a job
file names are resolved against its folder. A plain key is declared on its schema node and its dataclass, not here
(:func:`_plain`). It imports nothing that uses it; nothing here touches the network or the environment beyond the
job file's own folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from vtrain.catalog import GPU_MACHINES
from vtrain.jobfile.config import (
    DEFAULT_PS_MACHINE,
    ROLES,
    BootDisk,
    BuildConfig,
    ContainerConfig,
    DilocoConfig,
    DtensorConfig,
    JobConfig,
    ModelConfig,
    PoolConfig,
    PscInterfaceConfig,
    ReservationConfig,
    SchedulingConfig,
    TrainerConfig,
    VertexPassthrough,
)
from vtrain.jobfile.yamlpos import Positions
from vtrain.tuning.config import build_tuning
from vtrain.userpaths import absolute

_Section = TypeVar("_Section")


def _frozen(value: Any) -> Any:
    """A checked value as a frozen dataclass holds it: lists as tuples, mappings as fresh dicts."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Mapping):
        return {k: _frozen(v) for k, v in value.items()}
    return value


def _plain(cls: type[_Section], raw: Mapping[str, Any], **built: Any) -> _Section:
    """A section built generically: each key of `raw` that names a field of `cls` is that field as written
    (frozen), a key left out takes the dataclass's default, and `built` gives the fields that need a
    conversion or a rename. So a plain key is declared on its schema node and its dataclass, not here."""
    names = {f.name for f in fields(cls)} - set(built)  # type: ignore[arg-type]
    return cls(**{k: _frozen(v) for k, v in raw.items() if k in names and v is not None}, **built)


def _pool(role: str, raw: Mapping[str, Any], chief: PoolConfig | None) -> PoolConfig:
    """Build a pool; workers and evaluator inherit the chief's machine when they name none."""
    replicas = raw.get("replicas", "auto" if role == "reduction_server" else 1)
    machine_type = raw.get("machine_type")
    inherit = chief is not None and role in ("workers", "evaluator", "second_learners") and (
        machine_type is None or machine_type == chief.machine_type
    )
    accelerator = raw.get("accelerator")
    count = raw.get("accelerator_count")
    topology = raw.get("tpu_topology")
    partition = raw.get("gpu_partition_size")
    if inherit and chief is not None:
        machine_type = chief.machine_type
        accelerator = accelerator if "accelerator" in raw else chief.accelerator
        count = count if "accelerator_count" in raw else chief.accelerator_count
        topology = topology if "tpu_topology" in raw else chief.tpu_topology
        partition = partition if "gpu_partition_size" in raw else chief.gpu_partition_size
    if machine_type is None:
        if role == "reduction_server":
            from vtrain.catalog import REDUCTION_SERVER_DEFAULT_MACHINE

            machine_type = REDUCTION_SERVER_DEFAULT_MACHINE
        elif role == "parameter_servers" and chief is not None and not chief.accelerator and (
            chief.machine_type not in GPU_MACHINES  # A2/A3/G2 imply GPUs even with no accelerator written
        ):
            machine_type = chief.machine_type
        elif role == "parameter_servers":
            machine_type = DEFAULT_PS_MACHINE
        else:
            machine_type = ""
    boot_disk = _plain(BootDisk, raw["boot_disk"]) if raw.get("boot_disk") is not None else None
    if boot_disk is None and chief is not None and role != "reduction_server":
        boot_disk = chief.boot_disk
    args = raw.get("args")
    container = raw.get("container")
    reservation = _reservation(raw.get("reservation"))
    mounts: dict[str, Any] = {key: tuple(_frozen(raw[key])) for key in ("nfs_mounts", "lustre_mounts") if key in raw}
    if chief is not None and role != "reduction_server":  # mounts and reservation: the chief's when left out
        mounts = {"nfs_mounts": chief.nfs_mounts, "lustre_mounts": chief.lustre_mounts, **mounts}
        reservation = reservation if "reservation" in raw else chief.reservation
    return PoolConfig(
        role=role,
        replicas=replicas,
        machine_type=machine_type,
        accelerator=accelerator,
        accelerator_count=count or 0,
        tpu_topology=topology,
        boot_disk=boot_disk,
        args=tuple(args) if args is not None else None,
        env=raw.get("env"),
        image=raw.get("image"),
        module=raw.get("module"),
        container=_plain(ContainerConfig, container) if container else None,
        gpu_partition_size=partition,
        reservation=reservation,
        **mounts,
    )


def _reservation(raw: Mapping[str, Any] | None) -> ReservationConfig | None:
    """A reservation block; its affinity left out: `specific` when a reservation is named, else `any`."""
    if raw is None:
        return None
    return _plain(ReservationConfig, raw, affinity=raw.get("affinity", "specific" if raw.get("name") else "any"))


def _resolve_package(raw: str | None, base: Path) -> Path | None:
    if raw is None:
        return None
    path = Path(os.path.expanduser(raw))
    return path if path.is_absolute() else absolute(base / path)


def is_requirements_file(entry: str) -> bool:
    """A `trainer.build.requirements` entry that names a file (as pip's -r) rather than a requirement."""
    return entry.strip().lower().endswith(".txt")


def _requirements(raw: list[str] | None, base: Path) -> tuple[str, ...]:
    """Requirement files relative to the job file made absolute; specifiers as written."""
    return tuple(str(_resolve_package(e.strip(), base)) if is_requirements_file(e) else e for e in raw or ())


def _resolve_local_dir(raw: str | None, base: Path) -> str | None:
    """A relative local staging/output path starts at the job file's directory, as trainer.package does."""
    if not isinstance(raw, str) or not raw.strip() or "://" in raw or raw.startswith(("gs:", "gs/")):
        return raw
    path = Path(os.path.expanduser(raw))
    return raw if path.is_absolute() else str(absolute(base / path))


def _model(raw: Mapping[str, Any] | None, job_name: str) -> ModelConfig | None:
    if raw is None:
        return None
    routes = raw.get("routes") or {}
    return _plain(ModelConfig, raw, display_name=raw.get("display_name") or job_name,
                  predict_route=routes.get("predict"), health_route=routes.get("health"))


def build_config(data: Mapping[str, Any], *, source: Path | None, positions: Positions) -> JobConfig:
    """Dataclasses from schema-checked data (no cross-field validation here)."""
    base = source.parent if source is not None else Path.cwd()
    trainer_raw = data["trainer"]
    container = trainer_raw.get("container")
    build = trainer_raw.get("build")
    trainer = _plain(TrainerConfig, trainer_raw, package=_resolve_package(trainer_raw.get("package"), base),
                     container=_plain(ContainerConfig, container) if container else None,
                     build=_plain(BuildConfig, build, requirements=_requirements(build.get("requirements"), base))
                     if build else None)
    cluster = data["cluster"]
    chief = _pool("chief", cluster["chief"], None)
    pools = {role: _pool(role, cluster[role], chief) for role in ROLES[1:] if role in cluster}
    sched = data.get("scheduling") or {}
    reservation = data.get("reservation")
    psc = data.get("psc_interface")
    diloco_raw = dict(data.get("diloco") or {})
    second_raw = diloco_raw.pop("second_learner_pool", None)
    diloco = None
    if "diloco" in data or data.get("distribution_strategy") == "diloco":
        diloco = _plain(DilocoConfig, diloco_raw)
    # The second learner group inherits from the first (cluster.workers), like workers from the chief.
    second = _pool("second_learners", second_raw, pools.get("workers") or chief) if second_raw is not None else None
    mesh = (data.get("dtensor") or {}).get("mesh")
    dtensor = DtensorConfig(tuple(mesh.items())) if isinstance(mesh, Mapping) else None
    return _plain(
        JobConfig,
        data,
        dtensor=dtensor,
        trainer=trainer,
        chief=chief,
        staging_bucket=_resolve_local_dir(data.get("staging_bucket"), base),
        base_output_dir=_resolve_local_dir(data.get("base_output_dir"), base),
        workers=pools.get("workers"),
        parameter_servers=pools.get("parameter_servers"),
        reduction_server=pools.get("reduction_server"),
        evaluator=pools.get("evaluator"),
        second_learners=second,
        diloco=diloco,
        scheduling=_plain(SchedulingConfig, sched, timeout_s=sched.get("timeout"), max_wait_s=sched.get("max_wait")),
        reservation=_reservation(reservation),
        psc_interface=_plain(PscInterfaceConfig, psc) if psc else None,
        tuning=build_tuning(data.get("tuning")),
        vertex=VertexPassthrough(**data["vertex"]) if data.get("vertex") else None,
        model=_model(data.get("model"), data["name"]),
        source=source,
        positions=positions,
    )

__all__ = [
    "BootDisk",
    "BuildConfig",
    "ContainerConfig",
    "DilocoConfig",
    "DtensorConfig",
    "JobConfig",
    "ModelConfig",
    "PoolConfig",
    "PscInterfaceConfig",
    "ReservationConfig",
    "SchedulingConfig",
    "TrainerConfig",
    "VertexPassthrough",
]
