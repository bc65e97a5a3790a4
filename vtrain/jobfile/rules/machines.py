"""Machine × accelerator × count, boot disks, cluster shape and the Reduction Server pool."""

from __future__ import annotations

import math
from dataclasses import replace

from vtrain import catalog
from vtrain.catalog.shapes import (
    CLOUD_TPU_TYPES,
    ShapeProblem,
    boot_disk_problem,
    nearest_shapes,
    shape_problem,
    tpu_vm_accelerator,
)
from vtrain.constants import MAX_REPLICAS
from vtrain.jobfile.config import JobConfig, PoolConfig
from vtrain.jobfile.nodes import did_you_mean
from vtrain.jobfile.rules.base import (
    Rules,
    machine_families,
    pool_path,
    with_suggestion,
)
from vtrain.jobfile.yamlpos import PathKey

# --------------------------------------------------------------------------- machines

_TPU_VMS = "ct4p-*, ct5p-*, ct5lp-*, ct6e-*"


def check_machine(r: Rules, pool: PoolConfig) -> PoolConfig:
    """Machine × accelerator × count × topology against the catalog's one verdict
    (:func:`vtrain.catalog.shapes.shape_problem`); returns the pool as the request sends it (enum names,
    the GPUs a machine comes with, a TPU VM's default topology)."""
    mt = pool.machine_type
    if not mt:
        r.add(pool_path(pool, "machine_type"), "missing machine_type; e.g. n1-standard-8 or a2-highgpu-1g")
        return pool
    row = catalog.MACHINES.get(mt)
    if row is None:
        r.add(
            pool_path(pool, "machine_type"),
            with_suggestion(
                f"unknown machine type '{mt}' for Vertex AI training; allowed families: {machine_families()}",
                did_you_mean(mt, catalog.ALL_MACHINE_TYPES),
            ),
        )
        return pool
    if not row.source.verified:
        r.warn(pool_path(pool, "machine_type"), f"{mt} is not confirmed on Vertex AI's training machine list"
                                                 f"{row.source.doubt()}: Vertex may refuse it when the job is created")
    accel = pool.accelerator
    if accel is not None:
        enum = catalog.normalize_accelerator(accel)
        if enum is None:
            r.add(
                pool_path(pool, "accelerator"),
                with_suggestion(f"unknown accelerator '{accel}'; allowed: {', '.join(catalog.ACCELERATOR_TYPES)}"
                      " (or aliases like a100, h100, l4, t4)", did_you_mean(accel, catalog.accelerator_spellings())),
            )
            return pool
        if catalog.BY_ENUM[enum].status != catalog.OFFERED:
            r.add(pool_path(pool, "accelerator"), catalog.BY_ENUM[enum].reason)
            return replace(pool, accelerator=enum)
        pool = replace(pool, accelerator=enum)
    sent = _as_sent(r, pool, row)
    problem = shape_problem(mt, sent.accelerator, sent.accelerator_count, sent.tpu_topology)
    if problem is not None:
        path, message = _worded(problem, pool, sent, row)
        written = [p for p in (pool_path(pool, k) for k in ("accelerator", "accelerator_count", "tpu_topology"))
                   if p in r.config.positions.values]  # where to point when `path` is a key the user left out
        r.add(path, message + problem.source.doubt(), "error" if problem.refused else "warning",
              at=written[0] if written else pool_path(pool, "machine_type"))
    return sent


