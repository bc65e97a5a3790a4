"""Horovod's collectives on TensorFlow's own: the ring (CPU) and NCCL (GPU) all-reduce that
MultiWorkerMirroredStrategy runs, without a strategy scope and without building Horovod.

Each collective is one ``tf.raw_ops`` op (CollectiveReduceV2, CollectiveGatherV2,
CollectiveBcastSendV2/RecvV2) over one group of all ranks (:mod:`vtrain.horovod.ring`). Every rank runs
the same script, so it makes (or traces) the same collectives in the same order and the instance keys
agree. Gradients are packed per dtype into one flat tensor, so a step costs one all-reduce (Horovod's
tensor fusion). Ops made in one tf.function are chained by control dependencies, so every rank launches
them in the same order (NCCL needs that). ``communication_hint="auto"`` lets TensorFlow pick NCCL for GPU
tensors and its ring for CPU ones; VTRAIN_COLLECTIVE_TIMEOUT (default 300 s) bounds every op.
"""

from __future__ import annotations

import pickle
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from vtrain.horovod.ring import (
    GROUP_KEY,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    next_key,
    rank,
    rocm_built,
    shutdown,
    size,
    state,
)
from vtrain.horovod.unsupported import NotSupported, fail

#: Horovod's reduction ops, with Horovod's own values (horovod.common.basics).
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
_MERGE = {Average: "Add", Sum: "Add", Min: "Min", Max: "Max", Product: "Mul"}
_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max", Product: "Product"}
_last_in_graph: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


class _NoCompression:
    """Horovod's Compression.none: tensors travel as they are."""

    @staticmethod
    def compress(tensor: Any) -> tuple[Any, Any]:
        return tensor, None

    @staticmethod
    def decompress(tensor: Any, ctx: Any) -> Any:
        return tensor


class _FP16Compression:
    """Horovod's Compression.fp16: floating tensors travel as float16 and come back in their dtype."""

    @staticmethod
    def compress(tensor: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor: Any, ctx: Any) -> Any:
        import tensorflow as tf

        return tensor if ctx is None else tf.cast(tensor, ctx)


class Compression:
    """Horovod's gradient compression choices."""

    none = _NoCompression
    fp16 = _FP16Compression


# --------------------------------------------------------------------------- the ops


def _collective(make: Callable[[int, float], Any]) -> Any:
    """Make one collective op with the next instance key, after the last one made in this graph."""
    import tensorflow as tf

    key, timeout = next_key(), state().timeout
    if tf.executing_eagerly():
        return make(key, timeout)
    graph = tf.compat.v1.get_default_graph()
    last = _last_in_graph.get(graph)
    with tf.control_dependencies([last] if last is not None else []):
        out = make(key, timeout)
    _last_in_graph[graph] = out
    return out


def _on_the_wire(tensor: Any) -> tuple[Any, Any]:
    """The tensor in a dtype TensorFlow's collectives carry (float16/32/64, int32/64), and its own dtype:
    narrower integers and bool travel as int32 or int64, bfloat16 as float32."""
    import tensorflow as tf

    dtype = tensor.dtype
    if dtype in (tf.float16, tf.float32, tf.float64, tf.int32, tf.int64):
        return tensor, None
    if dtype == tf.bfloat16:
        return tf.cast(tensor, tf.float32), dtype
    if dtype.is_integer or dtype == tf.bool:
        wide = tf.int64 if dtype in (tf.uint32, tf.uint64) else tf.int32
        return tf.cast(tensor, wide), dtype
    raise TypeError(f"vtrain.horovod: TensorFlow's collectives cannot carry {dtype.name} tensors")


def _back(tensor: Any, dtype: Any) -> Any:
    import tensorflow as tf

    return tensor if dtype is None else tf.cast(tensor, dtype)


