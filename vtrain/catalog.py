"""What Vertex AI custom training accepts: machines, accelerators, TPUs, images, bandwidth.

Plain data and small lookups only, so `validate` and `render` never import a
Google library. Each table says where its numbers come from; when Google adds
hardware, this is the one file to change. Bandwidths are published maximum
egress figures per VM and are used for Reduction Server sizing and estimates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# --------------------------------------------------------------------------- accelerators

#: Every AcceleratorType enum value vtrain can emit (aiplatform_v1.AcceleratorType).
GPU_TYPES = (
    "NVIDIA_TESLA_T4",
    "NVIDIA_TESLA_P4",
    "NVIDIA_TESLA_P100",
    "NVIDIA_TESLA_V100",
    "NVIDIA_TESLA_A100",
    "NVIDIA_A100_80GB",
    "NVIDIA_L4",
    "NVIDIA_H100_80GB",
    "NVIDIA_H100_MEGA_80GB",
    "NVIDIA_H200_141GB",
    "NVIDIA_B200",
    "NVIDIA_GB200",
    "NVIDIA_RTX_PRO_6000",
)
TPU_TYPES = ("TPU_V2", "TPU_V3")
ACCELERATOR_TYPES = GPU_TYPES + TPU_TYPES

#: Short, case-insensitive aliases users may write instead of the enum name.
ACCELERATOR_ALIASES: dict[str, str] = {
    "t4": "NVIDIA_TESLA_T4",
    "p4": "NVIDIA_TESLA_P4",
    "p100": "NVIDIA_TESLA_P100",
    "v100": "NVIDIA_TESLA_V100",
    "a100": "NVIDIA_TESLA_A100",
    "a100-40gb": "NVIDIA_TESLA_A100",
    "a100-80gb": "NVIDIA_A100_80GB",
    "a100_80gb": "NVIDIA_A100_80GB",
    "l4": "NVIDIA_L4",
    "h100": "NVIDIA_H100_80GB",
    "h100-80gb": "NVIDIA_H100_80GB",
    "h100-mega": "NVIDIA_H100_MEGA_80GB",
    "h100-mega-80gb": "NVIDIA_H100_MEGA_80GB",
    "h200": "NVIDIA_H200_141GB",
    "b200": "NVIDIA_B200",
    "gb200": "NVIDIA_GB200",
    "rtx-pro-6000": "NVIDIA_RTX_PRO_6000",
    "rtx_pro_6000": "NVIDIA_RTX_PRO_6000",
    "tpu-v2": "TPU_V2",
    "tpu_v2": "TPU_V2",
    "v2": "TPU_V2",
    "tpu-v3": "TPU_V3",
    "tpu_v3": "TPU_V3",
    "v3": "TPU_V3",
}


def normalize_accelerator(value: str) -> str | None:
    """Enum name for an accelerator given by enum name or alias; None if unknown."""
    upper = value.strip().upper()
    if upper in ACCELERATOR_TYPES:
        return upper
    return ACCELERATOR_ALIASES.get(value.strip().lower())


def accelerator_spellings() -> list[str]:
    """Everything accepted as an accelerator, for did-you-mean suggestions."""
    return list(ACCELERATOR_TYPES) + list(ACCELERATOR_ALIASES)


# --------------------------------------------------------------------------- machines


@dataclass(frozen=True)
class GpuMachine:
    """A machine type whose GPUs are fixed by the type (A2, A3, A4, A4X, G2, G4)."""

    accelerator: str
    count: int
    nic_gbps: float


#: Accelerator-optimized machine types: the GPU type and count are part of the machine.
#: Types and counts: https://cloud.google.com/vertex-ai/docs/training/configure-compute#gpu-compatibility-table
#: NIC maxima: https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth (series maxima A4X 2000,
#: A4/A3 Ultra 3600, A3 Mega 1800, A3 High 1000, A2/G2 100, G4 400; a2-megagpu-16g 100 per the Reduction
#: Server page). Per-type figures below the series maximum (A2 1g-4g, A3 1g-4g, G2, G4) are not re-checked.
GPU_MACHINES: dict[str, GpuMachine] = {
    # A2 (A100 40 GB): 24/32/50/100 Gbps.
    "a2-highgpu-1g": GpuMachine("NVIDIA_TESLA_A100", 1, 24),
    "a2-highgpu-2g": GpuMachine("NVIDIA_TESLA_A100", 2, 32),
    "a2-highgpu-4g": GpuMachine("NVIDIA_TESLA_A100", 4, 50),
    "a2-highgpu-8g": GpuMachine("NVIDIA_TESLA_A100", 8, 100),
    "a2-megagpu-16g": GpuMachine("NVIDIA_TESLA_A100", 16, 100),
    # A2 ultra (A100 80 GB).
    "a2-ultragpu-1g": GpuMachine("NVIDIA_A100_80GB", 1, 24),
    "a2-ultragpu-2g": GpuMachine("NVIDIA_A100_80GB", 2, 32),
    "a2-ultragpu-4g": GpuMachine("NVIDIA_A100_80GB", 4, 50),
    "a2-ultragpu-8g": GpuMachine("NVIDIA_A100_80GB", 8, 100),
    # A3 (H100 80 GB); 1g/2g/4g are offered for Spot and flex-start capacity only.
    "a3-highgpu-1g": GpuMachine("NVIDIA_H100_80GB", 1, 50),
    "a3-highgpu-2g": GpuMachine("NVIDIA_H100_80GB", 2, 100),
    "a3-highgpu-4g": GpuMachine("NVIDIA_H100_80GB", 4, 100),
    "a3-highgpu-8g": GpuMachine("NVIDIA_H100_80GB", 8, 1000),
    "a3-megagpu-8g": GpuMachine("NVIDIA_H100_MEGA_80GB", 8, 1800),
    # A3 ultra (H200 141 GB), A4 (B200), A4X (GB200).
    "a3-ultragpu-8g": GpuMachine("NVIDIA_H200_141GB", 8, 3600),
    "a4-highgpu-8g": GpuMachine("NVIDIA_B200", 8, 3600),
    "a4x-highgpu-4g": GpuMachine("NVIDIA_GB200", 4, 2000),
    # G2 (L4).
    "g2-standard-4": GpuMachine("NVIDIA_L4", 1, 10),
    "g2-standard-8": GpuMachine("NVIDIA_L4", 1, 16),
    "g2-standard-12": GpuMachine("NVIDIA_L4", 1, 16),
    "g2-standard-16": GpuMachine("NVIDIA_L4", 1, 32),
    "g2-standard-24": GpuMachine("NVIDIA_L4", 2, 32),
    "g2-standard-32": GpuMachine("NVIDIA_L4", 1, 32),
    "g2-standard-48": GpuMachine("NVIDIA_L4", 4, 50),
    "g2-standard-96": GpuMachine("NVIDIA_L4", 8, 100),
    # G4 (RTX PRO 6000).
    "g4-standard-48": GpuMachine("NVIDIA_RTX_PRO_6000", 1, 50),
    "g4-standard-96": GpuMachine("NVIDIA_RTX_PRO_6000", 2, 100),
    "g4-standard-192": GpuMachine("NVIDIA_RTX_PRO_6000", 4, 200),
    "g4-standard-384": GpuMachine("NVIDIA_RTX_PRO_6000", 8, 400),
}

#: Machine types that exist only for Spot or flex-start capacity (Compute Engine A3 High; the Vertex
#: compute page does not say so, hence only a warning in the rules).
SPOT_OR_FLEX_ONLY = frozenset({"a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"})

#: GPUs attachable to N1 machines: legal counts, and the most vCPUs allowed with each count. Vertex's
#: compatibility table is stricter than Compute Engine (no n1-*-32 with one T4; 4 × P100 give at most
#: 64 vCPUs and 208 GB): https://cloud.google.com/vertex-ai/docs/training/configure-compute#gpu-compatibility-table
N1_GPUS: dict[str, dict[int, int]] = {
    "NVIDIA_TESLA_T4": {1: 24, 2: 48, 4: 96},
    "NVIDIA_TESLA_P4": {1: 24, 2: 48, 4: 96},
    "NVIDIA_TESLA_P100": {1: 16, 2: 32, 4: 64},
    "NVIDIA_TESLA_V100": {1: 12, 2: 24, 4: 48, 8: 96},
}

#: N1 machines within the vCPU limit that the table still refuses (too much memory: 4 × P100 ≤ 208 GB).
N1_GPU_EXCLUDED: dict[str, frozenset[str]] = {
    "NVIDIA_TESLA_P100": frozenset({"n1-standard-64", "n1-highmem-64"}),
}

#: General-purpose families Vertex training accepts: family -> (shapes -> vCPU counts, NIC cap Gbps).
#: Machine list: https://cloud.google.com/vertex-ai/docs/training/configure-compute#machine-types
_CPU_FAMILIES: dict[str, tuple[dict[str, tuple[int, ...]], float]] = {
    "n1": (
        {
            "standard": (4, 8, 16, 32, 64, 96),
            "highmem": (2, 4, 8, 16, 32, 64, 96),
            "highcpu": (16, 32, 64, 96),
        },
        32,
    ),
    "n2": (
        {
            "standard": (4, 8, 16, 32, 48, 64, 80),
            "highmem": (2, 4, 8, 16, 32, 48, 64, 80),
            "highcpu": (16, 32, 48, 64, 80),
        },
        32,
    ),
    "n4": (
        {
            "standard": (2, 4, 8, 16, 32, 48, 64, 80),
            "highmem": (2, 4, 8, 16, 32, 48, 64, 80),
            "highcpu": (2, 4, 8, 16, 32, 48, 64, 80),
        },
        50,
    ),
    "e2": ({"standard": (4, 8, 16, 32), "highmem": (2, 4, 8, 16), "highcpu": (16, 32)}, 16),
    "c2": ({"standard": (4, 8, 16, 30, 60)}, 32),
    "m1": ({"ultramem": (40, 80, 160), "megamem": (96,)}, 32),
}

#: Families whose small shapes still get 10 Gbps: n2-standard-2/4 are "up to 10 Gbps" in the N2 table of
#: https://cloud.google.com/cluster-director/docs/compute (N1/C2 likely alike, not re-checked). The N4
#: floor and 50 Gbps cap are from memory, not re-checked.
_NIC_FLOOR_GBPS: dict[str, float] = {"n2": 10, "n4": 10}

CPU_MACHINES: dict[str, int] = {
    f"{family}-{shape}-{vcpus}": vcpus
    for family, (shapes, _cap) in _CPU_FAMILIES.items()
    for shape, counts in shapes.items()
    for vcpus in counts
}


@dataclass(frozen=True)
class TpuVmMachine:
    """A TPU VM machine type: chips per host and the topologies Vertex accepts for it."""

    generation: str
    chips: int
    topologies: tuple[str, ...]
    nic_gbps: float


#: Legacy TPU nodes: machine `cloud-tpu` with an accelerator type and count. TPU rules and the v5e/v6e
#: topologies: https://cloud.google.com/vertex-ai/docs/training/configure-compute#tpu
CLOUD_TPU = "cloud-tpu"
CLOUD_TPU_COUNTS = (8,)  # a single v2-8 / v3-8 device; pods are sized in multiples of 32.
CLOUD_TPU_POD_STEP = 32

#: TPU VM machine types (v4, v5p, v5e "lite pod", v6e): the topology picks single- or multi-host slices.
#: NIC figures are not re-checked against the Compute Engine TPU tables, except v5p's (50 Gbps of data
#: center network per chip, https://cloud.google.com/tpu/docs/v5p). v4 and v5p are 3D tori with 4 chips per
#: host: v5p's shapes are the "most common single-slice shapes" table of https://cloud.google.com/tpu/docs/v5p
#: (2x2x1 to 16x16x24, the largest); v4's are the slice shapes of https://cloud.google.com/tpu/docs/v4 (not
#: re-read for this table: the search tool did not return that page, so a shape Vertex refuses is possible).
#: Vertex training takes them as machine types ct4p-hightpu-4t / ct5p-hightpu-4t with tpuTopology
#: (https://cloud.google.com/vertex-ai/docs/training/configure-compute#tpu).
_V5P_TOPOLOGIES = ("2x2x1", "2x2x2", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16", "8x16x16", "16x16x16",
                   "16x16x24")
_V4_TOPOLOGIES = ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x12", "8x8x16",
                  "8x16x16", "12x16x16", "16x16x16")
TPU_VM_MACHINES: dict[str, TpuVmMachine] = {
    "ct4p-hightpu-4t": TpuVmMachine("v4", 4, _V4_TOPOLOGIES, 100),
    "ct5p-hightpu-4t": TpuVmMachine("v5p", 4, _V5P_TOPOLOGIES, 200),
    "ct5lp-hightpu-1t": TpuVmMachine("v5e", 1, ("1x1",), 50),
    "ct5lp-hightpu-4t": TpuVmMachine("v5e", 4, ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"), 100),
    "ct5lp-hightpu-8t": TpuVmMachine("v5e", 8, ("2x4",), 100),
    "ct6e-standard-1t": TpuVmMachine("v6e", 1, ("1x1",), 100),
    "ct6e-standard-4t": TpuVmMachine("v6e", 4, ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"), 200),
    "ct6e-standard-8t": TpuVmMachine("v6e", 8, ("2x4",), 200),
}

ALL_MACHINE_TYPES: tuple[str, ...] = (
    tuple(CPU_MACHINES) + tuple(GPU_MACHINES) + tuple(TPU_VM_MACHINES) + (CLOUD_TPU,)
)


def is_tpu_machine(machine_type: str) -> bool:
    return machine_type == CLOUD_TPU or machine_type in TPU_VM_MACHINES


def vcpus(machine_type: str) -> int | None:
    """vCPUs of a general-purpose machine type; None for accelerator-optimized types."""
    return CPU_MACHINES.get(machine_type)


def nic_gbps(machine_type: str) -> float:
    """Published maximum egress bandwidth (Gbps) of one VM of this type.

    N1/N2/C2 get 2 Gbps per vCPU up to 32 Gbps (N2 at least 10), E2 up to 16 Gbps;
    accelerator machines carry their own figure. GPUs attached to N1 are ignored,
    although N1 with T4/V100 can reach 100 Gbps. Raises KeyError for an unknown type.
    """
    if machine_type in GPU_MACHINES:
        return GPU_MACHINES[machine_type].nic_gbps
    if machine_type in TPU_VM_MACHINES:
        return TPU_VM_MACHINES[machine_type].nic_gbps
    if machine_type in CPU_MACHINES:
        family = machine_type.split("-", 1)[0]
        cap = _CPU_FAMILIES[family][1]
        return float(min(max(2 * CPU_MACHINES[machine_type], _NIC_FLOOR_GBPS.get(family, 0)), cap))
    if machine_type == CLOUD_TPU:
        return 32.0
    raise KeyError(machine_type)


def gpus_per_machine(machine_type: str, accelerator_count: int = 0) -> int:
    """GPUs one replica of this machine has (fixed by A2/A3/G2 types, else the count given)."""
    if machine_type in GPU_MACHINES:
        return GPU_MACHINES[machine_type].count
    return accelerator_count


# --------------------------------------------------------------------------- accelerator memory

#: Memory of one GPU, in GB (10^9 bytes), and its CUDA compute capability (bf16 math needs 8.0,
#: fp16 tensor cores 7.0). Memory: https://cloud.google.com/compute/docs/gpus (H100 640 GB HBM3 per
#: a3-highgpu-8g, A100 40/80 GB, L4 24, T4 16, V100 16, P4 8 checked; H200 141, B200 180, GB200 186,
#: RTX PRO 6000 96 and P100 16 from the same page, not re-checked). Compute capability:
#: https://developer.nvidia.com/cuda-gpus
GPU_MEMORY: dict[str, tuple[float, tuple[int, int]]] = {
    "NVIDIA_TESLA_T4": (16, (7, 5)),
    "NVIDIA_TESLA_P4": (8, (6, 1)),
    "NVIDIA_TESLA_P100": (16, (6, 0)),
    "NVIDIA_TESLA_V100": (16, (7, 0)),
    "NVIDIA_TESLA_A100": (40, (8, 0)),
    "NVIDIA_A100_80GB": (80, (8, 0)),
    "NVIDIA_L4": (24, (8, 9)),
    "NVIDIA_H100_80GB": (80, (9, 0)),
    "NVIDIA_H100_MEGA_80GB": (80, (9, 0)),
    "NVIDIA_H200_141GB": (141, (9, 0)),
    "NVIDIA_B200": (180, (10, 0)),
    "NVIDIA_GB200": (186, (10, 0)),
    "NVIDIA_RTX_PRO_6000": (96, (12, 0)),
}


@dataclass(frozen=True)
class TpuMemory:
    """HBM of one TPU chip and how many TensorCores share it (TF runs one replica per core)."""

    hbm_gib: float
    cores_per_chip: int


#: TPU HBM per chip by generation: v3 32 GiB and 2 TensorCores (https://cloud.google.com/tpu/docs/v3),
#: v5e 16 GB and 1 (https://cloud.google.com/tpu/docs/v5e), v6e 32 GB and 1
#: (https://cloud.google.com/tpu/docs/v6e); v2 16 GiB and 2 (https://cloud.google.com/tpu/docs/v2, not re-checked).
#: v5p: 95 GiB usable HBM (https://cloud.google.com/tpu/docs/v5p); v4: 32 GiB (https://cloud.google.com/tpu/docs/v4,
#: not re-checked). Both have 2 TensorCores per chip run as one "megacore" device, so TF sees one device a chip.
TPU_MEMORY: dict[str, TpuMemory] = {
    "v2": TpuMemory(16, 2),
    "v3": TpuMemory(32, 2),
    "v4": TpuMemory(32, 1),
    "v5p": TpuMemory(95, 1),
    "v5e": TpuMemory(16 * 1e9 / 2**30, 1),
    "v6e": TpuMemory(32 * 1e9 / 2**30, 1),
}

#: Host memory per vCPU (GB) of the general-purpose shapes, for CPU-only replicas:
#: https://cloud.google.com/compute/docs/general-purpose-machines (N1 3.75 / 6.5 / 0.9, N2 and E2 4 / 8 / 1,
#: N4 4 / 8 / 2, C2 4). M1 totals: https://cloud.google.com/compute/docs/memory-optimized-machines.
_GB_PER_VCPU: dict[str, dict[str, float]] = {
    "n1": {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9},
    "n2": {"standard": 4, "highmem": 8, "highcpu": 1},
    "n4": {"standard": 4, "highmem": 8, "highcpu": 2},
    "e2": {"standard": 4, "highmem": 8, "highcpu": 1},
    "c2": {"standard": 4},
}
_M1_GB = {"m1-ultramem-40": 961, "m1-ultramem-80": 1922, "m1-ultramem-160": 3844, "m1-megamem-96": 1433.6}


def host_memory_gb(machine_type: str) -> float | None:
    """Host RAM (GB) of a general-purpose machine type; None for types not in the tables."""
    if machine_type in _M1_GB:
        return _M1_GB[machine_type]
    if machine_type not in CPU_MACHINES:
        return None
    family, shape, _ = machine_type.split("-")
    per_vcpu = _GB_PER_VCPU.get(family, {}).get(shape)
    return None if per_vcpu is None else per_vcpu * CPU_MACHINES[machine_type]


def tpu_generation(machine_type: str, accelerator: str | None) -> str | None:
    """'v2', 'v3', 'v4', 'v5p', 'v5e', 'v6e' for a TPU pool; None for anything else."""
    if machine_type in TPU_VM_MACHINES:
        return TPU_VM_MACHINES[machine_type].generation
    if machine_type == CLOUD_TPU and accelerator in TPU_TYPES:
        return accelerator.removeprefix("TPU_").lower()
    return None


# --------------------------------------------------------------------------- images

IMAGE_REGISTRY = "docker.pkg.dev/vertex-ai/training"

#: Prebuilt TensorFlow training images Vertex publishes: version -> Python suffix ("" for none), per
#: family. TPU images stop at 2.15 and are named tf-tpu.2-15.cp310 (2.12: tf-tpu.2-12, Python 3.8):
#: https://cloud.google.com/vertex-ai/docs/training/pre-built-containers#tensorflow
PREBUILT_TF: dict[str, dict[str, str]] = {
    "cpu": {f"2-{n}": "py310" for n in range(12, 18)},
    "gpu": {f"2-{n}": "py310" for n in range(12, 18)},
    "tpu": {"2-12": "", "2-15": "cp310"},
}
DEFAULT_TF_VERSION = "2-17"

#: Image alias grammar: `tf-cpu.2-17`, `tf-gpu.2-17`, `tf-tpu.2-15`, or `tf.2-17` (pick per pool).
IMAGE_ALIAS_RE = re.compile(r"^tf(?:-(?P<family>cpu|gpu|tpu))?\.(?P<version>2-\d+)$")
#: A full prebuilt URI, so rules can check the family and version of images given in full.
PREBUILT_URI_RE = re.compile(
    r"^(?P<multi>us|europe|asia)-docker\.pkg\.dev/vertex-ai/training/"
    r"tf-(?P<family>cpu|gpu|tpu)\.(?P<version>2-\d+)(?:\.(?:py|cp)\d+)?:latest$"
)

#: https://cloud.google.com/vertex-ai/docs/training/distributed-training#reduction-server (n1-highcpu-16 is
#: the recommended reducer; reducers' total bandwidth should match chief + workers').
REDUCTION_SERVER_IMAGE = "{multi}-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
REDUCTION_SERVER_DEFAULT_MACHINE = "n1-highcpu-16"


def multi_region(region: str) -> str:
    """The Artifact Registry multi-region (us, europe, asia) nearest a Vertex region."""
    prefix = region.split("-", 1)[0]
    if prefix in {"europe", "me", "africa"}:
        return "europe"
    if prefix in {"asia", "australia"}:
        return "asia"
    return "us"


def prebuilt_image_uri(family: str, version: str, region: str) -> str:
    suffix = PREBUILT_TF[family][version]
    tag = f"{version}.{suffix}" if suffix else version
    return f"{multi_region(region)}-{IMAGE_REGISTRY}/tf-{family}.{tag}:latest"


def default_tf_version(family: str) -> str:
    """The version an unset trainer.image gets: DEFAULT_TF_VERSION, or the family's newest if it lacks it."""
    versions = PREBUILT_TF[family]
    return DEFAULT_TF_VERSION if DEFAULT_TF_VERSION in versions else max(versions, key=tf_version_tuple)