def _as_sent(r: Rules, pool: PoolConfig, row: catalog.Machine) -> PoolConfig:
    """The pool as the request sends it: what the machine implies filled in, a TPU VM's own enum dropped."""
    accel, count = pool.accelerator, pool.accelerator_count
    if row.kind == "gpu" and (accel is None and count in (0, row.count) or accel == row.accelerator and count == 0):
        return replace(pool, accelerator=row.accelerator, accelerator_count=row.count)
    if row.kind == "tpu" and row.generation:
        topology = pool.tpu_topology if pool.tpu_topology is not None else row.topologies[0]
        named = tpu_vm_accelerator(row)
        if accel is not None and accel == named:
            r.warn(pool_path(pool, "accelerator"), f"{row.name} is a TPU {row.generation} VM, which {named} names "
                                                   "too: vtrain sends the machine type and tpu_topology, and leaves "
                                                   "accelerator and accelerator_count out of the request")
            return replace(pool, accelerator=None, accelerator_count=0, tpu_topology=topology)
        return replace(pool, tpu_topology=topology)
    return pool


def _nearest(pool: PoolConfig, accel: str, count: int) -> str:
    shapes = nearest_shapes(pool.machine_type, accel, count)
    return f"; nearest legal: {', '.join(shapes)}" if shapes else ""


def _worded(problem: ShapeProblem, pool: PoolConfig, sent: PoolConfig, row: catalog.Machine) -> tuple[PathKey, str]:
    """A shape problem in a job file's words: the key to fix, what is wrong, what is allowed, the nearest fix."""
    mt, accel, count = row.name, sent.accelerator or "", sent.accelerator_count
    acc_path, count_path = pool_path(pool, "accelerator"), pool_path(pool, "accelerator_count")
    machine_path, topo_path = pool_path(pool, "machine_type"), pool_path(pool, "tpu_topology")
    code = problem.code
    if code == "half" and row.name == catalog.CLOUD_TPU and not accel:
        code = "tpu-needs-type"
    elif code == "half":
        if not accel:
            return acc_path, (f"accelerator_count is {count} but no accelerator is set; set both (e.g. accelerator: "
                              "NVIDIA_TESLA_T4) or neither")
        legal = catalog.N1_GPUS.get(accel)
        counts = ", ".join(map(str, legal)) if legal else "8" if row.name == catalog.CLOUD_TPU else "1"
        return count_path, f"accelerator {accel} needs accelerator_count: one of {counts}"
    if code == "not-a-tpu-vm":
        what = "cloud-tpu" if row.name == catalog.CLOUD_TPU else mt
        return topo_path, f"tpu_topology applies only to TPU VM machine types ({_TPU_VMS}), not {what}; remove it"
    if code == "wrong-gpu":
        return acc_path, f"{mt} comes with {row.accelerator}, not {accel}; use {row.accelerator} or omit accelerator" \
            + _nearest(pool, accel, count)
    if code == "fixed-count":
        return count_path, (f"{mt} has exactly {row.count} × {row.accelerator}; set accelerator_count: {row.count} "
                            f"or omit it{_nearest(pool, accel, count)}")
    if code in ("tpu-needs-type", "not-for-machine") and row.name == catalog.CLOUD_TPU:
        return acc_path, (f"machine cloud-tpu needs accelerator {' or '.join(CLOUD_TPU_TYPES)}"
                          f"{'' if not accel else f', not {accel}'} with accelerator_count: 8")
    if code in ("tpu-count", "tpu-pod"):
        pod = "" if code == "tpu-count" else (
            f"; Vertex's training page names 8 cores (one {accel.removeprefix('TPU_').lower()}-8) only, so a pod "
            "slice may be refused at create")
        return count_path, (f"{accel} takes 8 cores (a single device) or a pod slice in multiples of 32, got {count}"
                            f"{pod}; set accelerator_count: 8")
    if code == "not-for-machine":
        named = tpu_vm_accelerator(row)
        also = f" (or {named}, which vtrain leaves out)" if named else ""
        return acc_path, (f"{mt} is a TPU {row.generation} VM: omit accelerator and accelerator_count{also}, "
                          "vtrain sends the machine type and tpu_topology")
    if code == "topology":
        return topo_path, with_suggestion(f"{mt} supports topologies {', '.join(row.topologies)}, got "
                                          f"'{sent.tpu_topology}'", did_you_mean(sent.tpu_topology or "",
                                                                                 row.topologies))
    if code == "tpu-elsewhere":
        vm = next((m.name for m in catalog.TPU_VM_MACHINES.values() if tpu_vm_accelerator(m) == accel), None)
        return acc_path, f"{accel} needs machine_type {vm or catalog.CLOUD_TPU}, not {mt}"
    if code == "no-gpus":
        hosts = sorted({m for m, g in catalog.GPU_MACHINES.items() if g.accelerator == accel})
        n1 = f"n1-standard-{row.vcpus}"
        hint = f"use one of {', '.join(hosts)}" if hosts else (
            f"use an n1-* machine such as {n1}" if n1 in catalog.CPU_MACHINES else "use an n1-* machine")
        return acc_path, f"{mt} cannot take GPUs; {hint}"
    if code == "not-on-n1":
        hosts = sorted(m for m, g in catalog.GPU_MACHINES.items() if g.accelerator == accel)
        return acc_path, f"{accel} is not offered on N1 machines; use machine_type {' or '.join(hosts[:4])}"
    legal = catalog.N1_GPUS[accel]
    if code == "n1-count":
        nearest = min(legal, key=lambda c: (abs(c - count), c))
        return count_path, (f"{accel} on N1 comes in counts {', '.join(map(str, legal))}, got {count}; "
                            f"did you mean {nearest}?")
    if code == "n1-vcpus":
        return machine_path, (f"{mt} has {row.vcpus} vCPUs but {count} × {accel} allows at most {legal[count]}"
                              f"{_nearest(pool, accel, count)}")
    return machine_path, (f"Vertex does not offer {accel} on {mt} (too much memory for the GPUs); use "
                          f"n1-highcpu-{row.vcpus} or a smaller n1 machine{_nearest(pool, accel, count)}")


