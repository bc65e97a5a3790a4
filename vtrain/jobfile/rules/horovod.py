"""`distribution_strategy: horovod` (vtrain.horovod), and trainers that still import the real Horovod.

A Horovod ring is the chief and the workers, one rank per replica (chief 0, then the workers), so:
no parameter servers (no place in the ring) and no Reduction Server (Vertex documents it for
MultiWorkerMirrored's NCCL all-reduce; vtrain.horovod is not tested with it); at most one GPU per
chief/worker replica, because Horovod runs one process per GPU and a Vertex replica runs one process
(eight GPUs on one machine would leave seven idle: use eight 1-GPU replicas); and since a restarted
rank cannot rejoin a running ring, a job of more than one replica is advised to restart as a whole
(scheduling.restart_job_on_worker_restart); an evaluator is no rank, so one that runs the trainer's
module is warned about (hvd.init() stops there). Whatever the strategy, a trainer that imports `horovod`
gets a warning with the one-line change: Horovod itself is on no Vertex image and no longer builds
against current TensorFlow.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from vtrain.constants import HOROVOD
from vtrain.foreign import printable
from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.rules.base import Rules, pool_path
from vtrain.userpaths import read_bounded

#: `import horovod...` / `from horovod... import`, at the start of a line (not vtrain.horovod).
_IMPORT = re.compile(rb"^[ \t]*(?:import[ \t]+horovod\b([.\w]*)|from[ \t]+horovod\b([.\w]*)[ \t]+import)", re.M)
#: The one-line change for each Horovod module a script imports.
REPLACEMENTS = {
    "horovod.tensorflow.keras": "vtrain.horovod.keras",
    "horovod.keras": "vtrain.horovod.keras",
    "horovod.tensorflow": "vtrain.horovod.tensorflow",
    "horovod": "vtrain.horovod",
}
_MAX_FILES = 2000
_MAX_BYTES = 1 << 20
_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "build", "dist"}


def horovod_imports(package: Path) -> list[tuple[str, int, str]]:
    """(file relative to the package, line, module) of each `horovod` import in the package's .py files.

    Bounded: at most 2,000 files of at most 1 MiB each, regular files only, hidden and build folders skipped.
    """
    found: list[tuple[str, int, str]] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(package):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS
                             and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            seen += 1
            if seen > _MAX_FILES:
                return found
            path = Path(dirpath) / name
            try:
                text = read_bounded(path, _MAX_BYTES)
            except OSError:
                continue
            for match in _IMPORT.finditer(text):
                module = "horovod" + (match.group(1) or match.group(2) or b"").decode("ascii", "replace")
                line = text.count(b"\n", 0, match.start()) + 1
                found.append((path.relative_to(package).as_posix(), line, module))
    return found


def _replacement(module: str) -> str:
    for prefix, ours in REPLACEMENTS.items():
        if module == prefix or module.startswith(prefix + "."):
            return ours
    return "vtrain.horovod"


def check_horovod_imports(r: Rules, config: JobConfig) -> None:
    package = config.trainer.package
    try:
        if package is None or not package.is_dir():
            return
    except OSError:  # a path the OS cannot take (too long, ...): the trainer's own rules say so
        return
    also = "" if config.distribution_strategy == HOROVOD else " and set distribution_strategy: horovod"
    for rel, line, module in horovod_imports(package)[:5]:
        ours = _replacement(module)
        r.warn(("trainer", "package"),
               f"{printable(rel)}:{line} imports {printable(module)}, which no Vertex image has and which does "
               f"not build against current TensorFlow; import {ours} instead (`import {ours} as hvd`){also}: "
               "see docs/guides/horovod.md")


def check_horovod(r: Rules, config: JobConfig) -> None:
    check_horovod_imports(r, config)
    if config.distribution_strategy != HOROVOD:
        return
    path = ("distribution_strategy",)
    if config.parameter_servers is not None and int(config.parameter_servers.replicas):
        r.add(path, "horovod ranks are the chief and the workers, all-reducing over a ring: parameter servers have "
                    "no place in it; remove cluster.parameter_servers (or use parameter_server)")
    if config.reduction_server is not None and config.reduction_server.replicas != 0:
        r.add(path, "horovod jobs run without Reduction Server: Vertex documents it for MultiWorkerMirrored's NCCL "
                    "all-reduce and vtrain.horovod is not tested with it; remove cluster.reduction_server (or use "
                    "multi_worker_mirrored)")
    for pool in (config.chief, config.workers):
        if pool is None or not int(pool.replicas) or pool.gpus <= 1:
            continue
        r.add(pool_path(pool, "accelerator_count"), at=pool_path(pool, "machine_type"), message=
              f"horovod runs one rank per GPU and a Vertex replica is one process, so {pool.gpus} GPUs per replica "
              f"would leave {pool.gpus - 1} idle; use {pool.gpus}x more replicas of a 1-GPU machine instead")
    evaluator = config.evaluator
    python = evaluator is not None and evaluator.container is None and config.trainer.container is None
    if python and evaluator is not None and int(evaluator.replicas) \
            and (evaluator.module or config.trainer.module) == config.trainer.module:
        r.add(pool_path(evaluator, "module"), "the evaluator is not a horovod rank, so the trainer's hvd.init() "
                                              "stops there; give cluster.evaluator its own module, or leave the "
                                              "evaluator out", "warning", at=pool_path(evaluator))
    if config.training_replicas() > 1 and not config.scheduling.restart_job_on_worker_restart:
        r.warn(("scheduling", "restart_job_on_worker_restart"),
               "a restarted horovod rank cannot rejoin the running ring (the others fail with it); set "
               "scheduling.restart_job_on_worker_restart: true so that Vertex restarts every replica together")
