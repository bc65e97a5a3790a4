"""The pure part of the runtime: which strategy fits this replica, decided from the environment.

No TensorFlow and no os.environ in :func:`choose_strategy`: every branch is table-tested. :func:`decide`
probes the machine (GPUs through TensorFlow, TPUs through files) only when the choice depends on it.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from vtrain import strategies
from vtrain.errors import RuntimeMismatch

log = logging.getLogger("vtrain.runtime")

DEFAULT_COLLECTIVE_TIMEOUT = 300.0
#: The strategies a replica understands: the job file's (the rows of vtrain.strategies).
RUNTIME_STRATEGIES = tuple(strategies.BY_NAME)


@dataclass(frozen=True)
class Decision:
    """Which strategy to build and why; everything a replica needs to know about its role."""

    strategy: str  # default | one_device | mirrored | multi_worker_mirrored | parameter_server | tpu | diloco | dtensor
    #               | horovod
    reason: str
    task_type: str
    task_index: int
    is_chief: bool
    num_workers: int  # chief + workers taking part in training (1 without TF_CONFIG)
    communication: str | None = None  # NCCL | RING for multi_worker_mirrored
    collective_timeout: float | None = None

    @property
    def row(self) -> strategies.Strategy:
        """The strategy's row in :mod:`vtrain.strategies` (``default`` has one too)."""
        return strategies.get(self.strategy)

    @property
    def multi_worker(self) -> bool:
        return self.row.multi_worker


@dataclass(frozen=True)
class Info:
    """What a trainer usually logs or branches on."""

    task_type: str
    task_index: int
    is_chief: bool
    num_workers: int  # chief + worker replicas taking part in training
    num_replicas_in_sync: int  # devices a global batch is split across
    strategy: str
    reason: str
    job_id: str | None
    restarts: int = 0  # times this replica was restarted in place (VTRAIN_RESTART_COUNT, or the ledger)
    job_attempt: int = 1  # 1, then 2 after a whole-job retry (VTRAIN_JOB_ATTEMPT)
    trial_id: str | None = None  # CLOUD_ML_TRIAL_ID: set in the replicas of a tuning trial

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- the decision (pure)


def _tf_config(env: Mapping[str, str]) -> dict[str, Any]:
    raw = env.get("TF_CONFIG", "").strip()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise RuntimeMismatch(f"TF_CONFIG is not valid JSON ({err.msg} at char {err.pos})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cluster", {}), dict):
        raise RuntimeMismatch("TF_CONFIG must be a JSON object with a `cluster` object")
    return data


def _task(env: Mapping[str, str], tf_config: Mapping[str, Any]) -> tuple[str, int]:
    task = tf_config.get("task") or {}
    if task.get("type"):
        kind = str(task["type"])
        return ("chief" if kind == "master" else kind), int(task.get("index", 0))
    # One-replica jobs get no TF_CONFIG; CLUSTER_SPEC still names the pool (workerpool0 = primary).
    try:
        spec_task = json.loads(env.get("CLUSTER_SPEC", "") or "{}").get("task") or {}
    except json.JSONDecodeError:
        spec_task = {}
    pools = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps", "workerpool3": "evaluator"}
    return pools.get(str(spec_task.get("type", "workerpool0")), "chief"), int(spec_task.get("index", 0))


