"""Does the model fit one replica? Training state per parameter, activations, and the accelerator's memory.

Data parallelism (ring, Reduction Server, DiLoCo) keeps a whole copy of the training state on every
device that holds a replica, so the model's size, not the data's, decides whether it can be used at
all. Per parameter, in bytes (Keras semantics, what vtrain's templates train with):

* weights: fp32 (4). Under a mixed policy the variables stay fp32 (this *is* the fp32 master copy)
  and each layer casts them to the 16-bit compute dtype: + 2 for those half copies.
* gradients: 4 (the gradient of an fp32 variable is fp32, also under mixed policies).
* optimizer slots, fp32: sgd 0, momentum 4, adam 8 (m and v), adafactor ~0 (its second moments are
  factored into row and column vectors; counted as nothing).

So 340M parameters with fp32 Adam need 16 B/param = 5.44 GB before activations; mixed policies
add 2 B/param of state but halve the activations (16-bit compute).

A replica is one device in TF's terms: one GPU, one TPU core (v2/v3: two per chip) or chip
(v5e/v6e), or one CPU machine (its host RAM). Only ``USABLE_FRACTION`` of a device's memory is
counted as usable: the framework, the CUDA context, XLA buffers and fragmentation take the rest.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from vtrain.errors import EstimateError

if TYPE_CHECKING:
    from vtrain.jobfile.config import PoolConfig

OPTIMIZER_SLOTS: dict[str, int] = {"sgd": 0, "momentum": 1, "adam": 2, "adafactor": 0}
PRECISIONS = ("fp32", "mixed_bf16", "mixed_fp16")
#: The Keras policy each precision is trained with.
KERAS_POLICY = {"fp32": "float32", "mixed_bf16": "mixed_bfloat16", "mixed_fp16": "mixed_float16"}
USABLE_FRACTION = 0.9
GB = 1e9
GIB = 2**30


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes one replica needs: the training state and the activations (None: not given)."""

    params: int
    optimizer: str
    precision: str
    weights: float
    half_copies: float
    gradients: float
    optimizer_slots: float
    activations: float | None

    @property
    def state(self) -> float:
        return self.weights + self.half_copies + self.gradients + self.optimizer_slots

    @property
    def total(self) -> float:
        return self.state + (self.activations or 0.0)

    @property
    def bytes_per_param(self) -> float:
        return self.state / self.params

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "state": self.state, "total": self.total, "bytes_per_param": self.bytes_per_param}


def memory_need(
    params: int, optimizer: str = "adam", precision: str = "fp32", activations: float | None = None
) -> MemoryNeed:
    """The state of `params` parameters trained with `optimizer` under `precision`, plus activations."""
    if optimizer not in OPTIMIZER_SLOTS:
        raise EstimateError(f"optimizer {optimizer!r} is not one of {', '.join(OPTIMIZER_SLOTS)}")
    if precision not in PRECISIONS:
        raise EstimateError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if params < 1:
        raise EstimateError(f"a model needs at least one parameter, got {params}")
    if activations is not None and not (activations >= 0 and math.isfinite(activations)):
        raise EstimateError(f"activation bytes must be a finite number ≥ 0, got {activations}")
    mixed = precision != "fp32"
    return MemoryNeed(
        params=params,
        optimizer=optimizer,
        precision=precision,
        weights=4.0 * params,
        half_copies=2.0 * params if mixed else 0.0,
        gradients=4.0 * params,
        optimizer_slots=4.0 * OPTIMIZER_SLOTS[optimizer] * params,
        activations=activations,
    )


def activations_under(activations: float | None, given_for: str, wanted: str) -> float | None:
    """Activations measured under one precision, as they would be under another (16-bit halves them)."""
    if activations is None:
        return None
    width = {"fp32": 4, "mixed_bf16": 2, "mixed_fp16": 2}
    return activations * width[wanted] / width[given_for]


