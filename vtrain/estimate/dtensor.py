"""DTensor (model parallel) in numbers: memory per device and bytes per step under a mesh, and the
`dtensor:` block to paste where data parallelism cannot hold the model.

The layouts modelled are the model-parallel template's (:mod:`vtrain.runtime.dtensor_layouts`): a
dimension named ``batch`` splits the examples, every other dimension shards the weights, and their
gradients and optimizer slots follow the weights' layout. With M = the product of the sharding
dimensions and B = the product of the ``batch`` dimensions, per device and step:

* memory: the training state / M (weights, 16-bit copies, gradients, slots) + the activations
  given per replica (each device computes on its batch shard; what one layout replicates over
  ``model`` is counted whole, so this is the conservative side);
* over ``batch``: a ring all-reduce of the device's gradient shard, 2 (B − 1) / B × G / M bytes;
* over the sharding dimensions: the sharded weights gathered for the forward and the backward pass
  and the gradients reduce-scattered, 3 (M − 1) / M × G bytes (FSDP-style; Megatron-style tensor
  parallelism moves activations instead, which depends on the model's shape: measure those with
  benchmarks/model_parallel.py).

Only traffic that leaves a machine is given a time (at its NIC's bandwidth): a sharding dimension
that stays within one replica's GPUs runs over NVLink/PCIe, which the catalog does not know.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from vtrain.estimate.memory import USABLE_FRACTION

BATCH = "batch"
Mesh = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class MeshPlan:
    """One mesh on one cluster: what each device holds and sends per step."""

    mesh: Mesh
    replicas: int  # chief + workers the mesh spans
    devices_per_replica: int
    state_bytes_per_device: float  # weights + copies + gradients + slots, sharded
    activation_bytes_per_device: float | None
    device_bytes: float | None  # one device's memory (None: not in the catalog)
    fits: bool | None  # within the usable share of the device (None: memory unknown)
    batch_bytes_per_step: float  # gradient all-reduce over `batch`, per device
    model_bytes_per_step: float  # all-gather + reduce-scatter over the sharding dimensions, per device
    network_seconds_per_step: float  # the part of both that crosses machines, at the NIC's bandwidth
    model_within_replica: bool  # the sharding dimensions fit in one replica's devices
    replicas_changed: bool = False  # a suggested mesh that needs another replica count

    @property
    def model(self) -> int:
        return math.prod(n for name, n in self.mesh if name != BATCH)

    @property
    def batch(self) -> int:
        return math.prod(n for name, n in self.mesh if name == BATCH)

    @property
    def bytes_per_device(self) -> float:
        return self.state_bytes_per_device + (self.activation_bytes_per_device or 0.0)

    def block(self) -> str:
        """The job-file lines to paste: the strategy, the mesh, and the workers when their count changes."""
        mesh = ", ".join(f"{name}: {size}" for name, size in self.mesh)
        lines = ["distribution_strategy: dtensor", "dtensor:", f"  mesh: {{{mesh}}}"]
        if self.replicas_changed:
            lines += ["cluster:", f"  workers: {{replicas: {self.replicas - 1}}}   # + the chief: "
                                  f"{self.replicas} replicas x {self.devices_per_replica} device(s)"]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "mesh": dict(self.mesh), "model": self.model, "batch": self.batch,
                "bytes_per_device": self.bytes_per_device, "block": self.block()}  # fmt: skip


def mesh_plan(
    mesh: Mesh,
    *,
    replicas: int,
    devices_per_replica: int,
    state_bytes: float,
    activations: float | None,
    grad_bytes: float,
    device_bytes: float | None,
    nic_gbps: float,
    alpha_s: float = 0.0,
    replicas_changed: bool = False,
) -> MeshPlan:
    """Memory and traffic per device under `mesh` (see the module docstring for the model)."""
    per = max(1, devices_per_replica)
    plan = MeshPlan(mesh, replicas, per, 0.0, None, None, None, 0.0, 0.0, 0.0, True)
    m, b = plan.model, plan.batch
    state = state_bytes / m
    fits = None if device_bytes is None else state + (activations or 0.0) <= device_bytes * USABLE_FRACTION
    batch_bytes = 2 * (b - 1) / b * grad_bytes / m if b > 1 else 0.0
    model_bytes = 3 * (m - 1) / m * grad_bytes if m > 1 else 0.0
    within = m <= per
    # `batch` crosses machines once the mesh spans more than one; `model` only when it leaves a replica.
    wire = (batch_bytes if replicas > 1 else 0.0) + (0.0 if within else model_bytes)
    hops = (2 * (b - 1) if replicas > 1 and b > 1 else 0) + (0 if within else 3 * (m - 1))
    seconds = wire * 8 / (nic_gbps * 1e9) + hops * alpha_s if nic_gbps > 0 else 0.0
    return MeshPlan(mesh, replicas, per, state, activations, device_bytes, fits, batch_bytes, model_bytes,
                    seconds, within, replicas_changed)  # fmt: skip


def suggest_mesh(shards: int, replicas: int, devices_per_replica: int) -> tuple[Mesh, int]:
    """The mesh (and replica count) that shards the state over at least `shards` devices: `model` the
    smallest power of two that many (layers' widths divide by it), within one replica when it fits
    there, else over whole replicas (their count rounded up to a multiple of the replicas one model
    copy needs); `batch` the rest of the devices."""
    per = max(1, devices_per_replica)
    model = 1 << max(0, math.ceil(math.log2(max(1, shards))))
    if model <= per:
        if per % model:
            model = per  # odd GPU counts: the whole replica
        return ((BATCH, replicas * per // model), ("model", model)), replicas
    group = math.ceil(model / per)
    model = group * per
    replicas = max(group, math.ceil(replicas / group) * group)
    return ((BATCH, replicas * per // model), ("model", model)), replicas
