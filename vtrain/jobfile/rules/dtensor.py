"""`distribution_strategy: dtensor`: a mesh that covers every training replica's devices exactly.

DTensor makes one client per training replica (chief + workers) and lays the mesh over all their
devices, client 0's first: so the mesh's sizes multiply to replicas x devices per replica, and every
replica must bring the same number of devices. On GPU machines a replica's devices are its GPUs; a
CPU machine has no fixed count (the runtime gives each replica mesh size / replicas logical CPU
devices), so there the size need only split evenly over the replicas. Each refusal suggests a mesh
that fits, as close to the one written as the device count allows.
"""

from __future__ import annotations

import math
import re

from vtrain import catalog
from vtrain.constants import DTENSOR
from vtrain.jobfile.config import JobConfig, PoolConfig
from vtrain.jobfile.rules.base import Rules, pool_path

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Beyond these the search for the nearest factorisation stops and the plain batch x model split is offered.
_MAX_SEARCH_DEVICES = 1 << 13
_MAX_SEARCH_DIMS = 4
Mesh = tuple[tuple[str, int], ...]


def format_block(mesh: Mesh) -> str:
    """The mesh as a job file writes it, in flow style: `{batch: 2, model: 4}`."""
    return "{" + ", ".join(f"{name}: {size}" for name, size in mesh) + "}"


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _factorisations(n: int, parts: int) -> list[tuple[int, ...]]:
    """Every ordered way to write n as a product of `parts` positive integers."""
    if parts == 1:
        return [(n,)]
    return [(d, *rest) for d in _divisors(n) for rest in _factorisations(n // d, parts - 1)]


def nearest_mesh(mesh: Mesh, devices: int, per_replica: int = 1) -> Mesh:
    """The mesh with the same dimension names whose sizes multiply to `devices`, closest to `mesh`
    (the least total change of each size by factor; ties: the innermost dimension within one
    replica's devices, then biggest, as its collectives are the most frequent). One too large to
    search gets :func:`split_mesh`."""
    names = [name for name, _ in mesh] or ["batch", "model"]
    sizes = [size for _, size in mesh] or [1, 1]
    if len(names) == 1:
        return ((names[0], devices),)
    if devices > _MAX_SEARCH_DEVICES or len(names) > _MAX_SEARCH_DIMS:
        return split_mesh(mesh, devices, per_replica)

    def distance(candidate: tuple[int, ...]) -> tuple[float, bool, tuple[int, ...]]:
        change = sum(abs(math.log(c / max(1, s))) for c, s in zip(candidate, sizes, strict=True))
        return (round(change, 9), candidate[-1] > max(1, per_replica), tuple(-c for c in reversed(candidate)))

    best = min(_factorisations(devices, len(names)), key=distance)
    return tuple(zip(names, best, strict=True))


def split_mesh(mesh: Mesh, devices: int, per_replica: int) -> Mesh:
    """The replicas on the outermost dimension, one replica's devices on the innermost, the rest 1.

    A one-dimension mesh gets a `batch` dimension outside it for the replicas (unless it is `batch`)."""
    names = [name for name, _ in mesh] or ["batch", "model"]
    if len(names) == 1:
        if names[0] == "batch" or per_replica < 1 or devices % per_replica or devices == per_replica:
            return ((names[0], devices),)
        names = ["batch", names[0]]
    inner = per_replica if per_replica >= 1 and devices % per_replica == 0 else 1
    return ((names[0], devices // inner), *((name, 1) for name in names[1:-1]), (names[-1], inner))


def _warn_spanning(r: Rules, mesh: Mesh, replicas: int, per_replica: int, devices_each: str) -> None:
    """Warn when the innermost mesh dimension (a model dimension: its collectives run every layer) is
    larger than one replica's devices, so it spans replicas and its collectives cross the network.

    DTensor lays the mesh over the clients' devices in order, client 0's first, the innermost dimension
    fastest: that dimension stays within a replica only if it fits in one replica's devices. This holds
    for a mesh of any number of dimensions (`{model: 8}` over two 4-GPU machines as much as
    `{batch: 1, model: 8}`), GPUs or logical CPU devices alike; a `batch` dimension's all-reduce runs
    once per step, so it may span replicas."""
    if not mesh or replicas < 2 or per_replica < 1:
        return
    inner_name, inner = mesh[-1]
    if inner <= per_replica or inner_name == "batch":
        return
    fit = split_mesh(mesh, replicas * per_replica, per_replica)
    r.warn(("dtensor", "mesh", inner_name), f"the innermost dimension {inner_name} ({inner}) spans "
                                            f"{math.ceil(inner / per_replica)} replicas, so its collectives "
                                            "(every layer, for tensor parallelism) cross the network; keep "
                                            f"it within one replica's {devices_each}, e.g. mesh: "
                                            f"{format_block(fit)}")


def _devices(pool: PoolConfig) -> int | None:
    """Devices one replica of `pool` brings to the mesh: its GPUs; None on a CPU machine (any count)."""
    return catalog.gpus_per_machine(pool.machine_type, pool.gpus) if pool.hardware == "gpu" else None


def check_dtensor(r: Rules, config: JobConfig) -> None:
    d = config.dtensor
    if config.strategy.block != DTENSOR:
        if d is not None:
            r.add(("dtensor",), f"the dtensor block is only for distribution_strategy: dtensor (this job uses "
                                f"{config.distribution_strategy}); set it, or remove the dtensor block")
        return
    pools = [p for p in (config.chief, config.workers) if p is not None and int(p.replicas) > 0]
    replicas = sum(int(p.replicas) for p in pools)
    counts = [_devices(p) for p in pools]
    per_replica = counts[0] if counts and counts[0] else 1
    if d is None:
        fit = ((("batch", replicas), ("model", per_replica)))
        r.add(("distribution_strategy",), "dtensor needs a `dtensor:` block naming the "
                                          f"mesh, e.g. dtensor: {{mesh: {format_block(fit)}}} for this cluster "
                                          f"({replicas} replica(s) x {per_replica} device(s))")
        return
    for role in ("parameter_servers", "reduction_server"):
        pool = getattr(config, role)
        if pool is not None and pool.replicas != 0:
            r.add(("cluster", role), f"a DTensor job has no {role.replace('_', ' ')}: every replica holds its "
                                     "shards and DTensor's collectives run between the chief and workers; remove "
                                     f"cluster.{role}")
    bad = [name for name, _ in d.mesh if not _NAME.match(str(name))]
    for name in bad:
        fixed = re.sub(r"\W", "_", str(name))
        fixed = fixed if _NAME.match(fixed) else f"d_{fixed}"
        r.add(("dtensor", "mesh", name), f"mesh dimension name {str(name)!r} is not allowed: use letters, digits "
                                         f"and _, not starting with a digit (layouts name it), e.g. {fixed}")
    if bad or not pools:
        return
    if len(d.mesh) == 0:
        fit = (("batch", replicas), ("model", per_replica))
        r.add(("dtensor", "mesh"), f"the mesh needs at least one dimension, e.g. {format_block(fit)}")
        return
    _check_devices(r, config, pools, counts, replicas)


def _check_devices(r: Rules, config: JobConfig, pools: list[PoolConfig], counts: list[int | None],
                   replicas: int) -> None:
    d = config.dtensor
    assert d is not None
    written, size = format_block(d.mesh), d.size
    if len(set(counts)) > 1:
        first, other = pools[0], pools[-1]

        def have(n: int | None) -> str:
            return f"{n} GPU(s)" if n else "no GPU"

        r.add(pool_path(other, "accelerator_count"),
              f"every DTensor client brings the same devices to the mesh, but each chief replica has "
              f"{have(counts[0])} and each {other.role} replica {have(counts[-1])}; give cluster.{other.role} the "
              f"chief's machine ({first.machine_type}, {have(counts[0])})", at=pool_path(other))
        return
    per_replica = counts[0]
    if per_replica is not None:  # GPUs: the mesh covers them exactly
        devices = replicas * per_replica
        if size != devices:
            fit = nearest_mesh(d.mesh, devices, per_replica)
            r.add(("dtensor", "mesh"), f"mesh {written} covers {size} device(s), but chief + workers are {replicas} "
                                       f"replica(s) x {per_replica} GPU(s) = {devices}; allowed: sizes whose product "
                                       f"is {devices}, e.g. mesh: {format_block(fit)}")
            return
        _warn_spanning(r, d.mesh, replicas, per_replica, f"{per_replica} GPU(s)")
        return
    if size % replicas:  # CPU machines: mesh size / replicas logical devices each
        each = max(1, round(size / replicas))
        fit = nearest_mesh(d.mesh, each * replicas, each)
        r.add(("dtensor", "mesh"), f"mesh {written} covers {size} device(s), which {replicas} replica(s) cannot "
                                   f"split evenly (on CPU machines each replica gets mesh size / replicas logical "
                                   f"devices); allowed: a multiple of {replicas}, e.g. mesh: {format_block(fit)}")
        return
    vcpus = catalog.vcpus(config.chief.machine_type)
    each = size // replicas
    _warn_spanning(r, d.mesh, replicas, each, f"{each} logical CPU device(s)")
    if vcpus is not None and each > vcpus:
        r.warn(("dtensor", "mesh"), f"mesh {written} gives each replica {each} logical CPU devices, more than "
                                    f"{config.chief.machine_type}'s {vcpus} vCPUs: they share them and run slower")