def check_boot_disk(r: Rules, pool: PoolConfig) -> None:
    """The boot disk's size, and its type against the machine (Hyperdisk-only machines refuse pd-*)."""
    disk = pool.boot_disk
    if disk is None:
        return
    problem = boot_disk_problem(pool.machine_type, disk.type, disk.size_gb)
    if problem is None:
        return
    lo, hi = catalog.BOOT_DISK_GB
    if problem.field == "boot_disk_size_gb":
        r.add(pool_path(pool, "boot_disk", "size_gb"),
              f"boot disk must be {lo}–{hi} GB, got {disk.size_gb}; set size_gb: {min(max(disk.size_gb, lo), hi)}")
        return
    row = catalog.MACHINES[pool.machine_type]
    r.add(pool_path(pool, "boot_disk", "type"),
          f"{row.name} takes {', '.join(row.boot_disks)} boot disks only, not {disk.type}; set type: "
          f"{row.boot_disk_default} or leave type out (vtrain sends {row.boot_disk_default} there)"
          + problem.source.doubt(), "error" if problem.refused else "warning", at=pool_path(pool, "boot_disk"))


# --------------------------------------------------------------------------- cluster shape


def size_reducers(config: JobConfig, reducer: PoolConfig) -> int:
    """Sizing rule: reducers × reducer bandwidth ≥ Σ(pool 0+1 replicas × worker bandwidth)."""
    demand = 0.0
    for pool in (config.chief, config.workers):
        if pool is not None and pool.machine_type in catalog.ALL_MACHINE_TYPES:
            demand += int(pool.replicas) * catalog.nic_gbps(pool.machine_type)
    supply = catalog.nic_gbps(reducer.machine_type)
    return max(1, math.ceil(demand / supply - 1e-9))


