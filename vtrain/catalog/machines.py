"""The machine types Vertex AI custom training takes: one :class:`Machine` row each, with its source.

General-purpose families (N1, N2, N4, E2, C2, M1) are rows of vCPU counts per shape; accelerator-optimized
machines (A2, A3, A4, A4X, G2, G4) come with their GPUs; TPU VMs (ct4p, ct5p, ct5lp, ct6e) with their chips
and the topologies Vertex takes; ``cloud-tpu`` is the legacy TPU node, its TPU named by the accelerator.
A row also says the CPU architecture (A4X is Arm), the boot disk types the machine takes (Hyperdisk-only
machines: A3 Ultra, A4, A4X, N4) and its NIC's published maximum egress (Reduction Server sizing and the
advisor). Where vtrain's emulator answers otherwise on purpose, the row's ``emulator`` says so.

GPUs attachable to N1 are :data:`N1_GPUS`: the legal counts and the most vCPUs each count allows (Vertex's
compatibility table is stricter than Compute Engine: no n1-*-32 with one T4; 4 × P100 stop at 64 vCPUs).
"""

from __future__ import annotations

from dataclasses import dataclass

from vtrain.catalog import sources as src
from vtrain.catalog.sources import Fact, Source

#: Boot disk types DiskSpec takes (sources.DISK_SPEC), the default first; and the size range.
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
HYPERDISK = "hyperdisk-balanced"
BOOT_DISK_GB = (100, 64000)
X86, ARM = "x86_64", "aarch64"
#: The OCI (image index) name of each architecture.
OCI_ARCH = {X86: "amd64", ARM: "arm64"}


@dataclass(frozen=True)
class Machine:
    """One machine type. `accelerator`/`count`: the GPUs it comes with; `generation`/`chips`/`topologies`: a
    TPU VM's. `facts` are what the row says from pages of their own (architecture, boot disks, topologies)."""

    name: str
    family: str
    kind: str  # "cpu", "gpu" or "tpu"
    vcpus: int | None = None
    memory_gb: float | None = None
    accelerator: str | None = None
    count: int = 0
    generation: str | None = None
    chips: int = 0
    topologies: tuple[str, ...] = ()
    nic_gbps: float = 0.0
    arch: str = X86
    boot_disks: tuple[str, ...] = BOOT_DISK_TYPES
    spot_or_flex_only: bool = False
    source: Source = src.MACHINE_TYPES
    facts: tuple[Fact, ...] = ()
    emulator: str = ""

    @property
    def boot_disk_default(self) -> str:
        """What the request sends when the job file gives a boot disk size only."""
        return self.boot_disks[0]

    def fact(self, prefix: str) -> Source | None:
        """The source of this row's fact that starts with `prefix` ('boot disks', 'arch', 'topologies')."""
        return next((f.source for f in self.facts if f.what.startswith(prefix)), None)

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "family": self.family, "kind": self.kind, "vcpus": self.vcpus,
                "memory_gb": self.memory_gb, "accelerator": self.accelerator, "accelerator_count": self.count,
                "tpu_generation": self.generation, "tpu_chips": self.chips, "tpu_topologies": list(self.topologies),
                "arch": self.arch, "nic_gbps": self.nic_gbps, "boot_disk_types": list(self.boot_disks),
                "boot_disk_default": self.boot_disk_default, "spot_or_flex_only": self.spot_or_flex_only,
                **self.source.as_dict(), "facts": [f.as_dict() for f in self.facts], "emulator": self.emulator or None}


_HYPERDISK = Fact("boot disks: hyperdisk-balanced only", src.HYPERDISK_ONLY)
_HYPERDISK_UNREAD = Fact("boot disks: hyperdisk-balanced only", src.HYPERDISK_UNREAD)
_N4_DISKS = Fact("boot disks: hyperdisk-balanced only", src.N4_DISKS)
_ARM = Fact("arch: aarch64 (NVIDIA Grace CPUs); x86_64 images do not run", src.A4X_ARM)
_NIC = Fact("nic_gbps", src.GPU_NETWORK)
_SPOT = Fact("spot_or_flex_only: offered for Spot and flex-start capacity only", src.ACCELERATOR_MACHINES)

