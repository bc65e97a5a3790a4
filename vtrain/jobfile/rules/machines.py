"""Machine × accelerator × count, boot disks, cluster shape and the Reduction Server pool."""

from __future__ import annotations

import math
from dataclasses import replace

from vtrain import catalog
from vtrain.constants import MAX_REPLICAS
from vtrain.jobfile.model import JobConfig, PoolConfig
from vtrain.jobfile.nodes import did_you_mean
from vtrain.jobfile.rules.base import (
    BOOT_DISK_GB,
    Rules,
    machine_families,
    pool_path,
    with_suggestion,
)

# --------------------------------------------------------------------------- machines


def check_machine(r: Rules, pool: PoolConfig) -> PoolConfig:
    """Machine × accelerator × count legality; returns the pool with enum names filled in."""
    mt = pool.machine_type
    if not mt:
        r.add(pool_path(pool, "machine_type"), "missing machine_type; e.g. n1-standard-8 or a2-highgpu-1g")
        return pool
    if mt not in catalog.ALL_MACHINE_TYPES:
        r.add(
            pool_path(pool, "machine_type"),
            with_suggestion(
                f"unknown machine type '{mt}' for Vertex AI training; allowed families: {machine_families()}",
                did_you_mean(mt, catalog.ALL_MACHINE_TYPES),
            ),
        )
        return pool
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
        accel = enum
        pool = replace(pool, accelerator=enum)
    count = pool.accelerator_count
    acc_path = pool_path(pool, "accelerator")
    count_path = pool_path(pool, "accelerator_count")

    if mt in catalog.GPU_MACHINES:
        fixed = catalog.GPU_MACHINES[mt]
        if pool.tpu_topology:
            r.add(pool_path(pool, "tpu_topology"), f"tpu_topology applies only to TPU VM machine types "
                                                    f"(ct4p-*, ct5p-*, ct5lp-*, ct6e-*), not {mt}; remove it")
        if accel is None and count == 0:
            return replace(pool, accelerator=fixed.accelerator, accelerator_count=fixed.count)
        if accel is not None and accel != fixed.accelerator:
            r.add(acc_path, f"{mt} comes with {fixed.accelerator}, not {accel}; "
                            f"use {fixed.accelerator} or omit accelerator")
        elif count not in (0, fixed.count):
            r.add(count_path, f"{mt} has exactly {fixed.count} × {fixed.accelerator}; "
                              f"set accelerator_count: {fixed.count} or omit it")
        return replace(pool, accelerator=fixed.accelerator, accelerator_count=fixed.count)

    if mt == catalog.CLOUD_TPU:
        if accel not in catalog.TPU_TYPES:
            r.add(acc_path, f"machine cloud-tpu needs accelerator {' or '.join(catalog.TPU_TYPES)}"
                            f"{'' if accel is None else f', not {accel}'} with accelerator_count: 8",
                  at=pool_path(pool, "machine_type"))
        elif count not in catalog.CLOUD_TPU_COUNTS and (count == 0 or count % catalog.CLOUD_TPU_POD_STEP):
            r.add(count_path, f"{accel} takes 8 cores (a single device) or a pod slice in multiples of 32, "
                              f"got {count}; set accelerator_count: 8")
        if pool.tpu_topology:
            r.add(pool_path(pool, "tpu_topology"),
                  "tpu_topology is for TPU VM machines (ct4p-*, ct5p-*, ct5lp-*, ct6e-*), not cloud-tpu")
        return pool

    if mt in catalog.TPU_VM_MACHINES:
        tpu = catalog.TPU_VM_MACHINES[mt]
        if accel is not None or count:
            r.add(acc_path, f"{mt} is a TPU {tpu.generation} VM: omit accelerator and accelerator_count, "
                            "vtrain sends the machine type and tpu_topology")
        if pool.tpu_topology is None:
            return replace(pool, tpu_topology=tpu.topologies[0], accelerator=None, accelerator_count=0)
        if pool.tpu_topology not in tpu.topologies:
            r.add(pool_path(pool, "tpu_topology"),
                  with_suggestion(f"{mt} supports topologies {', '.join(tpu.topologies)}, got '{pool.tpu_topology}'",
                        did_you_mean(pool.tpu_topology, tpu.topologies)))
        return replace(pool, accelerator=None, accelerator_count=0)

    # General-purpose machine: GPUs only on N1, with fixed legal counts.
    if pool.tpu_topology:
        r.add(pool_path(pool, "tpu_topology"), f"tpu_topology applies only to TPU VM machine types "
                                                f"(ct4p-*, ct5p-*, ct5lp-*, ct6e-*), not {mt}; remove it")
    if accel is None and count:
        r.add(acc_path, f"accelerator_count is {count} but no accelerator is set; set both (e.g. accelerator: "
                        "NVIDIA_TESLA_T4) or neither", at=count_path)
        return pool
    if accel is None:
        return pool
    if accel in catalog.TPU_TYPES:
        r.add(acc_path, f"{accel} needs machine_type cloud-tpu, not {mt}")
        return pool
    if not mt.startswith("n1-"):
        hosts = sorted({m for m, g in catalog.GPU_MACHINES.items() if g.accelerator == accel})
        n1 = f"n1-standard-{catalog.vcpus(mt)}"
        hint = f"use one of {', '.join(hosts)}" if hosts else (
            f"use an n1-* machine such as {n1}" if n1 in catalog.CPU_MACHINES else "use an n1-* machine")
        r.add(acc_path, f"{mt} cannot take GPUs; {hint}")
        return pool
    legal = catalog.N1_GPUS.get(accel)
    if legal is None:
        hosts = sorted(m for m, g in catalog.GPU_MACHINES.items() if g.accelerator == accel)
        r.add(acc_path, f"{accel} is not offered on N1 machines; use machine_type {' or '.join(hosts[:4])}")
        return pool
    if count == 0:
        r.add(count_path, f"accelerator {accel} needs accelerator_count: one of {', '.join(map(str, legal))}",
              at=acc_path)
        return pool
    if count not in legal:
        nearest = min(legal, key=lambda c: (abs(c - count), c))
        r.add(count_path, f"{accel} on N1 comes in counts {', '.join(map(str, legal))}, got {count}; "
                          f"did you mean {nearest}?")
        return pool
    cpus = catalog.vcpus(mt) or 0
    if cpus > legal[count]:
        r.add(pool_path(pool, "machine_type"),
              f"{mt} has {cpus} vCPUs but {count} × {accel} allows at most {legal[count]}; "
              f"use a smaller n1 machine or more GPUs")
    elif mt in catalog.N1_GPU_EXCLUDED.get(accel, ()):
        r.add(pool_path(pool, "machine_type"),
              f"Vertex does not offer {accel} on {mt} (too much memory for the GPUs); "
              f"use n1-highcpu-{cpus} or a smaller n1 machine")
    return pool


def check_boot_disk(r: Rules, pool: PoolConfig) -> None:
    disk = pool.boot_disk
    if disk is None:
        return
    lo, hi = BOOT_DISK_GB
    if not lo <= disk.size_gb <= hi:
        r.add(pool_path(pool, "boot_disk", "size_gb"),
              f"boot disk must be {lo}–{hi} GB, got {disk.size_gb}; set size_gb: {min(max(disk.size_gb, lo), hi)}")


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


