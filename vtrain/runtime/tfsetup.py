"""Building the tf.distribute strategy a :class:`~vtrain.runtime.decision.Decision` names, once per
process, and the Keras module that can train under it. TensorFlow is imported here, lazily.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any, cast

from vtrain.constants import LOCAL_DEVICES_ENV
from vtrain.errors import RuntimeMismatch
from vtrain.runtime.decision import Decision, Info, _role, decide, detect_tpu
from vtrain.runtime.restarts import job_attempt, restart_count

log = logging.getLogger("vtrain.runtime")


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


def _mesh(d: Decision, tf: Any) -> Any:
    raise RuntimeMismatch(
        f"VTRAIN_DISTRIBUTION_STRATEGY={d.strategy} has no tf.distribute strategy: call runtime.dtensor_mesh() "
        "instead of runtime.strategy() (and runtime.dtensor.client_id() == 0 instead of runtime.info().is_chief)"
    )


def _tpu(d: Decision, tf: Any) -> Any:
    tpu_arg = "local" if detect_tpu() == "local" else None
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_arg)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _multi_worker_mirrored(d: Decision, tf: Any) -> Any:
    impl = tf.distribute.experimental.CommunicationImplementation[d.communication or "AUTO"]
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=impl, timeout_seconds=d.collective_timeout
    )
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def _parameter_server(d: Decision, tf: Any) -> Any:
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


def _learner(d: Decision, tf: Any) -> Any:
    """A standalone learner (DiLoCo): its own local GPUs mirrored, never a cluster across learners."""
    if len(tf.config.list_physical_devices("GPU")) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def _rank(d: Decision, tf: Any) -> Any:
    """A Horovod rank: a program of its own; vtrain.horovod's optimizer or tape reduces the gradients."""
    log.info("vtrain: horovod: TensorFlow's default strategy in each rank; import vtrain.horovod as hvd")
    return tf.distribute.get_strategy()


def _one_device(d: Decision, tf: Any) -> Any:
    device = "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"
    return tf.distribute.OneDeviceStrategy(device)


def _mirrored(tf: Any) -> Any:
    """MirroredStrategy over the local GPUs; on a machine without any, over VTRAIN_LOCAL_DEVICES logical CPU devices
    when it asks for more than one (a multi-GPU host rehearsed on CPUs: each device a replica in sync)."""
    raw = os.environ.get(LOCAL_DEVICES_ENV, "").strip()
    count = int(raw) if raw.isdigit() else 0
    if count > 1 and not tf.config.list_physical_devices("GPU"):
        cpus = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
        return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(count)])
    return tf.distribute.MirroredStrategy()


#: One builder per value of :attr:`vtrain.strategies.Strategy.builds` (auto is decided before building).
_BUILDERS: dict[str, Callable[[Decision, Any], Any]] = {
    "mesh": _mesh,
    "TPUStrategy": _tpu,
    "MultiWorkerMirroredStrategy": _multi_worker_mirrored,
    "ParameterServerStrategy": _parameter_server,
    "MirroredStrategy": lambda d, tf: _mirrored(tf),
    "learner": _learner,
    "rank": _rank,
    "OneDeviceStrategy": _one_device,
    "default": lambda d, tf: tf.distribute.get_strategy(),
}


def _build(d: Decision) -> Any:
    builder = _BUILDERS[d.row.builds]
    if builder is _mesh:
        return _mesh(d, None)  # before importing TensorFlow: the mistake is the trainer's call
    import tensorflow as tf

    return builder(d, tf)


@cache
def _cached() -> tuple[Decision, Any]:
    d = decide()
    if d.multi_worker:
        _normalise_tf_config()
    log.info("vtrain: %s/%d using %s strategy (%s)", d.task_type, d.task_index, d.strategy, d.reason)
    if d.row.builds == "default":
        log.info("vtrain: no distribution needed; using tf.distribute.get_strategy()")
    built = _build(d)
    from vtrain.runtime import profiler

    profiler.started(d.strategy, built.num_replicas_in_sync)  # what the profile's steps span
    warning = keras3_warning(d, sys.modules.get("__main__"))
    if warning:
        log.warning("%s", warning)
    return d, built


