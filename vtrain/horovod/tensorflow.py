"""`import vtrain.horovod.tensorflow as hvd`: Horovod's ``horovod.tensorflow`` API (TF2, eager and
tf.function) on TensorFlow's collectives; see :mod:`vtrain.horovod`."""

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
    broadcast_,
    broadcast_variables,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    global_process_set,
    gloo_built,
    gloo_enabled,
    grouped_allgather,
    grouped_allreduce,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_rank_op,
    local_size,
    local_size_op,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    process_set_included_op,
    rank,
    rank_op,
    rocm_built,
    shutdown,
    size,
    size_op,
)
from vtrain.horovod.gradients import DistributedGradientTape, DistributedOptimizer, PartialDistributedGradientTape
from vtrain.horovod.objects import allgather_object, broadcast_object
from vtrain.horovod.unsupported import NotSupported

prefer_tf_keras()  # before the script's tf.keras resolves: Horovod scripts expect Keras 2
unconverted(globals(), ["allgather", "allgather_object", "allreduce", "broadcast", "broadcast_", "broadcast_object",
                        "broadcast_variables", "grouped_allgather", "grouped_allreduce"])


def __getattr__(name: str) -> Any:
    from vtrain.horovod.unsupported import lookup

    return lookup(__name__, name)


__all__ = [
    "Adasum", "Average", "Compression", "DistributedGradientTape", "DistributedOptimizer", "Max", "Min",
    "NotSupported", "PartialDistributedGradientTape", "Product", "Sum", "allgather", "allgather_object", "allreduce",
    "broadcast", "broadcast_", "broadcast_object", "broadcast_variables", "ccl_built", "cross_rank", "cross_size",
    "cuda_built", "ddl_built", "global_process_set", "gloo_built", "gloo_enabled", "grouped_allgather",
    "grouped_allreduce", "init", "is_homogeneous", "is_initialized", "local_rank", "local_rank_op", "local_size",
    "local_size_op", "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "process_set_included_op",
    "rank", "rank_op", "rocm_built", "shutdown", "size", "size_op",
]
