"""`import vtrain.horovod.keras as hvd`: Horovod's ``horovod.tensorflow.keras`` API (``model.fit`` with
``hvd.DistributedOptimizer`` and ``hvd.callbacks``) on TensorFlow's collectives; see :mod:`vtrain.horovod`."""

from __future__ import annotations

from typing import Any

from vtrain.horovod import prefer_tf_keras, unconverted
from vtrain.horovod.collectives import (
    Adasum,
    Average,
    Compression,
    Max,
    Min,
    Product,
    Sum,
    allgather,
    allreduce,
    broadcast,
    broadcast_variables,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    global_process_set,
    gloo_built,
    gloo_enabled,
    init,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
)
from vtrain.horovod.gradients import DistributedGradientTape, DistributedOptimizer
from vtrain.horovod.objects import allgather_object, broadcast_object
from vtrain.horovod.unsupported import NotSupported

prefer_tf_keras()  # before tf.keras resolves: Horovod scripts expect Keras 2
unconverted(globals(), ["allgather", "allgather_object", "allreduce", "broadcast", "broadcast_object",
                        "broadcast_variables"])

from vtrain.horovod.keras import callbacks  # noqa: E402 - after prefer_tf_keras: it subclasses tf.keras's Callback


def __getattr__(name: str) -> Any:
    from vtrain.horovod.unsupported import lookup

    return lookup(__name__, name)


__all__ = [
    "Adasum", "Average", "Compression", "DistributedGradientTape", "DistributedOptimizer", "Max", "Min",
    "NotSupported", "Product", "Sum", "allgather", "allgather_object", "allreduce", "broadcast", "broadcast_object",
    "broadcast_variables", "callbacks", "ccl_built", "cross_rank", "cross_size", "cuda_built", "ddl_built",
    "global_process_set", "gloo_built", "gloo_enabled", "init", "is_initialized", "local_rank", "local_size",
    "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "rank", "rocm_built", "shutdown", "size",
]
