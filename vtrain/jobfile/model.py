"""The job model: frozen dataclasses for a job file, and :func:`build_config` from schema-checked data.

This module owns defaults and pool inheritance (workers and the evaluator take the chief's
machine; parameter servers a CPU machine). It imports nothing that uses it: loading a file,
`--set` overrides and validation live in :mod:`vtrain.jobfile.load`, above both this and
:mod:`vtrain.jobfile.rules`. Nothing here touches the network or the environment.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from vtrain.catalog import GPU_MACHINES, GPU_TYPES, is_tpu_machine
from vtrain.constants import DEFAULT_REGION, DILOCO, DILOCO_DEFAULTS, DTENSOR, DilocoKnobs
from vtrain.errors import Problem
from vtrain.jobfile.yamlpos import Positions
from vtrain.strategies import Strategy
from vtrain.strategies import get as strategy_row
from vtrain.tuning.model import TuningConfig, build_tuning
from vtrain.userpaths import absolute

ROLES = ("chief", "workers", "parameter_servers", "reduction_server", "evaluator")
#: Vertex worker pool index of each role (pool 2 is shared by parameter servers and reducers).
POOL_INDEX = {"chief": 0, "workers": 1, "parameter_servers": 2, "reduction_server": 2, "evaluator": 3,
              "second_learners": 2}
DEFAULT_PS_MACHINE = "n1-standard-8"
_Section = TypeVar("_Section")


@dataclass(frozen=True)
class BootDisk:
    type: str | None = None  # None: the machine's default (pd-ssd; hyperdisk-balanced where it takes Hyperdisk only)
    size_gb: int = 100


@dataclass(frozen=True)
class ReservationConfig:
    """`reservation:`; an affinity left out is `any` (`specific` when the job file names the reservation)."""

    affinity: str = "any"
    name: str | None = None


@dataclass(frozen=True)
class ContainerConfig:
    image_uri: str
    command: tuple[str, ...] = ()


@dataclass(frozen=True)
class PoolConfig:
    """One worker pool. `replicas` is an int once `auto` reducers are sized. `image`, `module` and `container`
    replace the trainer's for this pool only; mounts and the reservation are inherited from the chief."""

    role: str
    replicas: int | str
    machine_type: str
    accelerator: str | None = None
    accelerator_count: int = 0
    tpu_topology: str | None = None
    boot_disk: BootDisk | None = None
    args: tuple[str, ...] | None = None
    env: Mapping[str, str] | None = None
    image: str | None = None
    module: str | None = None
    container: ContainerConfig | None = None
    nfs_mounts: tuple[Mapping[str, str], ...] = ()
    lustre_mounts: tuple[Mapping[str, str], ...] = ()
    gpu_partition_size: str | None = None
    reservation: ReservationConfig | None = None

    @property
    def index(self) -> int:
        return POOL_INDEX[self.role]

    @property
    def gpus(self) -> int:
        """GPUs per replica of this pool."""
        return self.accelerator_count if self.accelerator in GPU_TYPES else 0

    @property
    def hardware(self) -> str:
        """'tpu', 'gpu' or 'cpu': what the pool runs on, which decides its prebuilt image family."""
        if is_tpu_machine(self.machine_type):
            return "tpu"
        return "gpu" if self.gpus else "cpu"


@dataclass(frozen=True)
class BuildConfig:
    """`trainer.build`: an image of the trainer on a base, pushed to `repository`. Requirement files
    (entries ending in .txt) are absolute paths here; their lines are read where the image is planned."""

    repository: str
    requirements: tuple[str, ...] = ()
    python_version: str | None = None
    dependencies: bool = True
    platform: str | None = None


@dataclass(frozen=True)
class TrainerConfig:
    package: Path | None = None
    package_uris: tuple[str, ...] = ()
    container: ContainerConfig | None = None
    build: BuildConfig | None = None
    module: str | None = None
    image: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SchedulingConfig:
    timeout_s: int | None = None
    restart_job_on_worker_restart: bool = False
    disable_retries: bool = False
    strategy: str | None = None
    max_wait_s: int | None = None
    fallback: tuple[Mapping[str, Any], ...] = ()  # `submit --recover` alternatives (vtrain only)


@dataclass(frozen=True)
class PscInterfaceConfig:
    """`psc_interface:`: a Private Service Connect interface and the DNS zones peered through it."""

    network_attachment: str
    dns_peering: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True)
