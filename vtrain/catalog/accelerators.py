"""The accelerators: one row per value of Vertex's AcceleratorType (GPUs, TPUs), and one per TPU generation.

A row says what vtrain knows of the value and where from: the aliases a job file may write, one GPU's
memory and CUDA capability (for the advisor), its MIG partition sizes, whether flex-start is documented
for it, the quota metric Vertex counts it in, and its status: ``offered``, or ``retired`` with the reason
(NVIDIA_TESLA_K80: deprecated in the enum, past end of support). Every AcceleratorType value of the
installed protos and of the Discovery document is a row here (a test holds it).

TPU generations (v2 ... v6e) carry their HBM, TensorCores a chip, the AcceleratorType value that names them
where there is one, and whether Google documents TensorFlow on them for Vertex training.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtrain.catalog import sources as src
from vtrain.catalog.sources import Source

OFFERED, RETIRED = "offered", "retired"


@dataclass(frozen=True)
class Accelerator:
    enum: str
    kind: str  # "gpu" or "tpu"
    aliases: tuple[str, ...] = ()
    memory_gb: float | None = None  # one GPU's memory, GB (10^9 bytes)
    capability: tuple[int, int] | None = None  # CUDA compute capability
    mig: tuple[str, ...] = ()  # MIG partition sizes (gpu_partition_size)
    flex_start: bool = False  # Dynamic Workload Scheduler documents it
    quota: str | None = None  # the custom_model_training_<quota> metric; None: not known
    status: str = OFFERED
    reason: str = ""  # why a retired value is refused, and what to use instead
    source: Source = src.ACCELERATOR_ENUM

    def as_dict(self) -> dict[str, object]:
        return {"name": self.enum, "kind": self.kind, "aliases": list(self.aliases), "memory_gb": self.memory_gb,
                "compute_capability": ".".join(map(str, self.capability)) if self.capability else None,
                "mig_partitions": list(self.mig), "flex_start": self.flex_start, "quota_metric": self.quota,
                "status": self.status, "reason": self.reason or None, **self.source.as_dict()}


_A100_40 = ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
_80GB = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")

#: Every AcceleratorType value but ACCELERATOR_TYPE_UNSPECIFIED, in the enum's order. Memory, capability and
#: MIG sizes have their own pages (sources.GPUS, CUDA_GPUS, MIG); the row's source is where the value is listed.
ACCELERATORS: tuple[Accelerator, ...] = (
    Accelerator("NVIDIA_TESLA_K80", "gpu", ("k80",), quota="nvidia_k80_gpus", status=RETIRED,
                reason="NVIDIA_TESLA_K80 has reached end of support (the API marks it deprecated; "
                       f"{src.K80_EOL.url}); use NVIDIA_TESLA_T4 on n1-* or NVIDIA_L4 on g2-standard-*"),
    Accelerator("NVIDIA_TESLA_P100", "gpu", ("p100",), 16, (6, 0), quota="nvidia_p100_gpus"),
    Accelerator("NVIDIA_TESLA_V100", "gpu", ("v100",), 16, (7, 0), quota="nvidia_v100_gpus"),
    Accelerator("NVIDIA_TESLA_P4", "gpu", ("p4",), 8, (6, 1), quota="nvidia_p4_gpus"),
    Accelerator("NVIDIA_TESLA_T4", "gpu", ("t4",), 16, (7, 5), quota="nvidia_t4_gpus"),
    Accelerator("NVIDIA_TESLA_A100", "gpu", ("a100", "a100-40gb"), 40, (8, 0), _A100_40, True, "nvidia_a100_gpus"),
    Accelerator("NVIDIA_A100_80GB", "gpu", ("a100-80gb", "a100_80gb"), 80, (8, 0), _80GB, True,
                "nvidia_a100_80gb_gpus"),
    Accelerator("NVIDIA_L4", "gpu", ("l4",), 24, (8, 9), flex_start=True, quota="nvidia_l4_gpus"),
    Accelerator("NVIDIA_H100_80GB", "gpu", ("h100", "h100-80gb"), 80, (9, 0), _80GB, True, "nvidia_h100_gpus"),
    Accelerator("NVIDIA_H100_MEGA_80GB", "gpu", ("h100-mega", "h100-mega-80gb"), 80, (9, 0), _80GB, True,
                "nvidia_h100_mega_gpus"),
    Accelerator("NVIDIA_H200_141GB", "gpu", ("h200",), 141, (9, 0),
                ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"), True, "nvidia_h200_gpus"),
    Accelerator("NVIDIA_B200", "gpu", ("b200",), 180, (10, 0), flex_start=True, quota="nvidia_b200_gpus"),
    Accelerator("NVIDIA_GB200", "gpu", ("gb200",), 186, (10, 0)),
    Accelerator("NVIDIA_RTX_PRO_6000", "gpu", ("rtx-pro-6000", "rtx_pro_6000"), 96, (12, 0)),
    Accelerator("TPU_V2", "tpu", ("tpu-v2", "tpu_v2", "v2"), quota="tpu_v2"),
    Accelerator("TPU_V3", "tpu", ("tpu-v3", "tpu_v3", "v3"), quota="tpu_v3"),
    Accelerator("TPU_V4_POD", "tpu", ("tpu-v4", "tpu_v4", "v4"), quota="tpu_v4_pod"),
    Accelerator("TPU_V5_LITEPOD", "tpu", ("tpu-v5e", "tpu_v5e", "v5e", "tpu-v5-litepod"), quota="tpu_v5_litepod"),
)
BY_ENUM: dict[str, Accelerator] = {a.enum: a for a in ACCELERATORS}


@dataclass(frozen=True)
class TpuGeneration:
    """HBM of one chip and how many TensorCores share it (TF runs one replica per core; v4 and v5p run their
    two as one "megacore" device), the enum value that names the generation (None: the machine type does),
    and whether Google documents TensorFlow on it for Vertex training."""

    name: str
    hbm_gib: float
    cores_per_chip: int
    enum: str | None
    tensorflow: bool
    source: Source


#: TensorFlow: the Vertex TPU training page names v2, v3 and v5e (TensorFlow 2.15+) and, for v6e, JAX and
#: PyTorch only; v4 and v5p are not on it (sources.TPU_TRAINING).
TPU_GENERATIONS: dict[str, TpuGeneration] = {g.name: g for g in (
    TpuGeneration("v2", 16, 2, "TPU_V2", True, src.TPU_V2),
    TpuGeneration("v3", 32, 2, "TPU_V3", True, src.TPU_V3),
    TpuGeneration("v4", 32, 1, "TPU_V4_POD", False, src.TPU_V4),
    TpuGeneration("v5p", 95, 1, None, False, src.TPU_V5P),
    TpuGeneration("v5e", 16 * 1e9 / 2**30, 1, "TPU_V5_LITEPOD", True, src.TPU_V5E),
    TpuGeneration("v6e", 32 * 1e9 / 2**30, 1, None, False, src.TPU_V6E),
)}


def normalize_accelerator(value: str) -> str | None:
    """Enum name for an accelerator given by enum name or alias; None if unknown (a retired one is known)."""
    upper = value.strip().upper()
    if upper in BY_ENUM:
        return upper
    lower = value.strip().lower()
    return next((a.enum for a in ACCELERATORS if lower in a.aliases), None)


__all__ = ["ACCELERATORS", "BY_ENUM", "OFFERED", "RETIRED", "TPU_GENERATIONS", "Accelerator", "TpuGeneration",
           "normalize_accelerator"]
