"""Is a machine shape legal? One verdict, read by `validate`'s rules and by the emulator's create checks.

:func:`shape_problem` judges what a MachineSpec sends (machine type, AcceleratorType name, count, TPU
topology) and :func:`boot_disk_problem` a DiskSpec, both against the catalog's rows. Each answer names the
field, a code, and the :class:`~vtrain.catalog.sources.Source` that says so: when that source is unverified,
the rules warn instead of refusing and the emulator accepts, so the two give the same verdict on every shape
(a test walks the whole table). The rules word an answer for a job file (with the nearest legal shapes,
:func:`nearest_shapes`); the emulator words it as Vertex does.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtrain.catalog import sources as src
from vtrain.catalog.accelerators import BY_ENUM, RETIRED, TPU_GENERATIONS
from vtrain.catalog.machines import (
    BOOT_DISK_GB,
    BOOT_DISK_TYPES,
    CLOUD_TPU,
    CLOUD_TPU_CORES,
    CLOUD_TPU_POD_STEP,
    CLOUD_TPU_PODS,
    MACHINES,
    N1_GPU_EXCLUDED,
    N1_GPUS,
    Machine,
)
from vtrain.catalog.sources import Source

#: The TPU node (cloud-tpu) takes these; TPU VMs take the value that names their generation, or none.
CLOUD_TPU_TYPES = ("TPU_V2", "TPU_V3")


@dataclass(frozen=True)
class ShapeProblem:
    """What is wrong with a shape: the MachineSpec/DiskSpec field, a code, and the source saying so."""

    field: str  # machine_type, accelerator_type, accelerator_count, tpu_topology, boot_disk_type, boot_disk_size_gb
    code: str
    source: Source

    @property
    def refused(self) -> bool:
        """A verified row refuses the shape; an unverified one only doubts it (a warning; the emulator accepts)."""
        return self.source.verified


def _problem(field: str, code: str, source: Source) -> ShapeProblem:
    return ShapeProblem(field, code, source)


def tpu_vm_accelerator(machine: Machine) -> str | None:
    """The AcceleratorType value that names a TPU VM's generation (ct5lp: TPU_V5_LITEPOD), if any."""
    return TPU_GENERATIONS[machine.generation].enum if machine.generation else None


def shape_problem(machine: str, accelerator: str | None, count: int, topology: str | None = None) -> (
        ShapeProblem | None):
    """Why Vertex refuses (or may refuse) `count` × `accelerator` (an AcceleratorType name; None or '' for none)
    on `machine` with `topology`; None when the catalog says it takes it."""
    row = MACHINES.get(machine)
    if row is None:
        return _problem("machine_type", "unknown-machine", src.MACHINE_TYPES)
    if accelerator and accelerator not in BY_ENUM:
        return _problem("accelerator_type", "unknown-accelerator", src.ACCELERATOR_ENUM)
    if accelerator and BY_ENUM[accelerator].status == RETIRED:
        return _problem("accelerator_type", "retired", src.ACCELERATOR_ENUM)
    if topology and not row.topologies:
        return _problem("tpu_topology", "not-a-tpu-vm", src.TPU_CONFIG)
    wrong = _wrong_accelerator(row, accelerator)  # the machine cannot take it, whatever the count
    if wrong is not None:
        return wrong
    if bool(accelerator) != bool(count):
        return _problem("accelerator_type", "half", src.DISCOVERY)
    if row.kind == "gpu":
        return _problem("accelerator_count", "fixed-count", src.GPU_TABLE) if accelerator and count != row.count \
            else None
    if row.name == CLOUD_TPU:
        if count == CLOUD_TPU_CORES:
            return None
        pod = count > 0 and count % CLOUD_TPU_POD_STEP == 0
        return _problem("accelerator_count", "tpu-pod" if pod else "tpu-count", CLOUD_TPU_PODS if pod
                        else src.TPU_CONFIG)
    if row.kind == "tpu":
        if topology and topology not in row.topologies:
            return _problem("tpu_topology", "topology", row.fact("topologies") or src.TPU_CONFIG)
        return None
    return _n1_count_problem(row, accelerator, count) if accelerator else None