# --- general-purpose families: family -> (shape -> vCPU counts, NIC cap Gbps, NIC floor Gbps, GB per vCPU) -----
_CPU_FAMILIES: dict[str, tuple[dict[str, tuple[int, ...]], float, float, dict[str, float]]] = {
    "n1": ({"standard": (4, 8, 16, 32, 64, 96), "highmem": (2, 4, 8, 16, 32, 64, 96), "highcpu": (16, 32, 64, 96)},
           32, 0, {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}),
    "n2": ({"standard": (4, 8, 16, 32, 48, 64, 80), "highmem": (2, 4, 8, 16, 32, 48, 64, 80),
            "highcpu": (16, 32, 48, 64, 80)}, 32, 10, {"standard": 4, "highmem": 8, "highcpu": 1}),
    "n4": ({shape: (2, 4, 8, 16, 32, 48, 64, 80) for shape in ("standard", "highmem", "highcpu")}, 50, 10,
           {"standard": 4, "highmem": 8, "highcpu": 2}),
    "e2": ({"standard": (4, 8, 16, 32), "highmem": (2, 4, 8, 16), "highcpu": (16, 32)}, 16, 0,
           {"standard": 4, "highmem": 8, "highcpu": 1}),
    "c2": ({"standard": (4, 8, 16, 30, 60)}, 32, 0, {"standard": 4}),
    "m1": ({"ultramem": (40, 80, 160), "megamem": (96,)}, 32, 0, {}),
}  # fmt: skip
_M1_GB = {"m1-ultramem-40": 961, "m1-ultramem-80": 1922, "m1-ultramem-160": 3844, "m1-megamem-96": 1433.6}
_N4_EMULATOR = ("accepted as the rules accept it (both warn: the training page's N-series part was not read); "
                "Vertex may refuse n4-* at create")


def _cpu_rows() -> list[Machine]:
    rows = []
    for family, (shapes, cap, floor, per_vcpu) in _CPU_FAMILIES.items():
        n4 = family == "n4"
        facts = (Fact("nic_gbps", src.CPU_NETWORK),
                 Fact("memory_gb", src.MEMORY_OPTIMIZED if family == "m1" else src.GENERAL_PURPOSE),
                 *((_N4_DISKS,) if n4 else ()))
        for shape, counts in shapes.items():
            for n in counts:
                name = f"{family}-{shape}-{n}"
                memory = _M1_GB.get(name) or (per_vcpu[shape] * n if shape in per_vcpu else None)
                rows.append(Machine(name, family, "cpu", vcpus=n, memory_gb=memory,
                                    nic_gbps=float(min(max(2 * n, floor), cap)),
                                    boot_disks=(HYPERDISK,) if n4 else BOOT_DISK_TYPES,
                                    source=src.N4_LISTED if n4 else src.MACHINE_TYPES, facts=facts,
                                    emulator=_N4_EMULATOR if n4 else ""))
    return rows


def _gpu(name: str, gpu: str, count: int, nic: float, *more: Fact, arch: str = X86, hyperdisk: bool = False,
         spot: bool = False, source: Source = src.MACHINE_TYPES, emulator: str = "") -> Machine:
    return Machine(name, name.split("-", 1)[0], "gpu", accelerator=gpu, count=count, nic_gbps=nic, arch=arch,
                   boot_disks=(HYPERDISK,) if hyperdisk else BOOT_DISK_TYPES, spot_or_flex_only=spot, source=source,
                   facts=(Fact("accelerator", src.GPU_TABLE), _NIC, *more), emulator=emulator)