def executor_image_uri(image: str | None, hardware: str, region: str) -> str:
    """The image a python-package pool on `hardware` (cpu, gpu, tpu) runs: `trainer.image` as an alias
    (`tf.` picks the family by hardware) → the regional prebuilt URI; left out, each family's default."""
    if image is None:  # no TPU image has DEFAULT_TF_VERSION: each family gets its own default
        return prebuilt_image_uri(hardware, default_tf_version(hardware), region)
    alias = IMAGE_ALIAS_RE.match(image)
    if alias is None:
        return image
    return prebuilt_image_uri(alias["family"] or hardware, alias["version"], region)


def prebuilt_python(uri: str) -> str | None:
    """MAJOR.MINOR of a prebuilt image's Python, from its name (tf-gpu.2-17.py310 → 3.10); None otherwise."""
    if PREBUILT_URI_RE.match(uri) is None:
        return None
    found = re.search(r"\.(?:py|cp)3(\d+):", uri)
    return f"3.{found.group(1)}" if found else None


def reduction_server_image(region: str) -> str:
    return REDUCTION_SERVER_IMAGE.format(multi=multi_region(region))


def tf_version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split("-")
    return int(major), int(minor)


# --------------------------------------------------------------------------- regions

#: Regions where Vertex AI custom training runs (used for did-you-mean, not as a hard allow-list;
#: not re-checked against the locations page).
REGIONS = (
    "us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2",
    "us-west3", "us-west4", "northamerica-northeast1", "northamerica-northeast2",
    "southamerica-east1", "southamerica-west1", "europe-central2", "europe-north1",
    "europe-southwest1", "europe-west1", "europe-west2", "europe-west3", "europe-west4",
    "europe-west6", "europe-west8", "europe-west9", "europe-west12", "me-central1",
    "me-central2", "me-west1", "africa-south1", "asia-east1", "asia-east2", "asia-northeast1",
    "asia-northeast2", "asia-northeast3", "asia-south1", "asia-southeast1", "asia-southeast2",
    "australia-southeast1", "australia-southeast2",
)  # fmt: skip