def human_bytes(n: float) -> str:
    """1.36 GB, 512.00 MB: decimal units, as the catalog's GB are."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


_SIZE_RE = re.compile(r"^\s*(?P<num>\d+(?:\.\d*)?(?:e\d+)?|\.\d+)\s*(?P<unit>[kmgt]i?b?|b?)\s*$", re.I)
_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
               "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}  # fmt: skip


def parse_bytes(text: str) -> float:
    """`6GB`, `512MiB`, `2.5e9`, `800k` -> bytes (decimal units; KiB/MiB/GiB/TiB binary)."""
    match = _SIZE_RE.match(str(text))
    if not match:
        raise EstimateError(f"cannot read {str(text)[:80]!r} as a size (examples: 6GB, 512MiB, 2.5e9)")
    if re.fullmatch(r"[KMGT]i?b", match["unit"]):  # 6Gb is gigabits, not the bytes a size is in
        raise EstimateError(f"{text!r}: {match['unit']} is bits; a size is in bytes: write "
                            f"{match['num']}{match['unit'][:-1]}B")
    unit = match["unit"].lower().removesuffix("b")
    value = float(match["num"]) * _SIZE_UNITS[unit]
    if not math.isfinite(value) or value > 1e18:
        raise EstimateError(f"{text!r} is too large a size (at most 1 EB)")
    return value


# --------------------------------------------------------------------------- devices


@dataclass(frozen=True)
class Device:
    """What one replica of a pool trains on, and how many of them one VM (or slice) holds."""

    kind: str  # gpu | tpu | cpu
    name: str  # NVIDIA_A100_80GB, TPU v3 core, n1-standard-16 host RAM
    memory_bytes: float | None  # None: not in the catalog
    per_replica: int  # devices per pool replica (GPUs per VM, TPU cores/chips of the slice, 1 for CPU)
    accelerator: str | None  # the catalog's accelerator (GPU enum or TPU generation)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def pool_device(pool: PoolConfig) -> Device:
    """The device one replica of `pool` trains on, with its memory from the catalog."""
    from vtrain import catalog

    machine = pool.machine_type
    generation = catalog.tpu_generation(machine, pool.accelerator)
    if generation is not None:
        mem = catalog.TPU_MEMORY[generation]
        per_core = mem.cores_per_chip > 1
        if machine in catalog.TPU_VM_MACHINES:
            dims = [int(d) for d in (pool.tpu_topology or "1x1").split("x")]
            count = math.prod(dims)
        else:
            count = pool.accelerator_count or 8
        unit = "core" if per_core else "chip"
        return Device(
            kind="tpu",
            name=f"TPU {generation} {unit}",
            memory_bytes=mem.hbm_gib * GIB / mem.cores_per_chip,
            per_replica=count,
            accelerator=generation,
        )
    gpu = catalog.GPU_MACHINES[machine].accelerator if machine in catalog.GPU_MACHINES else None
    gpu = gpu or (pool.accelerator if pool.gpus else None)
    if gpu is not None:
        gb = catalog.GPU_MEMORY.get(gpu, (None, None))[0]
        return Device("gpu", gpu, gb * GB if gb else None, catalog.gpus_per_machine(machine, pool.gpus), gpu)
    host = catalog.host_memory_gb(machine)
    return Device("cpu", f"{machine} host RAM", host * GB if host else None, 1, None)


# --------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Fit:
    """One pool's verdict: does a replica's state (and activations) fit its device?"""

    role: str
    machine_type: str
    device: Device
    need_bytes: float
    usable_bytes: float | None
    headroom: float | None  # 1 − need / device memory; negative: short by that much
    verdict: str  # fits | tight | does not fit | unknown
    #: Devices the state needs when sharded across them (weights, gradients and slots split;
    #: activations stay per device); None when it fits unsharded or memory is unknown.
    sharded_devices: int | None
    sharded_machines: int | None  # VMs (or TPU slices) of this machine type that hold that many

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def fit(need: MemoryNeed, device: Device, role: str = "chief", machine_type: str = "") -> Fit:
    """`fits` within the usable share, `tight` between it and the full memory, else `does not fit`."""
    total = device.memory_bytes
    if total is None:
        return Fit(role, machine_type, device, need.total, None, None, "unknown", None, None)
    usable = total * USABLE_FRACTION
    headroom = 1 - need.total / total
    verdict = "fits" if need.total <= usable else ("tight" if need.total <= total else "does not fit")
    shards = machines = None
    if verdict == "does not fit":
        room = usable - (need.activations or 0.0)
        if room > 0:
            shards = math.ceil(need.state / room)
            machines = math.ceil(shards / max(1, device.per_replica))
    return Fit(role, machine_type, device, need.total, usable, headroom, verdict, shards, machines)


def pool_fits(pools: list[PoolConfig], need: MemoryNeed) -> list[Fit]:
    """One verdict per distinct device of the training pools; `role` names every pool that shares it."""
    seen: dict[tuple[str, str | None, int], Fit] = {}
    for pool in pools:
        key = (pool.machine_type, pool.accelerator, pool.accelerator_count)
        if key in seen:
            seen[key] = replace(seen[key], role=f"{seen[key].role}+{pool.role}")
        else:
            seen[key] = fit(need, pool_device(pool), pool.role, pool.machine_type)
    return list(seen.values())
