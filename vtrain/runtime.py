"""Inside the trainer: the distribution strategy and output dirs that fit this replica.

The launcher (Vertex AI, or `vtrain local`) describes the replica only through
environment variables; this module turns them into a `tf.distribute` strategy
and into the directories each replica may write. The decision is a pure
function of the environment (:func:`choose_strategy`), tested for every
branch; TensorFlow is imported lazily, only when a strategy is built, so
`import vtrain.runtime` stays cheap and needs nothing but the standard library.

    from vtrain import runtime
    strategy = runtime.strategy()          # first thing in the trainer
    keras = runtime.keras()                # tf_keras under multi-worker, see below
    with strategy.scope():
        model = ...
    model.fit(..., callbacks=[runtime.backup_and_restore(keras)])
    runtime.save_model(model)              # chief -> model_dir(), others -> scratch

Signals read (all set by the launcher):
  TF_CONFIG            the cluster; only present when the job has >1 replica.
                       Keys chief (or the older `master`), worker, ps; an
                       `evaluator` task is not in the cluster.
  CLUSTER_SPEC         Vertex's own description; used for the task when TF_CONFIG
                       is absent (a one-replica job).
  VTRAIN_DISTRIBUTION_STRATEGY   auto (default) | one_device | mirrored |
                       multi_worker_mirrored | parameter_server | tpu.
  VTRAIN_COLLECTIVE_TIMEOUT      seconds before a collective gives up (default 300;
                       0 disables). A dead peer then fails the job instead of hanging it.
  AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR, CLOUD_ML_JOB_ID.
TPU detection (:func:`detect_tpu`):
  * TPU Node (Vertex `cloud-tpu` machines, GKE): TPU_CONFIG (JSON with
    tpu_node_name/project/zone), TPU_NAME or KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS;
    TPUClusterResolver() reads these itself.
  * TPU VM (Vertex `ct5lp-hightpu-*` etc.): the TPU is attached to the VM, so
    TPUClusterResolver(tpu="local"). Seen as libtpu (/lib/libtpu.so as Vertex's
    custom-container instructions require, TPU_LIBRARY_PATH, or the `libtpu`
    Python package) together with TPU device nodes (/dev/accel* on v2-v4,
    /dev/vfio/<n> on v5e and later) or TPU_ACCELERATOR_TYPE in the environment.
Outputs a launcher can check (:func:`save_model`): the chief saves the model to
model_dir() with weights.json (sha256 of the final weights) beside it. Other replicas
must save too (saving runs collectives) but into <parent of model_dir>/workertemp/
<type>-<index>/, where the model is deleted and only weights.json stays: equal sha256
everywhere proves the all-reduce happened. Under parameter servers the worker and ps
replicas only serve (strategy() never returns for them; the job ends with the
primary replica), so only the chief writes.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import json
import logging
import os
import posixpath
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from types import ModuleType
from typing import Any

from vtrain.constants import STRATEGIES
from vtrain.errors import VtrainError

log = logging.getLogger("vtrain.runtime")

DEFAULT_COLLECTIVE_TIMEOUT = 300.0
LOCAL_OUTPUT_DIR = "vtrain-out"
WEIGHTS_FILE = "weights.json"


class RuntimeMismatch(VtrainError):
    """The strategy asked for does not fit the environment this replica really has."""


@dataclass(frozen=True)
class Decision:
    """Which strategy to build and why; everything a replica needs to know about its role."""

    strategy: str  # default | one_device | mirrored | multi_worker_mirrored | parameter_server | tpu
    reason: str
    task_type: str
    task_index: int
    is_chief: bool
    num_workers: int  # chief + workers taking part in training (1 without TF_CONFIG)
    communication: str | None = None  # NCCL | RING for multi_worker_mirrored
    collective_timeout: float | None = None

    @property
    def multi_worker(self) -> bool:
        return self.strategy in ("multi_worker_mirrored", "parameter_server")


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
    n_chief = len(cluster.get("chief", [])) + len(cluster.get("master", []))
    num_workers = max(1, n_chief + len(cluster.get("worker", [])))
    if task_type in ("ps", "evaluator"):
        is_chief = False
    else:
        # TF's convention: without a chief task, worker 0 plays the chief.
        is_chief = task_type == "chief" or (n_chief == 0 and task_type == "worker" and task_index == 0)
    return task_type, task_index, is_chief, num_workers, bool(cluster.get("ps"))


def choose_strategy(env: Mapping[str, str], gpus: int, tpu: bool) -> Decision:
    """Decide the strategy from the environment, the local GPU count and TPU presence.

    Pure: no TensorFlow, no os.environ. An explicit VTRAIN_DISTRIBUTION_STRATEGY wins
    over auto, but one that cannot work here raises :class:`RuntimeMismatch` instead of
    silently training something else (e.g. N independent copies of the model).
    """
    asked = (env.get("VTRAIN_DISTRIBUTION_STRATEGY") or "auto").strip().lower().replace("-", "_")
    if asked not in STRATEGIES:
        raise RuntimeMismatch(f"VTRAIN_DISTRIBUTION_STRATEGY={asked!r} is not one of: {', '.join(STRATEGIES)}")
    task_type, task_index, is_chief, num_workers, has_ps = _role(env)

    def decide(strategy: str, reason: str, **extra: Any) -> Decision:
        return Decision(strategy, reason, task_type, task_index, is_chief, num_workers, **extra)

    def mwms(reason: str) -> Decision:
        comm = "NCCL" if gpus > 0 else "RING"
        return decide("multi_worker_mirrored", reason, communication=comm, collective_timeout=_timeout(env))

    if task_type == "evaluator":
        # TF's side-car evaluator is not part of the training cluster: it must not join collectives.
        return decide("default", "evaluator task: side-car evaluation outside the training cluster")
    where = f"TF_CONFIG lists {num_workers} chief/worker task(s)" + (" and ps tasks" if has_ps else "")
    if asked == "auto":
        if tpu:
            return decide("tpu", "a TPU is attached to this replica")
        if has_ps:
            return decide("parameter_server", "TF_CONFIG lists ps tasks")
        if num_workers > 1:
            return mwms(where)
        if gpus > 1:
            return decide("mirrored", f"{gpus} local GPUs")
        return decide("default", f"one replica, {gpus} GPU(s), no TPU: TensorFlow's default strategy")

    if asked == "tpu" and not tpu:
        raise RuntimeMismatch(
            "VTRAIN_DISTRIBUTION_STRATEGY=tpu but no TPU is visible (no TPU_CONFIG/TPU_NAME, "
            "no libtpu with TPU devices); use a TPU machine type or another strategy"
        )
    if asked == "parameter_server" and not has_ps:
        raise RuntimeMismatch(
            "VTRAIN_DISTRIBUTION_STRATEGY=parameter_server but TF_CONFIG lists no ps tasks; "
            "add cluster.parameter_servers to the job file"
        )
    if asked != "parameter_server" and has_ps:
        raise RuntimeMismatch(
            f"VTRAIN_DISTRIBUTION_STRATEGY={asked} but TF_CONFIG lists ps tasks, which only "
            "parameter_server uses; remove the parameter servers or use parameter_server"
        )
    if asked in ("one_device", "mirrored") and num_workers > 1:
        raise RuntimeMismatch(
            f"VTRAIN_DISTRIBUTION_STRATEGY={asked} trains on one machine, but {where}: each "
            "replica would train its own copy; use multi_worker_mirrored or a single replica"
        )
    if asked == "multi_worker_mirrored":
        return mwms(where if num_workers > 1 else "asked for; one worker (no TF_CONFIG)")
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
    asked = (env.get("VTRAIN_DISTRIBUTION_STRATEGY") or "auto").strip().lower()
    needs_gpus = not tpu and asked in ("auto", "multi_worker_mirrored", "multi-worker-mirrored")
    return choose_strategy(env, _gpu_count() if needs_gpus else 0, tpu)


# --------------------------------------------------------------------------- building the strategy


def _normalise_tf_config() -> None:
    """TF's resolvers know `chief`, not the older `master`; rewrite TF_CONFIG once, in place."""
    raw = os.environ.get("TF_CONFIG")
    if not raw or '"master"' not in raw:
        return
    data = json.loads(raw)
    cluster = data.get("cluster", {})
    if "master" in cluster:
        cluster["chief"] = cluster.pop("master")
    if data.get("task", {}).get("type") == "master":
        data["task"]["type"] = "chief"
    os.environ["TF_CONFIG"] = json.dumps(data)
    log.info("vtrain: TF_CONFIG uses `master`; rewrote it as `chief` for TensorFlow")


