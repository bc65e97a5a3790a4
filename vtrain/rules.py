"""Cross-field rules: what Vertex AI would reject, found before anything is uploaded.

:func:`validate` checks a built :class:`~vtrain.config.JobConfig` and returns a
normalized copy (accelerator aliases → enum names, machine-implied GPUs filled
in, `replicas: auto` reducers sized, default TPU topologies) plus every problem
found. Each message says what is wrong, what is allowed, and how to fix it.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

from vtrain import catalog
from vtrain.config import JobConfig, PoolConfig
from vtrain.errors import Problem
from vtrain.schema import did_you_mean
from vtrain.yamlpos import PathKey, format_path

MAX_LABELS = 64
MAX_ENV = 100
MAX_PACKAGE_URIS = 100
MAX_DISPLAY_NAME = 128
BOOT_DISK_GB = (100, 64000)
STRATEGY_ENV = "VTRAIN_DISTRIBUTION_STRATEGY"

_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GCS_URI = re.compile(r"^gs://(?P<bucket>[^/]+)(?P<path>/.*)?$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
_SERVICE_ACCOUNT = re.compile(r"^[a-z0-9-]+@[a-z0-9.-]+\.gserviceaccount\.com$")
_NETWORK = re.compile(r"^projects/[^/]+/global/networks/[^/]+$")
_TENSORBOARD = re.compile(r"^projects/[^/]+/locations/[^/]+/tensorboards/[^/]+$")
_RESERVATION = re.compile(r"^projects/[^/]+/zones/[^/]+/reservations/[^/]+$")
_KMS_KEY = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class _Rules:
    def __init__(self, config: JobConfig, target: str) -> None:
        self.config = config
        self.target = target
        self.problems: list[Problem] = []

    def add(self, path: PathKey, message: str, severity: str = "error", *, at: PathKey | None = None) -> None:
        """Report at `path`; `at` places it elsewhere when `path` is a key the user did not write."""
        positions = self.config.positions
        where = at if at is not None and path not in positions.values and path not in positions.keys else path
        pos = positions.of(where)
        self.problems.append(Problem(format_path(path), message, pos.file, pos.line, pos.column, severity))

    def warn(self, path: PathKey, message: str) -> None:
        self.add(path, message, "warning")


def _pool_path(pool: PoolConfig, *rest: str) -> PathKey:
    return ("cluster", pool.role, *rest)


def _hint(message: str, suggestion: str) -> str:
    """Append a did-you-mean, dropping the dangling ';' when there is none."""
    return f"{message};{suggestion}" if suggestion else message


def _machine_families() -> str:
    families = dict.fromkeys(m.split("-", 1)[0] for m in catalog.ALL_MACHINE_TYPES)
    return ", ".join(f"{f}-*" if f != catalog.CLOUD_TPU.split("-")[0] else catalog.CLOUD_TPU for f in families)


# --------------------------------------------------------------------------- machines


def _check_machine(r: _Rules, pool: PoolConfig) -> PoolConfig:
    """Machine × accelerator × count legality; returns the pool with enum names filled in."""
    mt = pool.machine_type
    if not mt:
        r.add(_pool_path(pool, "machine_type"), "missing machine_type; e.g. n1-standard-8 or a2-highgpu-1g")
        return pool
    if mt not in catalog.ALL_MACHINE_TYPES:
        r.add(
            _pool_path(pool, "machine_type"),
            _hint(f"unknown machine type '{mt}' for Vertex AI training; allowed families: {_machine_families()}",
                  did_you_mean(mt, catalog.ALL_MACHINE_TYPES)),
        )
        return pool
    accel = pool.accelerator
    if accel is not None:
        enum = catalog.normalize_accelerator(accel)
        if enum is None:
            r.add(
                _pool_path(pool, "accelerator"),
                _hint(f"unknown accelerator '{accel}'; allowed: {', '.join(catalog.ACCELERATOR_TYPES)}"
                      " (or aliases like a100, h100, l4, t4)", did_you_mean(accel, catalog.accelerator_spellings())),
            )
            return pool
        accel = enum
        pool = replace(pool, accelerator=enum)
    count = pool.accelerator_count
    acc_path = _pool_path(pool, "accelerator")
    count_path = _pool_path(pool, "accelerator_count")

    if mt in catalog.GPU_MACHINES:
        fixed = catalog.GPU_MACHINES[mt]
        if pool.tpu_topology:
            r.add(_pool_path(pool, "tpu_topology"), f"tpu_topology applies only to TPU VM machine types "
                                                    f"(ct5lp-*, ct6e-*), not {mt}; remove it")
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
                  at=_pool_path(pool, "machine_type"))
        elif count not in catalog.CLOUD_TPU_COUNTS and (count == 0 or count % catalog.CLOUD_TPU_POD_STEP):
            r.add(count_path, f"{accel} takes 8 cores (a single device) or a pod slice in multiples of 32, "
                              f"got {count}; set accelerator_count: 8")
        if pool.tpu_topology:
            r.add(_pool_path(pool, "tpu_topology"),
                  "tpu_topology is for TPU VM machines (ct5lp-*, ct6e-*), not cloud-tpu")
        return pool

    if mt in catalog.TPU_VM_MACHINES:
        tpu = catalog.TPU_VM_MACHINES[mt]
        if accel is not None or count:
            r.add(acc_path, f"{mt} is a TPU {tpu.generation} VM: omit accelerator and accelerator_count, "
                            "vtrain sends the machine type and tpu_topology")
        if pool.tpu_topology is None:
            return replace(pool, tpu_topology=tpu.topologies[0], accelerator=None, accelerator_count=0)
        if pool.tpu_topology not in tpu.topologies:
            r.add(_pool_path(pool, "tpu_topology"),
                  _hint(f"{mt} supports topologies {', '.join(tpu.topologies)}, got '{pool.tpu_topology}'",
                        did_you_mean(pool.tpu_topology, tpu.topologies)))
        return replace(pool, accelerator=None, accelerator_count=0)

    # General-purpose machine: GPUs only on N1, with fixed legal counts.
    if pool.tpu_topology:
        r.add(_pool_path(pool, "tpu_topology"), f"tpu_topology applies only to TPU VM machine types "
                                                f"(ct5lp-*, ct6e-*), not {mt}; remove it")
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
        r.add(_pool_path(pool, "machine_type"),
              f"{mt} has {cpus} vCPUs but {count} × {accel} allows at most {legal[count]}; "
              f"use a smaller n1 machine or more GPUs")
    return pool


def _check_boot_disk(r: _Rules, pool: PoolConfig) -> None:
    disk = pool.boot_disk
    if disk is None:
        return
    lo, hi = BOOT_DISK_GB
    if not lo <= disk.size_gb <= hi:
        r.add(_pool_path(pool, "boot_disk", "size_gb"),
              f"boot disk must be {lo}–{hi} GB, got {disk.size_gb}; set size_gb: {min(max(disk.size_gb, lo), hi)}")


# --------------------------------------------------------------------------- cluster shape


def _size_reducers(config: JobConfig, reducer: PoolConfig) -> int:
    """Sizing rule: reducers × reducer bandwidth ≥ Σ(pool 0+1 replicas × worker bandwidth)."""
    demand = 0.0
    for pool in (config.chief, config.workers):
        if pool is not None and pool.machine_type in catalog.ALL_MACHINE_TYPES:
            demand += int(pool.replicas) * catalog.nic_gbps(pool.machine_type)
    supply = catalog.nic_gbps(reducer.machine_type)
    return max(1, math.ceil(demand / supply - 1e-9))


def _check_cluster(r: _Rules, config: JobConfig) -> JobConfig:
    chief = config.chief
    if chief.replicas != 1:
        r.add(("cluster", "chief", "replicas"), f"the chief pool runs exactly 1 replica, got {chief.replicas}; "
                                                 "put extra replicas under cluster.workers")
    for pool in (config.workers, config.parameter_servers, config.evaluator):
        if pool is not None and pool.replicas == "auto":
            r.add(_pool_path(pool, "replicas"), "'auto' is only for reduction_server replicas")
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
    config = _check_reduction_server(r, config)
    return config


def _check_reduction_server(r: _Rules, config: JobConfig) -> JobConfig:
    red = config.reduction_server
    if red is None:
        return config
    if red.machine_type in catalog.GPU_MACHINES or catalog.is_tpu_machine(red.machine_type):
        r.add(_pool_path(red, "machine_type"), f"reducers run on CPU machines, not {red.machine_type}; use "
                                               f"{catalog.REDUCTION_SERVER_DEFAULT_MACHINE} (the default)")
    elif red.accelerator or red.accelerator_count:
        r.add(_pool_path(red, "accelerator"), "reduction server replicas take no accelerators; remove accelerator "
                                              "and accelerator_count", at=_pool_path(red, "accelerator_count"))
    gpu_workers = config.workers is not None and config.workers.gpus > 0 and config.workers.replicas
    if not gpu_workers:
        r.add(("cluster", "reduction_server"), "a reduction server needs GPU workers using NCCL all-reduce: "
                                               "add cluster.workers with GPUs, or remove reduction_server")
    gpu_replicas = sum(int(p.replicas) for p in (config.chief, config.workers) if p is not None and p.gpus)
    if gpu_workers and gpu_replicas < 2:
        r.add(("cluster", "reduction_server"), f"a reduction server needs at least 2 GPU replicas in chief + "
                                               f"workers, found {gpu_replicas}")
    image = _image_of(config)
    # A non-GPU trainer.image alias is already reported against the GPU pools by _check_image.
    if image is not None and (config.trainer.container is not None or image[0] == "gpu"):
        family, version = image
        if family != "gpu" or catalog.tf_version_tuple(version) < (2, 3):
            where = ("trainer", "container", "image_uri") if config.trainer.container else ("trainer", "image")
            r.add(where, f"a reduction server needs a tf-gpu prebuilt image ≥ 2.3, not tf-{family}.{version}; use "
                         f"tf-gpu.{catalog.DEFAULT_TF_VERSION}, or a custom container with NCCL ≥ 2.7 and "
                         "google-reduction-server")
    if red.replicas == "auto" and red.machine_type in catalog.ALL_MACHINE_TYPES:
        sized = replace(red, replicas=_size_reducers(config, red))
        config = replace(config, reduction_server=sized)
    return config


def _image_of(config: JobConfig) -> tuple[str, str] | None:
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


# --------------------------------------------------------------------------- trainer and images


def pool_hardware(pool: PoolConfig) -> str:
    """'tpu', 'gpu' or 'cpu': what a pool runs on, which decides its prebuilt image family."""
    if catalog.is_tpu_machine(pool.machine_type):
        return "tpu"
    return "gpu" if pool.gpus else "cpu"


def _check_trainer(r: _Rules, config: JobConfig) -> None:
    t = config.trainer
    sources = [name for name, on in (("package", t.package is not None), ("package_uris", bool(t.package_uris)),
                                      ("container", t.container is not None)) if on]
    if len(sources) != 1:
        what = "none" if not sources else " and ".join(sources)
        r.add(("trainer",), f"the trainer needs exactly one of package, package_uris or container (found {what})")
        return
    if t.container is not None:
        for key in ("module", "image"):
            if getattr(t, key) is not None:
                r.add(("trainer", key), f"trainer.{key} is for python-package trainers; a container runs its own "
                                        "entrypoint (set trainer.container.command instead)")
        return
    if not t.module:
        r.add(("trainer", "module"), "python-package trainers need trainer.module, the `python -m` target, "
                                     "e.g. trainer.task")
    elif not _MODULE.match(t.module):
        r.add(("trainer", "module"), f"'{t.module}' is not a Python module path like trainer.task")
    for i, uri in enumerate(t.package_uris):
        _check_gcs(r, ("trainer", "package_uris", i), uri)
    if len(t.package_uris) > MAX_PACKAGE_URIS:
        r.add(("trainer", "package_uris"), f"at most {MAX_PACKAGE_URIS} package URIs, got {len(t.package_uris)}")
    if t.package is not None:
        _check_package_dir(r, t.package, t.module)
        if config.staging_bucket is None and r.target == "vertex":
            r.add(("trainer", "package"), "a local trainer package is staged before submitting: set "
                                          "staging_bucket: gs://BUCKET/staging")
    _check_image(r, config)


def _check_package_dir(r: _Rules, package: Path, module: str | None) -> None:
    path = ("trainer", "package")
    if not package.is_dir():
        r.add(path, f"trainer package directory not found: {package}; set trainer.package to the directory "
                    "holding pyproject.toml (a relative path starts at the job file's directory)")
        return
    if not (package / "pyproject.toml").is_file() and not (package / "setup.py").is_file():
        r.add(path, f"{package} has no pyproject.toml or setup.py; it must be an installable Python package")
        return
    if module and _MODULE.match(module):
        rel = Path(*module.split("."))
        candidates = [package / root / rel.with_suffix(".py") for root in (".", "src")]
        candidates += [package / root / rel / "__init__.py" for root in (".", "src")]
        candidates += [package / root / rel / "__main__.py" for root in (".", "src")]
        if not any(c.is_file() for c in candidates):
            found = _package_modules(package)
            hint = did_you_mean(module, found) or (f" modules found: {', '.join(found[:5])}" if found else "")
            r.add(("trainer", "module"), _hint(f"module {module} not found in {package} (looked for "
                                               f"{rel.with_suffix('.py')} and src/{rel.with_suffix('.py')})", hint))


def _package_modules(package: Path) -> list[str]:
    """Dotted names of the Python modules in a trainer package, for did-you-mean (bounded walk)."""
    found: list[str] = []
    for root in (package, package / "src"):
        for file in sorted(root.glob("*/**/*.py"))[:200]:
            rel = file.relative_to(root).with_suffix("")
            parts = rel.parts[:-1] if rel.name in ("__init__", "__main__") else rel.parts
            if parts and all(_MODULE.match(part) for part in parts):
                found.append(".".join(parts))
    return list(dict.fromkeys(found))


def _check_image(r: _Rules, config: JobConfig) -> None:
    image = config.trainer.image
    if image is None:
        return
    alias = catalog.IMAGE_ALIAS_RE.match(image)
    uri = catalog.PREBUILT_URI_RE.match(image)
    if alias is None and uri is None:
        if "/" not in image:
            r.add(("trainer", "image"), f"'{image}' is neither a prebuilt image alias nor an image URI; use "
                                        "tf-cpu.2-17, tf-gpu.2-17, tf-tpu.2-17, or tf.2-17 to pick per pool")
        else:
            r.add(("trainer", "image"), "python-package trainers run on a Vertex prebuilt image "
                                        "(…-docker.pkg.dev/vertex-ai/training/tf-…); for your own image use "
                                        "trainer.container", "warning")
        return
    match = alias or uri
    assert match is not None
    family, version = match["family"], match["version"]
    families = [family] if family else sorted({pool_hardware(p) for p in config.pools()
                                               if p.role != "reduction_server"})
    for fam in families:
        known = catalog.PREBUILT_TF[fam]
        if version not in known:
            ordered = sorted(known, key=catalog.tf_version_tuple)
            r.add(("trainer", "image"), f"no prebuilt tf-{fam} image for TensorFlow {version.replace('-', '.')}; "
                                        f"available: {', '.join(ordered)}; e.g. tf-{fam}.{ordered[-1]}")
            return
    if family is None:
        return
    for pool in config.pools():
        if pool.role == "reduction_server":
            continue
        need = pool_hardware(pool)
        if need != family:
            r.add(("trainer", "image"), f"tf-{family} image but cluster.{pool.role} runs on {need.upper()}; use "
                                        f"tf-{need}.{version}, or tf.{version} to pick the right image per pool")
            return


# --------------------------------------------------------------------------- strategy


def _check_strategy(r: _Rules, config: JobConfig) -> None:
    strategy = config.distribution_strategy
    path = ("distribution_strategy",)
    replicas = config.training_replicas()
    has_workers = config.workers is not None and bool(config.workers.replicas)
    is_tpu = catalog.is_tpu_machine(config.chief.machine_type)
    has_ps = config.parameter_servers is not None and bool(config.parameter_servers.replicas)
    if strategy == "auto":
        return
    if is_tpu and strategy != "tpu":
        r.add(path, f"the chief is a TPU machine, so the strategy must be tpu (or auto), not {strategy}")
    elif strategy == "tpu" and not is_tpu:
        r.add(path, "strategy tpu needs a TPU machine (cloud-tpu, ct5lp-*, ct6e-*) for the chief")
    elif strategy == "parameter_server" and not has_ps:
        r.add(path, "strategy parameter_server needs cluster.parameter_servers; add them or use "
                    "multi_worker_mirrored")
    elif has_ps and strategy != "parameter_server":
        r.add(path, f"the cluster has parameter servers, so the strategy must be parameter_server (or auto), "
                    f"not {strategy}")
    elif strategy == "multi_worker_mirrored" and not has_workers:
        r.add(path, "strategy multi_worker_mirrored needs cluster.workers; add workers or use mirrored")
    elif strategy in ("mirrored", "one_device") and replicas != 1:
        r.add(path, f"strategy {strategy} runs on one machine but chief + workers have {replicas} replicas; "
                    "use multi_worker_mirrored")
    elif strategy == "mirrored" and config.chief.gpus < 2:
        r.warn(path, f"mirrored on {config.chief.gpus or 'no'} GPU(s) does not distribute anything; "
                     "one_device is equivalent")
    elif strategy == "one_device" and config.chief.gpus > 1:
        r.warn(path, f"one_device uses 1 of the chief's {config.chief.gpus} GPUs; use mirrored")


# --------------------------------------------------------------------------- job-level fields


def _check_gcs(r: _Rules, path: PathKey, uri: str) -> bool:
    match = _GCS_URI.match(uri)
    if not match or not _BUCKET.match(match["bucket"]) or ".." in match["bucket"] or "//" in (match["path"] or ""):
        r.add(path, f"'{uri}' is not a well-formed Cloud Storage URI; expected gs://BUCKET/PATH "
                    "(bucket: 3-63 lower-case letters, digits, dashes, dots)")
        return False
    return True


def _check_job_fields(r: _Rules, config: JobConfig) -> None:
    if not config.name.strip():
        r.add(("name",), "the job name must not be empty")
    elif len(config.name) > MAX_DISPLAY_NAME:
        r.add(("name",), f"the job name is {len(config.name)} characters; Vertex allows at most {MAX_DISPLAY_NAME}")
    if not _REGION.match(config.region):
        r.add(("region",), _hint(f"'{config.region}' is not a region name like us-central1",
                                 did_you_mean(config.region, catalog.REGIONS)))
    elif config.region not in catalog.REGIONS:
        r.warn(("region",), _hint(f"'{config.region}' is not a known Vertex AI training region",
                                  did_you_mean(config.region, catalog.REGIONS)))
    for key in ("staging_bucket", "base_output_dir"):
        value = getattr(config, key)
        if value is None:
            continue
        if value.startswith(("gs:", "gs/")):
            _check_gcs(r, (key,), value)
        elif r.target == "vertex":
            r.add((key,), f"'{value}' is a local path; Vertex AI needs gs://BUCKET/PATH "
                          "(local paths work only with `vtrain local`)")
    if len(config.labels) > MAX_LABELS:
        r.add(("labels",), f"at most {MAX_LABELS} labels, got {len(config.labels)}")
    for key, value in config.labels.items():
        if not _LABEL_KEY.match(key):
            r.add(("labels", key), f"label key '{key}' must start with a lower-case letter and use only "
                                   f"lower-case letters, digits, _ and - (≤ 63 chars); try '{_label_fix(key)}'")
        if not _LABEL_VALUE.match(value):
            r.add(("labels", key), f"label value '{value}' may use only lower-case letters, digits, _ and - "
                                   f"(≤ 63 chars); try '{_label_fix(value)}'")
    if config.service_account and not _SERVICE_ACCOUNT.match(config.service_account):
        r.add(("service_account",), f"'{config.service_account}' is not a service account email like "
                                    "NAME@PROJECT.iam.gserviceaccount.com")
    if config.network and not _NETWORK.match(config.network):
        r.add(("network",), f"network must look like projects/PROJECT_NUMBER/global/networks/NAME, "
                            f"got '{config.network}'")
    if config.reserved_ip_ranges and not config.network:
        r.add(("reserved_ip_ranges",), "reserved_ip_ranges need a peered network: set network too")
    if config.kms_key and not _KMS_KEY.match(config.kms_key):
        r.add(("kms_key",), "kms_key must look like projects/P/locations/L/keyRings/R/cryptoKeys/K")
    if config.tensorboard:
        if not _TENSORBOARD.match(config.tensorboard):
            r.add(("tensorboard",), "tensorboard must look like projects/P/locations/L/tensorboards/ID")
        if not config.service_account:
            r.add(("tensorboard",), "Vertex requires service_account when tensorboard is set")
        if not config.base_output_dir:
            r.add(("tensorboard",), "Vertex requires base_output_dir when tensorboard is set (logs go there)")


def _label_fix(text: str) -> str:
    fixed = re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]
    return fixed if fixed[:1].isalpha() else f"x{fixed}"[:63]


def _check_env(r: _Rules, config: JobConfig) -> None:
    base = dict(config.trainer.env)
    for key in base:
        if not _ENV_NAME.match(key):
            r.add(("trainer", "env", key), _env_name_message(key))
    over: dict[str, int] = {}
    for pool in config.pools():
        merged = {**base, **(pool.env or {}), STRATEGY_ENV: ""}
        for key in pool.env or {}:
            if not _ENV_NAME.match(key):
                r.add(_pool_path(pool, "env", key), _env_name_message(key))
        if len(merged) > MAX_ENV and pool.role != "reduction_server":
            over[f"cluster.{pool.role}"] = len(merged)
    if over:  # one message for one breakage, however many pools share trainer.env
        most = max(over.values())
        r.add(("trainer", "env"), f"{', '.join(over)} would get up to {most} environment variables (vtrain adds "
                                  f"{STRATEGY_ENV}); Vertex allows at most {MAX_ENV}: remove {most - MAX_ENV}")


def _env_name_message(key: str) -> str:
    fixed = re.sub(r"[^A-Za-z0-9_]", "_", key)
    fixed = fixed if fixed[:1].isalpha() or fixed[:1] == "_" else f"_{fixed}"
    return (f"'{key}' is not a valid environment variable name (letters, digits and _, not starting with a "
            f"digit); try '{fixed}'")


def _check_scheduling(r: _Rules, config: JobConfig) -> None:
    sched = config.scheduling
    if sched.max_wait_s is not None and sched.strategy != "flex_start":
        r.add(("scheduling", "max_wait"), "max_wait only applies to strategy: flex_start; set "
                                          "scheduling.strategy: flex_start or remove max_wait")
    if sched.strategy == "flex_start":
        machines = {(p.machine_type, p.accelerator, p.accelerator_count) for p in config.pools()}
        if len(machines) > 1:
            r.add(("scheduling", "strategy"), "flex_start needs the same machine (type and accelerators) in every "
                                              f"pool; found {len(machines)}: "
                                              + ", ".join(sorted(m[0] for m in machines)))
    if sched.strategy not in ("spot", "flex_start"):
        for pool in config.pools():
            if pool.machine_type in catalog.SPOT_OR_FLEX_ONLY:
                r.warn(_pool_path(pool, "machine_type"), f"{pool.machine_type} is offered only as Spot or "
                                                         "flex-start capacity; set scheduling.strategy")
    res = config.reservation
    if res is not None:
        if res.affinity == "specific" and not res.name:
            r.add(("reservation", "name"), "affinity specific needs the reservation name "
                                           "projects/P/zones/Z/reservations/R", at=("reservation", "affinity"))
        elif res.name and res.affinity != "specific":
            r.add(("reservation", "affinity"), "a reservation name is only used with affinity: specific")
        elif res.name and not _RESERVATION.match(res.name):
            r.add(("reservation", "name"), "reservation name must look like projects/P/zones/Z/reservations/R")


def _machine_key(pool: PoolConfig) -> tuple[object, ...]:
    return (pool.machine_type, pool.accelerator, pool.accelerator_count, pool.tpu_topology, pool.boot_disk)


def validate(config: JobConfig, *, target: str = "vertex") -> tuple[JobConfig, list[Problem]]:
    """Check every rule; return the normalized config and all problems (errors and warnings)."""
    r = _Rules(config, target)
    pools: dict[str, PoolConfig] = {}
    chief_machine = _machine_key(config.chief)
    for pool in [config.chief, config.workers, config.parameter_servers, config.reduction_server, config.evaluator]:
        if pool is None:
            continue
        if pool.role != "chief" and _machine_key(pool) == chief_machine:
            # Same machine as the chief (usually inherited): reuse its verdict, report nothing twice.
            chief = pools["chief"]
            pools[pool.role] = replace(pool, accelerator=chief.accelerator, accelerator_count=chief.accelerator_count,
                                       tpu_topology=chief.tpu_topology)
        else:
            pools[pool.role] = _check_machine(r, pool)
            _check_boot_disk(r, pool)
    config = replace(
        config,
        chief=pools["chief"],
        workers=pools.get("workers"),
        parameter_servers=pools.get("parameter_servers"),
        reduction_server=pools.get("reduction_server"),
        evaluator=pools.get("evaluator"),
    )
    r.config = config
    config = _check_cluster(r, config)
    r.config = config
    _check_trainer(r, config)
    _check_strategy(r, config)
    _check_job_fields(r, config)
    _check_env(r, config)
    _check_scheduling(r, config)
    return config, r.problems