def _gpu_rows() -> list[Machine]:
    return [
        # A2 (A100 40 GB): 24/32/50/100 Gbps; a2-megagpu-16g 100 (the Reduction Server page).
        *(_gpu(f"a2-highgpu-{n}g", "NVIDIA_TESLA_A100", n, nic) for n, nic in ((1, 24), (2, 32), (4, 50), (8, 100))),
        _gpu("a2-megagpu-16g", "NVIDIA_TESLA_A100", 16, 100),
        *(_gpu(f"a2-ultragpu-{n}g", "NVIDIA_A100_80GB", n, nic) for n, nic in ((1, 24), (2, 32), (4, 50), (8, 100))),
        # A3 High (H100): 1g/2g/4g are offered for Spot and flex-start capacity only (a warning: Vertex's page
        # does not say so).
        *(_gpu(f"a3-highgpu-{n}g", "NVIDIA_H100_80GB", n, nic, _SPOT, spot=True)
          for n, nic in ((1, 50), (2, 100), (4, 100))),
        _gpu("a3-highgpu-8g", "NVIDIA_H100_80GB", 8, 1000),
        _gpu("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8, 1800),
        # A3 Ultra (H200), A4 (B200): Hyperdisk only; A4X (GB200 with Grace): Arm, Hyperdisk only.
        _gpu("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8, 3600, _HYPERDISK, hyperdisk=True),
        _gpu("a4-highgpu-8g", "NVIDIA_B200", 8, 3600, _HYPERDISK, hyperdisk=True),
        _gpu("a4x-highgpu-4g", "NVIDIA_GB200", 4, 2000, _ARM, _HYPERDISK_UNREAD, arch=ARM, hyperdisk=True,
             emulator="accepts an x86_64 prebuilt image at create, as Vertex does (its replicas would fail as they "
                      "start); vtrain's rules refuse one"),
        # G2 (L4).
        *(_gpu(f"g2-standard-{v}", "NVIDIA_L4", n, nic) for v, n, nic in (
            (4, 1, 10), (8, 1, 16), (12, 1, 16), (16, 1, 32), (24, 2, 32), (32, 1, 32), (48, 4, 50), (96, 8, 100))),
        # G4 (RTX PRO 6000): in the v1 enum and Compute Engine's series; its training-page entry was not read.
        *(_gpu(f"g4-standard-{v}", "NVIDIA_RTX_PRO_6000", n, nic, source=src.G4_LISTED,
               emulator="accepted as the rules accept it (both warn: not confirmed on the training page)")
          for v, n, nic in ((48, 1, 50), (96, 2, 100), (192, 4, 200), (384, 8, 400))),
    ]


# --- TPUs -----------------------------------------------------------------------------------------------------
CLOUD_TPU = "cloud-tpu"
CLOUD_TPU_CORES = 8  # a single v2-8 / v3-8 device
CLOUD_TPU_POD_STEP = 32  # pod slices: multiples of 32 cores (not on Vertex's training page: a warning)
CLOUD_TPU_PODS = Source(src.TPU_CONFIG.url, src.TPU_CONFIG.checked, verified=False,
                        note="Vertex's training page names 8 cores (one v2-8/v3-8) only; pod slices of 32·k cores "
                             "are what Cloud TPU offers, not confirmed for Vertex training")
_V5P = ("2x2x1", "2x2x2", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16", "8x16x16", "16x16x16", "16x16x24")
_V4 = ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x12", "8x8x16", "8x16x16",
       "12x16x16", "16x16x16")
_2D = ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_TPU_NIC = Fact("nic_gbps", src.TPU_NETWORK)


def _tpu(name: str, generation: str, chips: int, topologies: tuple[str, ...], nic: float, shapes: Source) -> Machine:
    return Machine(name, name.split("-", 1)[0], "tpu", generation=generation, chips=chips, topologies=topologies,
                   nic_gbps=nic, source=src.TPU_CONFIG, facts=(Fact("topologies", shapes), _TPU_NIC))


def _tpu_rows() -> list[Machine]:
    return [
        _tpu("ct4p-hightpu-4t", "v4", 4, _V4, 100, src.TPU_V4),
        _tpu("ct5p-hightpu-4t", "v5p", 4, _V5P, 200, src.TPU_V5P),
        _tpu("ct5lp-hightpu-1t", "v5e", 1, ("1x1",), 50, src.TPU_CONFIG),
        _tpu("ct5lp-hightpu-4t", "v5e", 4, _2D, 100, src.TPU_CONFIG),
        _tpu("ct5lp-hightpu-8t", "v5e", 8, ("2x4",), 100, src.TPU_CONFIG),
        _tpu("ct6e-standard-1t", "v6e", 1, ("1x1",), 100, src.TPU_CONFIG),
        _tpu("ct6e-standard-4t", "v6e", 4, _2D, 200, src.TPU_CONFIG),
        _tpu("ct6e-standard-8t", "v6e", 8, ("2x4",), 200, src.TPU_CONFIG),
        Machine(CLOUD_TPU, CLOUD_TPU, "tpu", nic_gbps=32, source=src.TPU_CONFIG,
                facts=(Fact("pod slices: multiples of 32 cores", CLOUD_TPU_PODS),)),
    ]


MACHINES: dict[str, Machine] = {m.name: m for m in (*_cpu_rows(), *_gpu_rows(), *_tpu_rows())}

#: GPUs attachable to N1 machines: legal counts, and the most vCPUs a machine may have with each.
N1_GPUS: dict[str, dict[int, int]] = {
    "NVIDIA_TESLA_T4": {1: 16, 2: 32, 4: 96},
    "NVIDIA_TESLA_P4": {1: 16, 2: 32, 4: 96},
    "NVIDIA_TESLA_P100": {1: 16, 2: 32, 4: 64},
    "NVIDIA_TESLA_V100": {1: 8, 2: 16, 4: 32, 8: 96},
}
#: N1 machines within the vCPU limit that the table still refuses (too much memory: 4 × P100 ≤ 208 GB).
N1_GPU_EXCLUDED: dict[str, frozenset[str]] = {"NVIDIA_TESLA_P100": frozenset({"n1-standard-64", "n1-highmem-64"})}
N1_GPU_SOURCE = src.GPU_TABLE

__all__ = ["ARM", "OCI_ARCH", "BOOT_DISK_GB", "BOOT_DISK_TYPES", "CLOUD_TPU", "CLOUD_TPU_CORES", "CLOUD_TPU_POD_STEP",
           "CLOUD_TPU_PODS", "HYPERDISK", "MACHINES", "N1_GPUS", "N1_GPU_EXCLUDED", "N1_GPU_SOURCE", "X86", "Machine"]