def _build(d: Decision) -> Any:
    import tensorflow as tf

    if d.strategy == "tpu":
        tpu_arg = "local" if detect_tpu() == "local" else None
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_arg)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if d.strategy == "multi_worker_mirrored":
        impl = tf.distribute.experimental.CommunicationImplementation[d.communication or "AUTO"]
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=impl, timeout_seconds=d.collective_timeout
        )
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if d.strategy == "parameter_server":
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        if d.task_type in ("worker", "ps"):
            # The documented pattern: workers and ps only serve; the chief (coordinator) drives
            # training, and the job ends when the primary replica exits.
            server = tf.distribute.Server(
                resolver.cluster_spec(),
                job_name=d.task_type,
                task_index=d.task_index,
                protocol=resolver.rpc_layer or "grpc",
                start=True,
            )
            log.info("vtrain: %s %d serving for the coordinator; blocks until the job ends", d.task_type, d.task_index)
            server.join()
            raise SystemExit(0)
        return tf.distribute.ParameterServerStrategy(resolver)
    if d.strategy == "mirrored":
        return tf.distribute.MirroredStrategy()
    if d.strategy == "one_device":
        device = "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    return tf.distribute.get_strategy()


@cache
def _cached() -> tuple[Decision, Any]:
    d = decide()
    if d.strategy in ("multi_worker_mirrored", "parameter_server"):
        _normalise_tf_config()
    log.info("vtrain: %s/%d using %s strategy (%s)", d.task_type, d.task_index, d.strategy, d.reason)
    if d.strategy == "default":
        log.info("vtrain: no distribution needed; using tf.distribute.get_strategy()")
    built = _build(d)
    imported = sys.modules.get("keras")
    if d.multi_worker and imported is not None and not _legacy_keras() and _keras_major(imported) >= 3:
        log.warning(
            "vtrain: Keras 3 is imported, and its model.fit fails under %s (keras-team/keras#20585); "
            "train with `keras = vtrain.runtime.keras()` (tf_keras) or a custom loop",
            d.strategy,
        )
    return d, built