def _timeout(env: Mapping[str, str]) -> float | None:
    raw = env.get("VTRAIN_COLLECTIVE_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_COLLECTIVE_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise RuntimeMismatch(f"VTRAIN_COLLECTIVE_TIMEOUT={raw!r} is not a number of seconds") from None
    if value < 0:
        raise RuntimeMismatch(f"VTRAIN_COLLECTIVE_TIMEOUT={raw!r} must be >= 0 (0 disables it)")
    return value or None


def _role(env: Mapping[str, str]) -> tuple[str, int, bool, int, bool]:
    """(task type, index, is chief, chief+worker count, has ps) from TF_CONFIG/CLUSTER_SPEC."""
    tf_config = _tf_config(env)
    cluster = tf_config.get("cluster", {})
    task_type, task_index = _task(env, tf_config)
    asked = strategies.named(_asked(env))
    if asked is not None and asked.standalone_replicas:
        # Pool 0 is the syncer; the learners (pools 1 and 2: TF_CONFIG's worker and ps) are standalone
        # trainers, and the first learner plays the chief (it writes the final model).
        learners = max(1, len(cluster.get("worker", [])) + len(cluster.get("ps", [])))
        return task_type, task_index, task_type == "worker" and task_index == 0, learners, False
    n_chief = len(cluster.get("chief", [])) + len(cluster.get("master", []))
    num_workers = max(1, n_chief + len(cluster.get("worker", [])))
    if task_type in ("ps", "evaluator"):
        is_chief = False
    else:
        # TF's convention: without a chief task, worker 0 plays the chief.
        is_chief = task_type == "chief" or (n_chief == 0 and task_type == "worker" and task_index == 0)
    return task_type, task_index, is_chief, num_workers, bool(cluster.get("ps"))


def _asked(env: Mapping[str, str]) -> str:
    return (env.get("VTRAIN_DISTRIBUTION_STRATEGY") or "auto").strip().lower().replace("-", "_")


def choose_strategy(env: Mapping[str, str], gpus: int, tpu: bool) -> Decision:
    """Decide the strategy from the environment, the local GPU count and TPU presence.

    Pure: no TensorFlow, no os.environ. An explicit VTRAIN_DISTRIBUTION_STRATEGY wins
    over auto, but one that cannot work here raises :class:`RuntimeMismatch` instead of
    silently training something else (e.g. N independent copies of the model).
    """
    asked = _asked(env)
    row = strategies.BY_NAME.get(asked)
    if row is None:
        raise RuntimeMismatch(
            f"VTRAIN_DISTRIBUTION_STRATEGY={asked!r} is not one of: {', '.join(RUNTIME_STRATEGIES)}"
        )
    task_type, task_index, is_chief, num_workers, has_ps = _role(env)

    def decide(strategy: str, reason: str, **extra: Any) -> Decision:
        return Decision(strategy, reason, task_type, task_index, is_chief, num_workers, **extra)

    def mwms(reason: str) -> Decision:
        comm = "NCCL" if gpus > 0 else "RING"
        return decide("multi_worker_mirrored", reason, communication=comm, collective_timeout=_timeout(env))

    if row.standalone_replicas and task_type == "chief":
        raise RuntimeMismatch(
            "VTRAIN_DISTRIBUTION_STRATEGY=diloco: pool 0 (the chief) runs the syncer, `python -m vtrain.diloco`, "
            "not the trainer; the trainer runs on the worker pool(s)"
        )
    if task_type == "evaluator":
        # TF's side-car evaluator is not part of the training cluster: it must not join collectives.
        return decide("default", "evaluator task: side-car evaluation outside the training cluster")
    if row.standalone_replicas:
        inside = f"MirroredStrategy over {gpus} local GPUs" if gpus > 1 else "the default strategy"
        return decide(row.name, f"DiLoCo learner {task_type}-{task_index} of {num_workers}: standalone, "
                                f"{inside}; exchanges with the syncer every inner_steps steps")
    where = f"TF_CONFIG lists {num_workers} chief/worker task(s)" + (" and ps tasks" if has_ps else "")
    if row.builds == "mesh":
        if has_ps:
            raise RuntimeMismatch("VTRAIN_DISTRIBUTION_STRATEGY=dtensor but TF_CONFIG lists ps tasks, which a "
                                  "DTensor mesh has no place for; remove the parameter servers")
        return decide(row.name, f"DTensor client {task_type}-{task_index} of {num_workers}: the mesh comes from "
                               "runtime.dtensor_mesh(), not a tf.distribute strategy")
    if row.auto:
        if tpu:
            return decide("tpu", "a TPU is attached to this replica")
        if has_ps:
            return decide("parameter_server", "TF_CONFIG lists ps tasks")
        if num_workers > 1:
            return mwms(where)
        if gpus > 1:
            return decide("mirrored", f"{gpus} local GPUs")
        return decide("default", f"one replica, {gpus} GPU(s), no TPU: TensorFlow's default strategy")

    if row.tpu and not tpu:
        raise RuntimeMismatch(
            "VTRAIN_DISTRIBUTION_STRATEGY=tpu but no TPU is visible (no TPU_CONFIG/TPU_NAME, "
            "no libtpu with TPU devices); use a TPU machine type or another strategy"
        )
    if row.parameter_servers == "needs" and not has_ps:
        raise RuntimeMismatch(
            "VTRAIN_DISTRIBUTION_STRATEGY=parameter_server but TF_CONFIG lists no ps tasks; "
            "add cluster.parameter_servers to the job file"
        )
    if row.parameter_servers != "needs" and has_ps:
        raise RuntimeMismatch(
            f"VTRAIN_DISTRIBUTION_STRATEGY={asked} but TF_CONFIG lists ps tasks, which only "
            "parameter_server uses; remove the parameter servers or use parameter_server"
        )
    if row.hosts == "one" and num_workers > 1:
        raise RuntimeMismatch(
            f"VTRAIN_DISTRIBUTION_STRATEGY={asked} trains on one machine, but {where}: each "
            "replica would train its own copy; use multi_worker_mirrored or a single replica"
        )
    if row.builds == "MultiWorkerMirroredStrategy":
        return mwms(where if num_workers > 1 else "asked for; one worker (no TF_CONFIG)")
    if row.builds == "rank":
        return decide(row.name, f"Horovod rank of {num_workers} (chief 0, then the workers): vtrain.horovod "
                               "all-reduces the gradients; no tf.distribute strategy", collective_timeout=_timeout(env))
    return decide(asked, "asked for by VTRAIN_DISTRIBUTION_STRATEGY")


# --------------------------------------------------------------------------- probing the machine


def detect_tpu(env: Mapping[str, str] | None = None, root: str = "/") -> str | None:
    """'node' (network TPU named by env), 'local' (TPU VM), or None. See module docstring."""
    env = os.environ if env is None else env
    if any(env.get(k) for k in ("TPU_CONFIG", "TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")):
        return "node"
    lib = env.get("TPU_LIBRARY_PATH", "")
    has_lib = (
        (bool(lib) and os.path.exists(lib))
        or os.path.exists(os.path.join(root, "lib", "libtpu.so"))
        or importlib.util.find_spec("libtpu") is not None
    )
    has_device = (
        bool(glob.glob(os.path.join(root, "dev", "accel[0-9]*")))
        or bool(glob.glob(os.path.join(root, "dev", "vfio", "[0-9]*")))
        or bool(env.get("TPU_ACCELERATOR_TYPE"))
    )
    return "local" if has_lib and has_device else None


def _gpu_count() -> int:
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU"))


def decide(env: Mapping[str, str] | None = None) -> Decision:
    """The decision for this process: probes GPUs (imports TensorFlow) only when it matters."""
    env = os.environ if env is None else env
    tpu = detect_tpu(env) is not None
    row = strategies.named(_asked(env))
    needs_gpus = not tpu and row is not None and row.probes_gpus
    return choose_strategy(env, _gpu_count() if needs_gpus else 0, tpu)


