"""The hardware Vertex AI custom training accepts at create time, answered in Vertex's words.

The verdict is the catalog's (:func:`vtrain.catalog.shapes.shape_problem` and ``boot_disk_problem``), the one
`validate` reads, so the two never disagree on a shape (tests/scenarios/test_catalog_verdicts.py walks the
whole table through both). A problem that rests on an unverified source is a warning in `validate` and
accepted here; where the emulator answers otherwise on purpose, the machine's row says so (``emulator``):
it takes a TPU VM's own AcceleratorType (TPU_V5_LITEPOD on ct5lp-*, as Vertex's REST samples send it),
which vtrain's requests leave out, and an x86_64 image on A4X (Vertex fails such a job at start, not create).

Wording: Vertex answers `Accelerator "NVIDIA_TESLA_K80" is not supported for machine type "n1-standard-4"`
(GoogleCloudPlatform/vertex-ai-samples#213) and `Both `accelerator_type` and `accelerator_count` should be
specified or none.` (PrefectHQ/prefect-gcp#175). The other messages follow that pattern; their exact text is
not confirmed (see docs/guides/emulator.md).
"""

from __future__ import annotations

from typing import Any

from google.cloud.aiplatform_v1.types import AcceleratorType

from vtrain import catalog
from vtrain.catalog.capacity import RESERVATION_KEY, reservation_form
from vtrain.catalog.shapes import CLOUD_TPU_TYPES, ShapeProblem, boot_disk_problem, shape_problem

Problem = tuple[str, str]

BOOT_DISK_TYPES = catalog.BOOT_DISK_TYPES
BOOT_DISK_GB = catalog.BOOT_DISK_GB
MACHINE_TYPES: frozenset[str] = frozenset(catalog.MACHINES)


def _worded(found: ShapeProblem, machine: str, accelerator: str, count: int, topology: str) -> Problem:
    unsupported = f'Accelerator "{accelerator}" is not supported for machine type "{machine}".'
    code = found.code
    if code == "unknown-machine":
        return "machine_type", f'Machine type "{machine}" is not supported.'
    if code == "half":
        return "accelerator_type", "Both `accelerator_type` and `accelerator_count` should be specified or none."
    if code == "not-a-tpu-vm":
        return "tpu_topology", f'tpu_topology is supported for TPU VM machine types only, not "{machine}".'
    if code == "topology":
        return "tpu_topology", f'TPU topology "{topology}" is not supported for machine type "{machine}".'
    if code == "tpu-needs-type":
        return "accelerator_type", f'Machine type "{machine}" needs a {" or ".join(CLOUD_TPU_TYPES)} accelerator.'
    if code in ("n1-vcpus", "n1-excluded"):
        return "machine_type", unsupported.removesuffix(".") + f" with accelerator count {count}."
    if found.field == "accelerator_count":
        return "accelerator_count", (f'Accelerator count {count} is not supported for machine type "{machine}" '
                                     f'with accelerator "{accelerator}".')
    return "accelerator_type", unsupported


def accelerator_problem(machine: str, accelerator: str, count: int, topology: str = "") -> Problem | None:
    """(field, why) Vertex refuses `count` × `accelerator` ("" / 0: none) on `machine`; None when it accepts."""
    found = shape_problem(machine, accelerator or None, count, topology or None)
    if found is None or not found.refused:
        return None
    return _worded(found, machine, accelerator, count, topology)


def check_machine(where: str, spec: Any, disk: Any) -> list[Problem]:
    """The problems of one pool's MachineSpec and DiskSpec (protos), as field violations."""
    problems: list[Problem] = []
    accelerator = AcceleratorType(spec.accelerator_type).name if spec.accelerator_type else ""
    if spec.machine_type:
        found = accelerator_problem(spec.machine_type, accelerator, spec.accelerator_count, spec.tpu_topology)
        if found is not None:
            problems.append((f"{where}.machine_spec.{found[0]}", found[1]))
    if spec.gpu_partition_size and (not accelerator.startswith("NVIDIA_") or spec.accelerator_count != 1):
        # MachineSpec.gpu_partition_size: "If set, the accelerator_count should be set to 1."
        problems.append((f"{where}.machine_spec.gpu_partition_size",
                         "gpu_partition_size needs exactly one NVIDIA GPU (accelerator_count 1)."))
    affinity = spec.reservation_affinity
    if "reservation_affinity" in spec and not affinity.reservation_affinity_type:  # TYPE_UNSPECIFIED
        problems.append((f"{where}.machine_spec.reservation_affinity.reservation_affinity_type",
                         "reservation_affinity_type is required."))
    elif affinity.reservation_affinity_type == affinity.Type.SPECIFIC_RESERVATION:
        names = list(affinity.values)
        if affinity.key != RESERVATION_KEY or not names or any(reservation_form(n) is None for n in names):
            problems.append((f"{where}.machine_spec.reservation_affinity",
                             f"A specific reservation needs key \"{RESERVATION_KEY}\" and values naming a "
                             "reservation, reservation block or reservation sub-block."))
    disk_problem = boot_disk_problem(spec.machine_type, disk.boot_disk_type, disk.boot_disk_size_gb)
    if disk_problem is not None and disk_problem.refused:
        if disk_problem.code == "disk-type":
            problems.append((f"{where}.disk_spec.boot_disk_type",
                             f'Boot disk type "{disk.boot_disk_type}" is not supported; use one of '
                             f"{', '.join(BOOT_DISK_TYPES)}."))
        elif disk_problem.code == "disk-for-machine":
            problems.append((f"{where}.disk_spec.boot_disk_type",
                             f'Boot disk type "{disk.boot_disk_type}" is not supported for machine type '
                             f'"{spec.machine_type}".'))
        else:
            lo, hi = BOOT_DISK_GB
            problems.append((f"{where}.disk_spec.boot_disk_size_gb",
                             f"Boot disk size {disk.boot_disk_size_gb} GB is not supported; it must be between {lo} "
                             f"and {hi} GB."))
    return problems


__all__ = ["BOOT_DISK_GB", "BOOT_DISK_TYPES", "MACHINE_TYPES", "accelerator_problem", "check_machine"]
