"""The hardware Vertex AI custom training accepts at create time: the emulator's own table.

Written from Google's documentation, deliberately not from vtrain's `catalog.py` or
`jobfile/rules/` (tests/emulator/test_hardware.py holds the two tables against each other), so
a wrong entry in vtrain's rules cannot hide behind the same entry here. Sources:

- machine types for training: https://cloud.google.com/vertex-ai/docs/training/configure-compute#machine-types
- GPUs per machine (N1 counts and vCPU limits; A2/A3/A4/G2 fixed GPUs):
  https://cloud.google.com/vertex-ai/docs/training/configure-compute#gpu-compatibility-table and
  https://cloud.google.com/compute/docs/gpus (the Compute Engine GPU machine types)
- TPUs: https://cloud.google.com/vertex-ai/docs/training/configure-compute#tpu (cloud-tpu with 8 TPU_V2/
  TPU_V3 cores; TPU VMs ct4p-hightpu-4t (v4), ct5p-hightpu-4t (v5p), ct5lp-hightpu-*/ct6e-standard-* with
  tpuTopology)
- boot disks: DiskSpec (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/DiskSpec: pd-ssd,
  pd-standard, hyperdisk-balanced; default 100 GB) and configure-compute#boot_disk_options (100-64,000 GB)
- wording: Vertex answers `Accelerator "NVIDIA_TESLA_K80" is not supported for machine type
  "n1-standard-4"` (GoogleCloudPlatform/vertex-ai-samples#213) and `Both `accelerator_type` and
  `accelerator_count` should be specified or none.` (PrefectHQ/prefect-gcp#175). The other messages
  follow that pattern; their exact text is not confirmed (see docs/guides/emulator.md).
"""

from __future__ import annotations

from typing import Any

from google.cloud.aiplatform_v1.types import AcceleratorType

Problem = tuple[str, str]

# ---- general-purpose machines: family → shape → vCPU counts ----------------------------------------
_SHAPES: dict[str, dict[str, tuple[int, ...]]] = {
    "e2": {"standard": (4, 8, 16, 32), "highmem": (2, 4, 8, 16), "highcpu": (16, 32)},
    "n1": {"standard": (4, 8, 16, 32, 64, 96), "highmem": (2, 4, 8, 16, 32, 64, 96), "highcpu": (16, 32, 64, 96)},
    "n2": {"standard": (4, 8, 16, 32, 48, 64, 80), "highmem": (2, 4, 8, 16, 32, 48, 64, 80),
           "highcpu": (16, 32, 48, 64, 80)},
    "c2": {"standard": (4, 8, 16, 30, 60)},
    "m1": {"ultramem": (40, 80, 160), "megamem": (96,)},
}  # fmt: skip
VCPUS: dict[str, int] = {f"{fam}-{shape}-{n}": n for fam, shapes in _SHAPES.items()
                         for shape, counts in shapes.items() for n in counts}

#: GPUs on N1: GPU → count → the most vCPUs a machine may have with it (Vertex's compatibility table).
N1_GPU_VCPUS: dict[str, dict[int, int]] = {
    "NVIDIA_TESLA_T4": {1: 16, 2: 32, 4: 96},
    "NVIDIA_TESLA_P4": {1: 16, 2: 32, 4: 96},
    "NVIDIA_TESLA_P100": {1: 16, 2: 32, 4: 64},
    "NVIDIA_TESLA_V100": {1: 8, 2: 16, 4: 32, 8: 96},
}
#: N1 machines the table leaves out although their vCPUs fit (4 × P100: at most 208 GB of memory).
N1_GPU_EXCLUDED: dict[str, frozenset[str]] = {"NVIDIA_TESLA_P100": frozenset({"n1-standard-64", "n1-highmem-64"})}

# ---- accelerator-optimized machines: the GPU type and count come with the machine ----------------------
FIXED_GPUS: dict[str, tuple[str, int]] = {
    **{f"a2-highgpu-{n}g": ("NVIDIA_TESLA_A100", n) for n in (1, 2, 4, 8)},
    "a2-megagpu-16g": ("NVIDIA_TESLA_A100", 16),
    **{f"a2-ultragpu-{n}g": ("NVIDIA_A100_80GB", n) for n in (1, 2, 4, 8)},
    **{f"a3-highgpu-{n}g": ("NVIDIA_H100_80GB", n) for n in (1, 2, 4, 8)},
    "a3-megagpu-8g": ("NVIDIA_H100_MEGA_80GB", 8),
    "a3-ultragpu-8g": ("NVIDIA_H200_141GB", 8),
    "a4-highgpu-8g": ("NVIDIA_B200", 8),
    "a4x-highgpu-4g": ("NVIDIA_GB200", 4),
    **{f"g2-standard-{v}": ("NVIDIA_L4", n) for v, n in ((4, 1), (8, 1), (12, 1), (16, 1), (24, 2), (32, 1),
                                                           (48, 4), (96, 8))},
    # G4 (RTX PRO 6000: in v1's AcceleratorType enum; its training page entry is not confirmed here).
    **{f"g4-standard-{v}": ("NVIDIA_RTX_PRO_6000", n) for v, n in ((48, 1), (96, 2), (192, 4), (384, 8))},
}