def _wrong_accelerator(row: Machine, accelerator: str | None) -> ShapeProblem | None:
    """The machine cannot take this accelerator at all (a TPU node must name one)."""
    if row.name == CLOUD_TPU:
        if accelerator not in CLOUD_TPU_TYPES:
            return _problem("accelerator_type", "tpu-needs-type" if not accelerator else "not-for-machine",
                            src.TPU_CONFIG)
        return None
    if not accelerator:
        return None
    if row.kind == "gpu":
        return _problem("accelerator_type", "wrong-gpu", src.GPU_TABLE) if accelerator != row.accelerator else None
    if row.kind == "tpu":
        return None if accelerator == tpu_vm_accelerator(row) else _problem("accelerator_type", "not-for-machine",
                                                                             src.TPU_CONFIG)
    if BY_ENUM[accelerator].kind == "tpu":
        return _problem("accelerator_type", "tpu-elsewhere", src.TPU_CONFIG)
    if row.family != "n1":
        return _problem("accelerator_type", "no-gpus", src.GPU_TABLE)
    if accelerator not in N1_GPUS:
        return _problem("accelerator_type", "not-on-n1", src.GPU_TABLE)
    return None


def _n1_count_problem(row: Machine, accelerator: str, count: int) -> ShapeProblem | None:
    legal = N1_GPUS[accelerator]
    if count not in legal:
        return _problem("accelerator_count", "n1-count", src.GPU_TABLE)
    if (row.vcpus or 0) > legal[count]:
        return _problem("machine_type", "n1-vcpus", src.GPU_TABLE)
    if row.name in N1_GPU_EXCLUDED.get(accelerator, ()):
        return _problem("machine_type", "n1-excluded", src.GPU_TABLE)
    return None


def boot_disk_problem(machine: str, disk_type: str | None, size_gb: int | None) -> ShapeProblem | None:
    """Why Vertex refuses (or may refuse) a boot disk of `disk_type` ('' or None: the machine's default) and
    `size_gb` (0 or None: 100 GB) on `machine`; None when the catalog says it takes it."""
    if disk_type and disk_type not in BOOT_DISK_TYPES:
        return _problem("boot_disk_type", "disk-type", src.DISK_SPEC)
    row = MACHINES.get(machine)
    if disk_type and row is not None and disk_type not in row.boot_disks:
        return _problem("boot_disk_type", "disk-for-machine", row.fact("boot disks") or src.DISK_SPEC)
    lo, hi = BOOT_DISK_GB
    if size_gb and not lo <= size_gb <= hi:
        return _problem("boot_disk_size_gb", "disk-size", src.BOOT_DISK_RANGE)
    return None


def legal_shapes(accelerator: str) -> list[tuple[str, int]]:
    """Every (machine type, count) the catalog takes `accelerator` on (GPUs: fixed machines, then N1)."""
    out = [(m.name, m.count) for m in MACHINES.values() if m.kind == "gpu" and m.accelerator == accelerator]
    for count, most in N1_GPUS.get(accelerator, {}).items():
        out += [(m.name, count) for m in MACHINES.values() if m.family == "n1" and (m.vcpus or 0) <= most
                and m.name not in N1_GPU_EXCLUDED.get(accelerator, ())]
    return out


def nearest_shapes(machine: str, accelerator: str, count: int, limit: int = 3) -> list[str]:
    """The legal shapes nearest the one given, as 'MACHINE with N × ACCELERATOR': fewest changes (the count, the
    machine), then the same series (n1-standard), the nearest vCPUs, the nearest count."""
    given = MACHINES.get(machine)
    cpus = (given.vcpus or 0) if given is not None else 0
    series = machine.rsplit("-", 1)[0]

    def distance(shape: tuple[str, int]) -> tuple[int, bool, int, int, str]:
        name, n = shape
        return ((n != count) + (name != machine), name.rsplit("-", 1)[0] != series,
                abs((MACHINES[name].vcpus or 0) - cpus), abs(n - count), name)

    return [f"{name} with {n} × {accelerator}" for name, n in sorted(legal_shapes(accelerator), key=distance)[:limit]]


__all__ = ["CLOUD_TPU_TYPES", "ShapeProblem", "boot_disk_problem", "legal_shapes", "nearest_shapes", "shape_problem",
           "tpu_vm_accelerator"]