def check_cluster(r: Rules, config: JobConfig) -> JobConfig:
    chief = config.chief
    if chief.replicas != 1:
        r.add(("cluster", "chief", "replicas"), f"the chief pool runs exactly 1 replica, got {chief.replicas}; "
                                                 "put extra replicas under cluster.workers")
    for pool in (config.workers, config.parameter_servers, config.evaluator):
        if pool is not None and pool.replicas == "auto":
            r.add(pool_path(pool, "replicas"), "'auto' is only for reduction_server replicas")
    if config.parameter_servers is not None and config.reduction_server is not None:
        r.add(("cluster", "reduction_server"), "parameter_servers and reduction_server both use worker pool 2; "
                                               "keep one of them")
    tpu_pools = [p for p in config.pools() if catalog.is_tpu_machine(p.machine_type)]
    if tpu_pools:
        others = [p for p in config.pools() if p.role != "chief"]
        if others or chief.replicas != 1:
            where = ("cluster", others[0].role) if others else ("cluster",)
            r.add(where, "a TPU job runs as one pool with one replica: keep only cluster.chief "
                         f"(found {', '.join(p.role for p in others) or 'more replicas'})")
    config = check_reduction_server(r, config)
    return config


def check_reduction_server(r: Rules, config: JobConfig) -> JobConfig:
    red = config.reduction_server
    if red is None:
        return config
    if red.machine_type in catalog.GPU_MACHINES or catalog.is_tpu_machine(red.machine_type):
        r.add(pool_path(red, "machine_type"), f"reducers run on CPU machines, not {red.machine_type}; use "
                                               f"{catalog.REDUCTION_SERVER_DEFAULT_MACHINE} (the default)")
    elif red.accelerator or red.accelerator_count:
        r.add(pool_path(red, "accelerator"), "reduction server replicas take no accelerators; remove accelerator "
                                              "and accelerator_count", at=pool_path(red, "accelerator_count"))
    gpu_workers = config.workers is not None and config.workers.gpus > 0 and config.workers.replicas
    if not gpu_workers:
        r.add(("cluster", "reduction_server"), "a reduction server needs GPU workers using NCCL all-reduce: "
                                               "add cluster.workers with GPUs, or remove reduction_server")
    gpu_replicas = sum(int(p.replicas) for p in (config.chief, config.workers) if p is not None and p.gpus)
    if gpu_workers and gpu_replicas < 2:
        r.add(("cluster", "reduction_server"), f"a reduction server needs at least 2 GPU replicas in chief + "
                                               f"workers, found {gpu_replicas}")
    image = image_of(config)
    # A non-GPU trainer.image alias is already reported against the GPU pools by check_image.
    if image is not None and (config.trainer.container is not None or image[0] == "gpu"):
        family, version = image
        if family != "gpu" or catalog.tf_version_tuple(version) < (2, 3):
            where = ("trainer", "container", "image_uri") if config.trainer.container else ("trainer", "image")
            r.add(where, f"a reduction server needs a tf-gpu prebuilt image ≥ 2.3, not tf-{family}.{version}; use "
                         f"tf-gpu.{catalog.DEFAULT_TF_VERSION}, or a custom container with NCCL ≥ 2.7 and "
                         "google-reduction-server")
    if red.replicas == "auto" and red.machine_type in catalog.ALL_MACHINE_TYPES:
        count = size_reducers(config, red)
        if count > MAX_REPLICAS:
            r.add(pool_path(red, "replicas"), f"'auto' sizes the reducer pool to {count:,} replicas, more than a "
                                              f"replica count can hold ({MAX_REPLICAS:,}); give fewer workers")
            return config
        config = replace(config, reduction_server=replace(red, replicas=count))
    return config


def image_of(config: JobConfig) -> tuple[str, str] | None:
    """(family, version) of a prebuilt image named by alias or full URI; None for other images."""
    image = config.trainer.image
    if config.trainer.container is not None:
        match = catalog.PREBUILT_URI_RE.match(config.trainer.container.image_uri)
        return (match["family"], match["version"]) if match else None
    if image is None:
        return None
    alias = catalog.IMAGE_ALIAS_RE.match(image)
    if alias:
        return (alias["family"] or "gpu", alias["version"])
    uri = catalog.PREBUILT_URI_RE.match(image)
    return (uri["family"], uri["version"]) if uri else None