def _legacy_keras() -> bool:
    return os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes")


def strategy() -> Any:
    """The tf.distribute strategy for this replica; call it first (MWMS must precede other TF ops)."""
    return _cached()[1]


def info() -> Info:
    d, built = _cached()
    return Info(
        d.task_type,
        d.task_index,
        d.is_chief,
        d.num_workers,
        built.num_replicas_in_sync,
        d.strategy,
        d.reason,
        os.environ.get("CLOUD_ML_JOB_ID"),
    )


def is_chief() -> bool:
    """Chief-ness from the environment alone, without building a strategy."""
    return _role(os.environ)[2]


# --------------------------------------------------------------------------- Keras


def _keras_major(module: ModuleType) -> int:
    if module.__name__.split(".")[0] == "tf_keras":
        return 2
    return int(str(getattr(module, "__version__", "3")).split(".")[0])


def _check_keras_fits(module: ModuleType, d: Decision) -> None:
    if d.multi_worker and _keras_major(module) >= 3:
        raise _keras3_mismatch(d)


def _keras3_mismatch(d: Decision) -> RuntimeMismatch:
    return RuntimeMismatch(
        f"Keras 3 cannot train with model.fit under {d.strategy} across {d.num_workers} workers "
        "(it fails with 'Attempt to convert a value (PerReplica...)', keras-team/keras#20585). "
        "Use `keras = vtrain.runtime.keras()`, which returns tf_keras here (add `tf-keras` "
        "matching your TensorFlow minor version to the trainer's dependencies), "
        "or write a custom training loop"
    )


def keras() -> ModuleType:
    """The Keras module that can train with this replica's strategy.

    Multi-worker and parameter-server jobs get tf_keras (Keras 2), because Keras 3's
    model.fit breaks under MultiWorkerMirroredStrategy and has no ParameterServerStrategy
    support; TF_USE_LEGACY_KERAS=1 is also set so `tf.keras` agrees. Everything else gets
    the `keras` TensorFlow ships (or tf_keras when TF_USE_LEGACY_KERAS is already set).
    Without tf_keras, a multi-worker job stops here with what to do, not on a paid cluster
    halfway through model.fit.
    """
    d = _cached()[0]
    if not d.multi_worker and not _legacy_keras():
        import keras as module

        return module
    if not _legacy_keras():
        import keras as module

        if _keras_major(module) < 3:  # TF <= 2.15 images ship Keras 2, which works as it is
            return module
    try:
        import tf_keras
    except ImportError:
        if d.multi_worker:  # Keras 3 (or TF_USE_LEGACY_KERAS) without tf_keras: say what to do
            raise _keras3_mismatch(d) from None
        raise
    if d.multi_worker and not _legacy_keras():
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        log.info("vtrain: %s with Keras 3 installed: using tf_keras (keras-team/keras#20585)", d.strategy)
    return tf_keras


def backup_and_restore(keras_module: ModuleType | None = None) -> Any:
    """A BackupAndRestore callback on checkpoint_dir(), so a restarted replica resumes mid-training.

    Every worker passes the same directory; Keras lets only the chief write it.
    """
    module = keras_module or keras()
    _check_keras_fits(module, _cached()[0])
    return module.callbacks.BackupAndRestore(backup_dir=join(checkpoint_dir(), "backup"))


# --------------------------------------------------------------------------- output directories


def join(base: str, *parts: str) -> str:
    """Join paths for local directories and gs:// URLs alike."""
    return posixpath.join(base, *parts) if "://" in base else os.path.join(base, *parts)