def _reduce_flat(flat: Any, op: int) -> Any:
    import tensorflow as tf

    n = size()
    final = "Div" if op == Average else "Id"
    wire, dtype = _on_the_wire(flat)
    return _back(_collective(lambda key, timeout: tf.raw_ops.CollectiveReduceV2(
        input=wire, group_size=n, group_key=GROUP_KEY, instance_key=key, ordering_token=[], merge_op=_MERGE[op],
        final_op=final, communication_hint="auto", timeout_seconds=timeout)), dtype)


def _gather_flat(tensor: Any) -> Any:
    import tensorflow as tf

    n = size()
    wire, dtype = _on_the_wire(tensor)
    return _back(_collective(lambda key, timeout: tf.raw_ops.CollectiveGatherV2(
        input=wire, group_size=n, group_key=GROUP_KEY, instance_key=key, ordering_token=[],
        communication_hint="auto", timeout_seconds=timeout)), dtype)


def _check_op(op: int | None, average: bool | None) -> int:
    if op is not None and average is not None:
        raise ValueError("hvd.allreduce: give op or the deprecated average, not both")
    chosen = (Average if average in (None, True) else Sum) if op is None else op
    if chosen == Adasum:
        fail("Adasum")
    if chosen not in _MERGE:
        raise ValueError(f"hvd.allreduce: op={chosen!r} is not one of hvd.Average, Sum, Min, Max, Product")
    return chosen


def _check_process_set(process_set: Any) -> None:
    if process_set is not None and process_set is not global_process_set:
        fail("ProcessSet")


class _GlobalProcessSet:
    """Horovod's global_process_set: all ranks (the only set there is here)."""

    process_set_id = 0

    def __repr__(self) -> str:
        return "ProcessSet(process_set_id=0, ranks=all)"


global_process_set = _GlobalProcessSet()


def _scale(tensor: Any, factor: float) -> Any:
    import tensorflow as tf

    if factor == 1.0:
        return tensor
    return tensor * tf.cast(factor, tensor.dtype)


def allreduce(tensor: Any, average: bool | None = None, device_dense: str = "", device_sparse: str = "",
              compression: Any = Compression.none, op: int | None = None, prescale_factor: float = 1.0,
              postscale_factor: float = 1.0, name: str | None = None, process_set: Any = None,
              ignore_name_scope: bool = False) -> Any:
    """Reduce a tensor (or tf.IndexedSlices) over all ranks; every rank gets the result (Average by default)."""
    import tensorflow as tf

    chosen = _check_op(op, average)
    _check_process_set(process_set)
    if isinstance(tensor, tf.IndexedSlices):
        if chosen not in (Average, Sum):
            raise ValueError(f"hvd.allreduce of tf.IndexedSlices supports Average and Sum, not {_OP_NAMES[chosen]}")
        values = allgather(_scale(tensor.values, prescale_factor))
        indices = allgather(tensor.indices)
        if chosen == Average:
            values = values / tf.cast(size(), values.dtype)
        return tf.IndexedSlices(_scale(values, postscale_factor), indices, dense_shape=tensor.dense_shape)
    return _reduce_dense([tf.convert_to_tensor(tensor)], chosen, compression, prescale_factor, postscale_factor)[0]


def grouped_allreduce(tensors: Sequence[Any], average: bool | None = None, device_dense: str = "",
                      device_sparse: str = "", compression: Any = Compression.none, op: int | None = None,
                      prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                      process_set: Any = None) -> list[Any]:
    """allreduce of a list, packed: one collective per dtype."""
    return reduce_gradients(list(tensors), op=_check_op(op, average), compression=compression,
                            prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                            process_set=process_set)