# ---- TPUs --------------------------------------------------------------------------------------------
CLOUD_TPU = "cloud-tpu"
CLOUD_TPU_TYPES = ("TPU_V2", "TPU_V3")
CLOUD_TPU_CORES = 8
TPU_VMS = frozenset({"ct4p-hightpu-4t", "ct5p-hightpu-4t", "ct5lp-hightpu-1t", "ct5lp-hightpu-4t", "ct5lp-hightpu-8t",
                     "ct6e-standard-1t", "ct6e-standard-4t", "ct6e-standard-8t"})
#: The accelerator a TPU VM may name (none is the usual form: the machine type says it).
TPU_VM_ACCELERATOR = {"ct5lp": "TPU_V5_LITEPOD"}

BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
BOOT_DISK_GB = (100, 64000)

MACHINE_TYPES: frozenset[str] = frozenset(VCPUS) | frozenset(FIXED_GPUS) | TPU_VMS | {CLOUD_TPU}


def accelerator_problem(machine: str, accelerator: str, count: int) -> Problem | None:
    """(field, why) Vertex refuses `count` × `accelerator` ("" / 0: none) on `machine`; None when it accepts."""
    if machine not in MACHINE_TYPES:
        return "machine_type", f'Machine type "{machine}" is not supported.'
    if bool(accelerator) != bool(count):
        return "accelerator_type", "Both `accelerator_type` and `accelerator_count` should be specified or none."
    unsupported = "accelerator_type", f'Accelerator "{accelerator}" is not supported for machine type "{machine}".'
    bad_count = "accelerator_count", (f'Accelerator count {count} is not supported for machine type "{machine}" '
                                      f'with accelerator "{accelerator}".')
    if machine in FIXED_GPUS:
        gpu, fixed = FIXED_GPUS[machine]
        if not accelerator:
            return None  # the machine type says it
        return unsupported if accelerator != gpu else (bad_count if count != fixed else None)
    if machine == CLOUD_TPU:
        if accelerator not in CLOUD_TPU_TYPES:
            return unsupported if accelerator else ("accelerator_type",
                                                    f'Machine type "{machine}" needs a TPU_V2 or TPU_V3 accelerator.')
        return bad_count if count != CLOUD_TPU_CORES else None
    if machine in TPU_VMS:
        allowed = TPU_VM_ACCELERATOR.get(machine.split("-", 1)[0])
        return None if not accelerator or accelerator == allowed else unsupported
    if not accelerator:
        return None
    legal = N1_GPU_VCPUS.get(accelerator) if machine.startswith("n1-") else None
    if legal is None:
        return unsupported
    if count not in legal:
        return bad_count
    if VCPUS[machine] > legal[count] or machine in N1_GPU_EXCLUDED.get(accelerator, ()):
        return "machine_type", unsupported[1].removesuffix(".") + f" with accelerator count {count}."
    return None


def check_machine(where: str, spec: Any, disk: Any) -> list[Problem]:
    """The problems of one pool's MachineSpec and DiskSpec (protos), as field violations."""
    problems: list[Problem] = []
    accelerator = AcceleratorType(spec.accelerator_type).name if spec.accelerator_type else ""
    if spec.machine_type:
        found = accelerator_problem(spec.machine_type, accelerator, spec.accelerator_count)
        if found is not None:
            problems.append((f"{where}.machine_spec.{found[0]}", found[1]))
    if spec.gpu_partition_size and (not accelerator.startswith("NVIDIA_") or spec.accelerator_count != 1):
        # MachineSpec.gpu_partition_size: "If set, the accelerator_count should be set to 1."
        problems.append((f"{where}.machine_spec.gpu_partition_size",
                         "gpu_partition_size needs exactly one NVIDIA GPU (accelerator_count 1)."))
    if spec.tpu_topology and spec.machine_type not in TPU_VMS:
        problems.append((f"{where}.machine_spec.tpu_topology",
                         f'tpu_topology is supported for TPU VM machine types only, not "{spec.machine_type}".'))
    if disk.boot_disk_type and disk.boot_disk_type not in BOOT_DISK_TYPES:
        problems.append((f"{where}.disk_spec.boot_disk_type",
                         f'Boot disk type "{disk.boot_disk_type}" is not supported; use one of '
                         f"{', '.join(BOOT_DISK_TYPES)}."))
    lo, hi = BOOT_DISK_GB
    if disk.boot_disk_size_gb and not lo <= disk.boot_disk_size_gb <= hi:
        problems.append((f"{where}.disk_spec.boot_disk_size_gb",
                         f"Boot disk size {disk.boot_disk_size_gb} GB is not supported; it must be between {lo} and "
                         f"{hi} GB."))
    return problems


__all__ = ["BOOT_DISK_GB", "BOOT_DISK_TYPES", "FIXED_GPUS", "MACHINE_TYPES", "N1_GPU_VCPUS", "VCPUS",
           "accelerator_problem", "check_machine"]