class VertexPassthrough:
    """`vertex:`: raw camelCase fields merged into the request (checked by rules/passthrough.py)."""

    job_spec: Mapping[str, Any] = field(default_factory=dict)
    worker_pool: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelConfig:
    """`model:`: the job's AIP_MODEL_DIR registered in Model Registry after it succeeds
    (:mod:`vtrain.request.model_upload` builds the UploadModel request)."""

    display_name: str
    description: str | None = None
    serving_image: str | None = None  # an alias (tf2-cpu.2-15) or URI; None: tf2-cpu at the training version
    predict_route: str | None = None
    health_route: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    version_aliases: tuple[str, ...] = ()
    parent: str | None = None
    new_version_each_run: bool = False


@dataclass(frozen=True)
class DilocoConfig(DilocoKnobs):
    """`diloco:` (with `distribution_strategy: diloco`); its second learner pool is JobConfig.second_learners."""

    def settings(self) -> dict[str, Any]:
        """What every replica gets as VTRAIN_DILOCO (the runtime's diloco.settings.Settings fields)."""
        return {name: getattr(self, name) for name in DILOCO_DEFAULTS}


@dataclass(frozen=True)
class DtensorConfig:
    """`dtensor:` (with `distribution_strategy: dtensor`): the mesh as written, outermost dimension first."""

    mesh: tuple[tuple[str, int], ...] = ()

    @property
    def size(self) -> int:
        """Devices the mesh covers: the product of its sizes."""
        return math.prod(n for _, n in self.mesh)


@dataclass(frozen=True)
class JobConfig:
    """A checked job file. Build the Vertex request from it with :func:`vtrain.build_job`."""

    name: str
    trainer: TrainerConfig
    chief: PoolConfig
    region: str = DEFAULT_REGION
    project: str | None = None
    staging_bucket: str | None = None
    base_output_dir: str | None = None
    service_account: str | None = None
    network: str | None = None
    reserved_ip_ranges: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    tensorboard: str | None = None
    enable_web_access: bool = False
    enable_dashboard_access: bool = False
    persistent_resource_id: str | None = None
    kms_key: str | None = None
    experiment: str | None = None
    experiment_run: str | None = None
    protected_artifact_location_id: str | None = None
    psc_interface: PscInterfaceConfig | None = None
    distribution_strategy: str = "auto"
    workers: PoolConfig | None = None
    parameter_servers: PoolConfig | None = None
    reduction_server: PoolConfig | None = None
    evaluator: PoolConfig | None = None
    second_learners: PoolConfig | None = None  # pool 2 of a DiLoCo job: a second learner group
    diloco: DilocoConfig | None = None
    dtensor: DtensorConfig | None = None
    scheduling: SchedulingConfig = field(default_factory=SchedulingConfig)
    reservation: ReservationConfig | None = None
    tuning: TuningConfig | None = None  # a HyperparameterTuningJob whose trials run this job
    vertex: VertexPassthrough | None = None
    model: ModelConfig | None = None
    source: Path | None = field(default=None, compare=False)
    positions: Positions = field(default_factory=Positions, compare=False, repr=False)
    warnings: tuple[Problem, ...] = field(default=(), compare=False, repr=False)

    def pools(self) -> list[PoolConfig]:
        """Pools present, in Vertex order (chief, workers, ps or reducers, evaluator)."""
        found = [self.chief, self.workers, self.parameter_servers, self.reduction_server, self.second_learners,
                 self.evaluator]
        return [p for p in found if p is not None and p.replicas != 0]

    def job_files(self) -> tuple[Path, ...]:
        """The job file itself: never one of the trainer's files, even inside its folder (as `vtrain init`
        lays it out), so that editing `args` changes neither the sdist's name nor the image's tag."""
        return (self.source,) if self.source is not None else ()

    def written_region(self) -> str | None:
        """The region the job file (or a --set) names; None when only the default applies,
        so flags, the environment and gcloud may choose."""
        if ("region",) in self.positions.values or self.region != DEFAULT_REGION:
            return self.region
        return None

    @property
    def strategy(self) -> Strategy:
        """The row of :mod:`vtrain.strategies` that `distribution_strategy` names."""
        return strategy_row(self.distribution_strategy)

    @property
    def used_dtensor(self) -> DtensorConfig | None:
        """The `dtensor:` block when the strategy reads it; None for a strategy that has no mesh."""
        return self.dtensor if self.strategy.block == DTENSOR else None

    @property
    def used_diloco(self) -> DilocoConfig | None:
        """The `diloco:` settings when the strategy reads them; None for any other strategy."""
        return self.diloco if self.strategy.block == DILOCO else None

    def training_replicas(self) -> int:
        """Replicas of pools 0 and 1: the ones that all-reduce gradients."""
        return sum(int(p.replicas) for p in (self.chief, self.workers) if p is not None)

    def learners(self) -> int:
        """DiLoCo learners: the replicas of the worker pool and of the second learner pool."""
        return sum(int(p.replicas) for p in (self.workers, self.second_learners) if p is not None)


# --------------------------------------------------------------------------- building


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