def reduce_gradients(grads: Sequence[Any], *, op: int = Average, compression: Any = Compression.none,
                     sparse_as_dense: bool = False, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                     process_set: Any = None) -> list[Any]:
    """The gradients every rank applies: dense ones packed per dtype into one all-reduce each, sparse
    ones (tf.IndexedSlices) gathered (or made dense first with sparse_as_dense); None stays None."""
    import tensorflow as tf

    _check_process_set(process_set)
    out: list[Any] = list(grads)
    dense = []
    for i, g in enumerate(grads):
        if g is None:
            continue
        if isinstance(g, tf.IndexedSlices):
            if sparse_as_dense:
                dense.append(i)
                out[i] = tf.convert_to_tensor(g)
            else:
                out[i] = allreduce(g, op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor)
        else:
            dense.append(i)
    reduced = _reduce_dense([out[i] for i in dense], op, compression, prescale_factor, postscale_factor)
    for i, value in zip(dense, reduced, strict=True):
        out[i] = value
    return out


def _reduce_dense(tensors: list[Any], op: int, compression: Any, prescale: float, postscale: float) -> list[Any]:
    import tensorflow as tf

    tensors = [_scale(t, prescale) for t in tensors]
    if state().topology.size == 1:
        return [_scale(t, postscale) for t in tensors]
    packed = []
    for t in tensors:
        c, ctx = compression.compress(t)
        packed.append((c, ctx))
    results: list[Any] = [None] * len(tensors)
    by_dtype: dict[Any, list[int]] = {}
    for i, (c, _) in enumerate(packed):
        by_dtype.setdefault(c.dtype, []).append(i)
    for idx in by_dtype.values():
        parts = [packed[i][0] for i in idx]
        flat = tf.concat([tf.reshape(p, [-1]) for p in parts], axis=0) if len(parts) > 1 else tf.reshape(parts[0], [-1])
        reduced = _reduce_flat(flat, op)
        pieces = tf.split(reduced, [tf.size(p) for p in parts]) if len(parts) > 1 else [reduced]
        for i, piece, part in zip(idx, pieces, parts, strict=True):
            value = compression.decompress(tf.reshape(piece, tf.shape(part)), packed[i][1])
            results[i] = _scale(value, postscale)
    return results


def allgather(tensor: Any, name: str | None = None, ignore_name_scope: bool = False, process_set: Any = None) -> Any:
    """Concatenate every rank's tensor along dimension 0, in rank order; the first dimension may differ."""
    import tensorflow as tf

    _check_process_set(process_set)
    tensor = tf.convert_to_tensor(tensor)
    n = size()
    if n == 1:
        return tf.identity(tensor)
    if tensor.shape.rank == 0:
        raise ValueError("hvd.allgather needs a tensor of rank >= 1 (it concatenates along dimension 0)")
    length = tf.shape(tensor, out_type=tf.int64)[0]
    # Who sent what: TensorFlow orders a gather by device, so each rank sends its rank and length too.
    meta = _gather_flat(tf.stack([tf.constant(rank(), tf.int64), length])[tf.newaxis])
    order = tf.argsort(meta[:, 0])
    lengths = tf.gather(meta[:, 1], order)
    longest = tf.reduce_max(meta[:, 1])
    padding = [[0, longest - length]] + [[0, 0]] * (tensor.shape.rank - 1)
    gathered = _gather_flat(tf.pad(tensor, padding))
    rows = tf.reshape(gathered, tf.concat([[n, longest], tf.shape(tensor, out_type=tf.int64)[1:]], axis=0))
    rows = tf.gather(rows, order)
    return tf.boolean_mask(rows, tf.sequence_mask(lengths, longest))


def broadcast(tensor: Any, root_rank: int, name: str | None = None, ignore_name_scope: bool = False,
              process_set: Any = None) -> Any:
    """Rank root_rank's tensor, on every rank."""
    import tensorflow as tf

    _check_process_set(process_set)
    n = size()
    if not 0 <= root_rank < n:
        raise ValueError(f"hvd.broadcast: root_rank {root_rank} is not a rank of this job (0..{n - 1})")
    tensor = tf.convert_to_tensor(tensor)
    if n == 1:
        return tf.identity(tensor)
    wire, dtype = _on_the_wire(tensor)
    if rank() == root_rank:
        out = _collective(lambda key, timeout: tf.raw_ops.CollectiveBcastSendV2(
            input=wire, group_size=n, group_key=GROUP_KEY, instance_key=key, communication_hint="auto",
            timeout_seconds=timeout))
    else:
        out = _collective(lambda key, timeout: tf.raw_ops.CollectiveBcastRecvV2(
            group_size=n, group_key=GROUP_KEY, instance_key=key, shape=tf.shape(wire), T=wire.dtype,
            communication_hint="auto", timeout_seconds=timeout))
    return _back(out, dtype)


