"""What Vertex AI custom training accepts: one table of machines, accelerators, TPUs, images and regions, each
row with the Google page it comes from and the day it was checked (:mod:`vtrain.catalog.sources`).

Plain data and small lookups only, so `validate` and `render` never import a Google library. The rules
(`validate`), the request's defaults (`render`: a boot disk's type), the emulator's create checks and the
advisor (`estimate`) all read it, and `vtrain catalog` prints it (``--json`` for other tools). When Google
adds hardware, a row here is the one change.

- :mod:`~vtrain.catalog.accelerators`: every AcceleratorType value (offered, or retired with the reason),
  TPU generations;
- :mod:`~vtrain.catalog.machines`: every machine type, with its architecture, boot disks and NIC;
- :mod:`~vtrain.catalog.shapes`: the one verdict on a machine shape and a boot disk;
- :mod:`~vtrain.catalog.images`: the prebuilt training and prediction images, with TensorFlow and Python;
- :mod:`~vtrain.catalog.capacity`: scheduling strategies and reservation forms;
- :mod:`~vtrain.catalog.regions`, :mod:`~vtrain.catalog.document` (the JSON document and its schema).

The names below are the lookups the rest of vtrain uses.
"""

from __future__ import annotations

from vtrain.catalog import sources as sources
from vtrain.catalog.accelerators import ACCELERATORS, BY_ENUM, OFFERED, TPU_GENERATIONS, TpuGeneration
from vtrain.catalog.accelerators import normalize_accelerator as normalize_accelerator
from vtrain.catalog.images import (
    DEFAULT_TF_VERSION,
    IMAGE_ALIAS_RE,
    IMAGE_REGISTRY,
    PREBUILT_TF,
    PREBUILT_URI_RE,
    REDUCTION_SERVER_DEFAULT_MACHINE,
    REDUCTION_SERVER_IMAGE,
    PrebuiltImage,
    default_tf_version,
    executor_image_uri,
    prebuilt_image,
    prebuilt_image_uri,
    prebuilt_python,
    reduction_server_image,
    tf_version_tuple,
)
from vtrain.catalog.machines import (
    ARM,
    BOOT_DISK_GB,
    BOOT_DISK_TYPES,
    CLOUD_TPU,
    CLOUD_TPU_CORES,
    CLOUD_TPU_POD_STEP,
    MACHINES,
    N1_GPU_EXCLUDED,
    N1_GPUS,
    OCI_ARCH,
    X86,
    Machine,
)
from vtrain.catalog.regions import REGIONS, multi_region

# --------------------------------------------------------------------------- accelerators

GPU_TYPES: tuple[str, ...] = tuple(a.enum for a in ACCELERATORS if a.kind == "gpu" and a.status == OFFERED)
TPU_TYPES: tuple[str, ...] = tuple(a.enum for a in ACCELERATORS if a.kind == "tpu" and a.status == OFFERED)
#: Every AcceleratorType value a job file may name (a retired one is known, and refused with its reason).
ACCELERATOR_TYPES = GPU_TYPES + TPU_TYPES
#: Short, case-insensitive aliases users may write instead of the enum name.
ACCELERATOR_ALIASES: dict[str, str] = {alias: a.enum for a in ACCELERATORS for alias in a.aliases}


def accelerator_spellings() -> list[str]:
    """Everything accepted as an accelerator, for did-you-mean suggestions."""
    return list(ACCELERATOR_TYPES) + [k for k, v in ACCELERATOR_ALIASES.items() if v in ACCELERATOR_TYPES]


# --------------------------------------------------------------------------- machines

GpuMachine = TpuVmMachine = Machine  # the old row types: one row type now
GPU_MACHINES: dict[str, Machine] = {n: m for n, m in MACHINES.items() if m.kind == "gpu"}
TPU_VM_MACHINES: dict[str, Machine] = {n: m for n, m in MACHINES.items() if m.kind == "tpu" and m.generation}
CPU_MACHINES: dict[str, int] = {n: m.vcpus for n, m in MACHINES.items() if m.kind == "cpu" and m.vcpus}
SPOT_OR_FLEX_ONLY = frozenset(n for n, m in MACHINES.items() if m.spot_or_flex_only)
CLOUD_TPU_COUNTS = (CLOUD_TPU_CORES,)
ALL_MACHINE_TYPES: tuple[str, ...] = tuple(CPU_MACHINES) + tuple(GPU_MACHINES) + tuple(TPU_VM_MACHINES) + (CLOUD_TPU,)