def _dir(var: str, local: str) -> str:
    value = os.environ.get(var, "").strip()
    return value or os.path.abspath(os.path.join(LOCAL_OUTPUT_DIR, local))


def model_dir() -> str:
    """AIP_MODEL_DIR, or ./vtrain-out/model when run outside a launcher."""
    return _dir("AIP_MODEL_DIR", "model")


def checkpoint_dir() -> str:
    return _dir("AIP_CHECKPOINT_DIR", "checkpoints")


def tensorboard_dir() -> str:
    return _dir("AIP_TENSORBOARD_LOG_DIR", "logs")


def scratch_dir(final: str | None = None) -> str:
    """Where a non-chief replica writes what the chief writes to `final`: a sibling per replica."""
    final = (final or model_dir()).rstrip("/")
    task_type, task_index = _role(os.environ)[:2]
    parent = posixpath.dirname(final) if "://" in final else os.path.dirname(final)
    return join(parent, "workertemp", f"{task_type}-{task_index}")


def write_dir(final: str | None = None) -> str:
    """`final` for the chief, scratch_dir(final) for everyone else (TF's multi-worker saving pattern).

    Under multi-worker strategies every replica must save (saving runs collectives), but
    only the chief's copy is kept; the others remove theirs with :func:`remove_scratch`.
    """
    final = final or model_dir()
    return final if is_chief() else scratch_dir(final)


def remove_scratch(path: str) -> None:
    """Delete a non-chief replica's scratch copy; a no-op on the chief."""
    import tensorflow as tf

    if not is_chief() and tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)


def _to_array(value: Any) -> Any:
    import numpy as np

    return np.ascontiguousarray(value.numpy() if hasattr(value, "numpy") else np.asarray(value))


def weights_checksum(values: Iterable[Any]) -> str:
    """sha256 over dtype, shape and bytes of each value: equal across replicas iff they agree."""
    digest = hashlib.sha256()
    for value in values:
        array = _to_array(value)
        digest.update(f"{array.dtype.str}{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def write_weights_record(values: Iterable[Any], final: str | None = None, **extra: Any) -> dict[str, Any]:
    """Write weights.json (checksum and role) in this replica's output dir; log it too.

    Chief: <final>/weights.json. Others: <scratch_dir(final)>/weights.json, kept after the
    scratch model is removed so a launcher can prove every replica ended with the same weights.
    """
    import tensorflow as tf

    final = final or model_dir()
    task_type, task_index, chief = _role(os.environ)[:3]
    record = {
        "sha256": weights_checksum(values),
        "task_type": task_type,
        "task_index": task_index,
        "is_chief": chief,
        "strategy": _cached()[0].strategy,
        **extra,
    }
    where = final if chief else scratch_dir(final)
    tf.io.gfile.makedirs(where)
    with tf.io.gfile.GFile(join(where, WEIGHTS_FILE), "w") as f:
        f.write(json.dumps(record, indent=2) + "\n")
    log.info("vtrain: %s/%d weights sha256=%s", task_type, task_index, record["sha256"])
    return record


def save_model(model: Any, final: str | None = None) -> dict[str, Any]:
    """Save on every replica, keep only the chief's copy, write weights.json; returns its record.

    Keras 3 models are exported (SavedModel for serving), tf_keras models saved as a
    SavedModel directory, anything else through tf.saved_model.save.
    """
    import tensorflow as tf

    final = final or model_dir()
    target = final if is_chief() else join(scratch_dir(final), "model")
    family = type(model).__module__.split(".")[0]
    if family == "keras" and hasattr(model, "export"):
        model.export(target, verbose=False)
    elif family in ("keras", "tf_keras"):
        model.save(target)
    else:
        tf.saved_model.save(model, target)
    remove_scratch(target)
    return write_weights_record(model.weights, final, model_path=target if is_chief() else None)


class Checkpoints:
    """tf.train checkpoints for custom loops: the chief keeps them, the others write and discard.

    restore() reads the chief's latest checkpoint on every replica, so a restarted worker resumes.
    """

    def __init__(self, checkpoint: Any, directory: str | None = None, max_to_keep: int = 3) -> None:
        import tensorflow as tf

        self.checkpoint = checkpoint
        self.directory = directory or join(checkpoint_dir(), "ckpt")
        self._write_dir = write_dir(self.directory)
        self._manager = tf.train.CheckpointManager(checkpoint, self._write_dir, max_to_keep=max_to_keep)

    def restore(self) -> str | None:
        import tensorflow as tf

        latest = tf.train.latest_checkpoint(self.directory)
        if latest:
            self.checkpoint.restore(latest)
            log.info("vtrain: resumed from %s", latest)
        return latest

    def save(self, step: int | None = None) -> None:
        self._manager.save(checkpoint_number=step)
        remove_scratch(self._write_dir)