def broadcast_variables(variables: Iterable[Any], root_rank: int, process_set: Any = None,
                        inplace: bool = False) -> Any:
    """Assign rank root_rank's values to these variables on every rank (packed: one broadcast per dtype)."""
    import tensorflow as tf

    _check_process_set(process_set)
    variables = list(variables() if callable(variables) else variables)
    if size() == 1 or not variables:
        return tf.no_op() if not tf.executing_eagerly() else None
    by_dtype: dict[Any, list[tuple[Any, Any]]] = {}
    for v in variables:  # tf.Variable or a Keras 3 variable (its dtype a name, its shape a tuple)
        value = tf.convert_to_tensor(v)
        by_dtype.setdefault(value.dtype, []).append((v, value))
    assigns = []
    for group in by_dtype.values():
        flat = tf.concat([tf.reshape(value, [-1]) for _, value in group], axis=0)
        values = broadcast(flat, root_rank)
        pieces = tf.split(values, [value.shape.num_elements() for _, value in group]) if len(group) > 1 else [values]
        for (v, value), piece in zip(group, pieces, strict=True):
            assigns.append(v.assign(tf.reshape(piece, tf.shape(value))))
    return None if tf.executing_eagerly() else tf.group(*assigns)


def broadcast_object(obj: Any, root_rank: int = 0, session: Any = None, name: str | None = None,
                     process_set: Any = None) -> Any:
    """Rank root_rank's Python object on every rank (pickled; only the job's own ranks send it)."""
    import numpy as np
    import tensorflow as tf

    _check_process_set(process_set)
    if size() == 1:
        return obj
    data = pickle.dumps(obj) if rank() == root_rank else b""
    length = int(broadcast(tf.constant([len(data)], tf.int64), root_rank).numpy()[0])
    payload = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(length, dtype=np.uint8)
    received = broadcast(tf.constant(payload, tf.uint8), root_rank).numpy().tobytes()
    return pickle.loads(received)  # noqa: S301 - bytes from rank root_rank of this same job


def allgather_object(obj: Any, session: Any = None, name: str | None = None, process_set: Any = None) -> list[Any]:
    """Every rank's Python object, in rank order."""
    import numpy as np
    import tensorflow as tf

    _check_process_set(process_set)
    if size() == 1:
        return [obj]
    data = pickle.dumps(obj)
    lengths = allgather(tf.constant([len(data)], tf.int64)).numpy().tolist()
    blob = allgather(tf.constant(np.frombuffer(data, dtype=np.uint8), tf.uint8)).numpy().tobytes()
    out, start = [], 0
    for n in lengths:
        out.append(pickle.loads(blob[start:start + n]))  # noqa: S301 - bytes from this same job's ranks
        start += n
    return out


__all__ = [
    "Adasum", "Average", "Compression", "Max", "Min", "NotSupported", "Product", "Sum", "allgather",
    "allgather_object", "allreduce", "broadcast", "broadcast_object", "broadcast_variables", "ccl_built",
    "cross_rank", "cross_size", "cuda_built", "ddl_built", "global_process_set", "gloo_built", "gloo_enabled",
    "grouped_allreduce", "init", "is_homogeneous", "is_initialized", "local_rank", "local_size", "mpi_built",
    "mpi_enabled", "mpi_threads_supported", "nccl_built", "rank", "reduce_gradients", "rocm_built", "shutdown",
    "size",
]
_ = (NotSupported, ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, init,
     is_homogeneous, is_initialized, local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
     nccl_built, rocm_built, shutdown)  # re-exported: the API modules take them from here
