"""The job config: frozen dataclasses for a checked job file, with their defaults.

:mod:`vtrain.jobfile.assemble` builds them from schema-checked data (inheritance between pools, paths). This
module imports nothing that uses it: loading a file, `--set` overrides and validation live in
:mod:`vtrain.jobfile.load`, above both this and :mod:`vtrain.jobfile.rules`. Nothing here touches the network
or the environment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vtrain.catalog import GPU_TYPES, executor_image_uri, is_tpu_machine
from vtrain.constants import DEFAULT_REGION, DILOCO, DILOCO_DEFAULTS, DTENSOR, DilocoKnobs
from vtrain.errors import Problem
from vtrain.jobfile.yamlpos import Positions
from vtrain.strategies import Strategy
from vtrain.strategies import get as strategy_row
from vtrain.tuning.config import TuningConfig

ROLES = ("chief", "workers", "parameter_servers", "reduction_server", "evaluator")
#: Vertex worker pool index of each role (pool 2 is shared by parameter servers and reducers).
POOL_INDEX = {"chief": 0, "workers": 1, "parameter_servers": 2, "reduction_server": 2, "evaluator": 3,
              "second_learners": 2}
DEFAULT_PS_MACHINE = "n1-standard-8"


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

    def base_image(self, pool: PoolConfig) -> str:
        """`pool`'s executor image (its own `image`, else trainer.image, by its hardware and the region); with
        `trainer.build`, the base of the image built for it. The request and the artifacts planner read this."""
        return executor_image_uri(pool.image or self.trainer.image, pool.hardware, self.region)

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