def is_tpu_machine(machine_type: str) -> bool:
    return machine_type == CLOUD_TPU or machine_type in TPU_VM_MACHINES


def vcpus(machine_type: str) -> int | None:
    """vCPUs of a general-purpose machine type; None for accelerator-optimized types."""
    return CPU_MACHINES.get(machine_type)


def nic_gbps(machine_type: str) -> float:
    """Published maximum egress bandwidth (Gbps) of one VM of this type; KeyError for an unknown type.
    GPUs attached to N1 are ignored, although N1 with T4/V100 can reach 100 Gbps."""
    return MACHINES[machine_type].nic_gbps


def gpus_per_machine(machine_type: str, accelerator_count: int = 0) -> int:
    """GPUs one replica of this machine has (fixed by A2/A3/G2 types, else the count given)."""
    row = MACHINES.get(machine_type)
    return row.count if row is not None and row.kind == "gpu" else accelerator_count


def host_memory_gb(machine_type: str) -> float | None:
    """Host RAM (GB) of a general-purpose machine type; None for types not in the tables."""
    row = MACHINES.get(machine_type)
    return row.memory_gb if row is not None and row.kind == "cpu" else None


def tpu_generation(machine_type: str, accelerator: str | None) -> str | None:
    """'v2', 'v3', 'v4', 'v5p', 'v5e', 'v6e' for a TPU pool; None for anything else."""
    if machine_type in TPU_VM_MACHINES:
        return TPU_VM_MACHINES[machine_type].generation
    if machine_type == CLOUD_TPU:
        return next((g.name for g in TPU_GENERATIONS.values() if accelerator and g.enum == accelerator), None)
    return None


# --------------------------------------------------------------------------- accelerator memory

#: Memory of one GPU in GB and its CUDA compute capability (bf16 math needs 8.0, fp16 tensor cores 7.0).
GPU_MEMORY: dict[str, tuple[float, tuple[int, int]]] = {
    a.enum: (a.memory_gb, a.capability) for a in ACCELERATORS if a.memory_gb is not None and a.capability}
TpuMemory = TpuGeneration  # hbm_gib, cores_per_chip
#: TPU HBM per chip (GiB) and TensorCores per chip, by generation.
TPU_MEMORY: dict[str, TpuGeneration] = TPU_GENERATIONS

__all__ = [
    "ACCELERATORS", "ACCELERATOR_ALIASES", "ACCELERATOR_TYPES", "ALL_MACHINE_TYPES", "ARM", "BOOT_DISK_GB",
    "BOOT_DISK_TYPES", "BY_ENUM", "CLOUD_TPU", "CLOUD_TPU_COUNTS", "CLOUD_TPU_POD_STEP", "CPU_MACHINES",
    "DEFAULT_TF_VERSION", "GPU_MACHINES", "GPU_MEMORY", "GPU_TYPES", "IMAGE_ALIAS_RE", "IMAGE_REGISTRY", "MACHINES",
    "N1_GPUS", "N1_GPU_EXCLUDED", "OCI_ARCH", "OFFERED", "PREBUILT_TF", "PREBUILT_URI_RE",
    "REDUCTION_SERVER_DEFAULT_MACHINE", "REDUCTION_SERVER_IMAGE", "REGIONS", "SPOT_OR_FLEX_ONLY", "TPU_GENERATIONS",
    "TPU_MEMORY", "TPU_TYPES", "TPU_VM_MACHINES", "X86", "GpuMachine", "Machine", "PrebuiltImage", "TpuMemory",
    "TpuVmMachine", "accelerator_spellings", "default_tf_version", "executor_image_uri", "gpus_per_machine",
    "host_memory_gb", "is_tpu_machine", "multi_region", "nic_gbps", "normalize_accelerator", "prebuilt_image",
    "prebuilt_image_uri", "prebuilt_python", "reduction_server_image", "tf_version_tuple", "tpu_generation", "vcpus",
]
