"""`distribution_strategy: diloco`: the syncer on pool 0 (CPU), standalone learners on the worker pool(s)."""

from __future__ import annotations

from vtrain import catalog
from vtrain.constants import DILOCO, DILOCO_SYNCER_MODULE
from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.rules.base import Rules, pool_path

#: More fragments than a model has tensor groups is no use; this also bounds validate's divisor search.
MAX_FRAGMENTS = 1024


def check_diloco(r: Rules, config: JobConfig) -> None:
    d = config.diloco
    if config.strategy.block != DILOCO:
        if d is not None:
            r.add(("diloco",), f"diloco settings are only for distribution_strategy: diloco (this job uses "
                               f"{config.distribution_strategy}); set it, or remove the diloco block")
        return
    if d is None:
        return
    chief = config.chief
    if chief.hardware != "cpu":
        what = "a TPU" if chief.hardware == "tpu" else f"{chief.gpus or 'implied'} GPU(s)"
        r.add(pool_path(chief, "machine_type"), f"pool 0 runs the DiLoCo syncer, which needs only CPUs, but "
                                                f"{chief.machine_type} has {what}; use a CPU machine such as "
                                                "n1-standard-8 and put the accelerators on cluster.workers",
              at=pool_path(chief))
    if chief.module is not None:
        r.add(pool_path(chief, "module"), f"pool 0 runs the syncer ({DILOCO_SYNCER_MODULE}), not a module of yours: "
                                          "remove cluster.chief.module (learners take theirs on cluster.workers)")
    if chief.args:
        r.add(pool_path(chief, "args"), f"pool 0 runs the syncer ({DILOCO_SYNCER_MODULE}), which takes no "
                                        "arguments: remove cluster.chief.args")
    learners = config.learners()
    if config.workers is None or not config.workers.replicas:
        r.add(("cluster", "workers"), "DiLoCo needs learners: add cluster.workers with replicas >= 1 "
                                      "(each one trains alone on its own machine)", at=("cluster",))
    for role, pool in (("parameter_servers", config.parameter_servers), ("reduction_server", config.reduction_server)):
        if pool is not None:
            r.add(("cluster", role), f"DiLoCo jobs have no {role.replace('_', ' ')}: learners exchange with the "
                                     f"syncer, not by all-reduce; remove cluster.{role}")
    for pool in (config.workers, config.second_learners):
        if pool is not None and catalog.is_tpu_machine(pool.machine_type):
            r.add(pool_path(pool, "machine_type"), "DiLoCo learners run on CPU or GPU machines, not TPUs")
    if d.min_quorum is not None and learners and d.min_quorum > learners:
        r.add(("diloco", "min_quorum"), f"min_quorum {d.min_quorum} is more than the {learners} learner(s); use "
                                        f"at most {learners} (or leave it out: every learner alive)")
    if d.fragments > MAX_FRAGMENTS:  # also bounds the search for a divisor below
        r.add(("diloco", "fragments"), f"fragments ({d.fragments:,}) must be at most {MAX_FRAGMENTS}: each "
                                       "fragment is a group of the model's tensors, exchanged in turn")
    elif d.fragments > d.inner_steps:
        r.add(("diloco", "fragments"), f"fragments ({d.fragments}) must be at most inner_steps ({d.inner_steps}): "
                                       "each fragment is exchanged every inner_steps / fragments steps")
    elif d.inner_steps % d.fragments:
        lower = max(f for f in range(1, d.fragments + 1) if d.inner_steps % f == 0)
        r.add(("diloco", "fragments"), f"inner_steps ({d.inner_steps}) must be a multiple of fragments "
                                       f"({d.fragments}); e.g. fragments: {lower}")
    if d.straggler_timeout <= 0:
        r.add(("diloco", "straggler_timeout"), "straggler_timeout must be longer than 0s (heartbeats are sent "
                                               "5 times within it)")
    if config.scheduling.restart_job_on_worker_restart:
        r.warn(("scheduling", "restart_job_on_worker_restart"), "restarts every learner (and the syncer) when one "
                                                                "learner restarts, which undoes DiLoCo's fault "
                                                                "tolerance; leave it false")
    if config.trainer.container is not None:
        r.warn(("trainer", "container"), f"pool 0 will run `python3 -m {DILOCO_SYNCER_MODULE}` in this image: it "
                                         "needs vtrain (pip install vtrain) besides TensorFlow")
    elif config.trainer.package is None and config.trainer.package_uris:
        r.warn(("trainer", "package_uris"), f"pool 0 runs {DILOCO_SYNCER_MODULE}: include vtrain's runtime sdist "
                                            "(`vtrain package` builds it) in package_uris")