def keras3_warning(d: Decision, main: ModuleType | None) -> str | None:
    """The warning that Keras 3's model.fit fails under this strategy, when it applies; else None.

    It applies when the trainer's entry module itself holds Keras 3 (`import keras`, `from tensorflow
    import keras` at its top): TensorFlow >= 2.16 imports Keras 3 on its own, so `keras` in
    sys.modules says nothing about what the trainer trains with, and a trainer that takes
    `vtrain.runtime.keras()` (tf_keras here) is fine. Said by the chief only: once per job, not once
    per replica."""
    if not (d.multi_worker and d.is_chief) or _legacy_keras() or main is None:
        return None
    held = [v for v in list(vars(main).values()) if isinstance(v, ModuleType)
            and str(getattr(v, "__name__", "")).split(".")[0] == "keras"]
    if not any(_keras_major(v) >= 3 for v in held):
        return None
    return (f"vtrain: the trainer imports Keras 3, and its model.fit fails under {d.strategy} "
            "(keras-team/keras#20585); train with `keras = vtrain.runtime.keras()` (tf_keras) or a custom loop")


def _legacy_keras() -> bool:
    return os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes")


def strategy() -> Any:
    """The tf.distribute strategy for this replica; call it first (MWMS must precede other TF ops)."""
    return _cached()[1]


def info() -> Info:
    """Who this replica is, its strategy, and how many times it was restarted."""
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
        restart_count(),
        job_attempt(),
        os.environ.get("CLOUD_ML_TRIAL_ID") or None,
    )


def is_chief() -> bool:
    """Chief-ness from the environment alone, without building a strategy."""
    return _role(os.environ)[2]


# --------------------------------------------------------------------------- Keras


def _keras_major(module: ModuleType) -> int:
    if module.__name__.split(".")[0] == "tf_keras":
        return 2
    major = str(getattr(module, "__version__", "3")).split(".")[0]
    return int(major) if major.isdigit() else 3


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

    Single-host MirroredStrategy over more than one device gets tf_keras when it is installed: on the
    images vtrain targets (tf-cpu.2-17's Keras 3.6.0) and on TensorFlow 2.21 (Keras 3.15), Keras 3's
    model.fit trains there, but a training loop that applies a Keras 3 optimizer inside
    ``strategy.run`` fails (InvalidArgumentError; keras-team/keras#21069, tensorflow#72686), where
    tf_keras does both (tests/runtime/test_keras_mirrored.py). Without tf_keras it stays Keras 3, whose
    model.fit works.
    """
    d, built = _cached()
    mirrored = d.row.builds == "MirroredStrategy" and getattr(built, "num_replicas_in_sync", 1) > 1
    if mirrored and not d.multi_worker and not _legacy_keras():
        import keras as module

        if _keras_major(module) >= 3:
            try:
                import tf_keras
            except ImportError:
                return cast(ModuleType, module)  # model.fit works; a custom loop on its optimizer does not
            os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.keras agrees
            log.info("vtrain: %s over %d devices with Keras 3 installed: using tf_keras (keras-team/keras#21069)",
                     d.strategy, built.num_replicas_in_sync)
            return cast(ModuleType, tf_keras)
    if not d.multi_worker and not _legacy_keras():
        import keras as module

        return cast(ModuleType, module)  # Keras ships no types
    if not _legacy_keras():
        import keras as module

        if _keras_major(module) < 3:  # TF <= 2.15 images ship Keras 2, which works as it is
            return cast(ModuleType, module)
    try:
        import tf_keras
    except ImportError:
        if d.multi_worker:  # Keras 3 (or TF_USE_LEGACY_KERAS) without tf_keras: say what to do
            raise _keras3_mismatch(d) from None
        raise
    if d.multi_worker and not _legacy_keras():
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        log.info("vtrain: %s with Keras 3 installed: using tf_keras (keras-team/keras#20585)", d.strategy)
    return cast(ModuleType, tf_keras)
