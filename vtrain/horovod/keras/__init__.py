"""`import vtrain.horovod.keras as hvd`: Horovod's ``horovod.tensorflow.keras`` API (``model.fit`` with
``hvd.DistributedOptimizer`` and ``hvd.callbacks``) on TensorFlow's collectives; see :mod:`vtrain.horovod`."""

from __future__ import annotations

from typing import Any

from vtrain.horovod import prefer_tf_keras
from vtrain.horovod.collectives import (
    Adasum,
    Average,
    Compression,
    Max,
    Min,
    Product,
    Sum,
    allgather,
    allgather_object,
    allreduce,
    broadcast,
    broadcast_object,
    broadcast_variables,
    cross_rank,
    cross_size,
    global_process_set,
    init,
    is_initialized,
    local_rank,
    local_size,
    rank,
    shutdown,
    size,
)
from vtrain.horovod.gradients import DistributedGradientTape, DistributedOptimizer
from vtrain.horovod.unsupported import NotSupported

prefer_tf_keras()  # before tf.keras resolves: Horovod scripts expect Keras 2

from vtrain.horovod.keras import callbacks  # noqa: E402 - after prefer_tf_keras: it subclasses tf.keras's Callback


def __getattr__(name: str) -> Any:
    from vtrain.horovod.unsupported import fail, lookup

    if name == "load_model":
        def load_model(*_args: Any, **_kwargs: Any) -> Any:
            fail("load_model", "load with tf.keras.models.load_model(path, compile=False), then compile with "
                               "hvd.DistributedOptimizer(your optimizer)")

        return load_model
    return lookup(__name__, name)


__all__ = [
    "Adasum", "Average", "Compression", "DistributedGradientTape", "DistributedOptimizer", "Max", "Min",
    "NotSupported", "Product", "Sum", "allgather", "allgather_object", "allreduce", "broadcast", "broadcast_object",
    "broadcast_variables", "callbacks", "cross_rank", "cross_size", "global_process_set", "init", "is_initialized",
    "local_rank", "local_size", "rank", "shutdown", "size",
]
