"""Horovod's collectives on TensorFlow's own: the ring (CPU) and NCCL (GPU) all-reduce that
MultiWorkerMirroredStrategy runs, without a strategy scope and without building Horovod.

Each collective is one ``tf.raw_ops`` op (CollectiveReduceV2, CollectiveGatherV2,
CollectiveBcastSendV2/RecvV2) over one group of all ranks (:mod:`vtrain.horovod.ring`), after the agreement
step (:mod:`vtrain.horovod.agreement`) that refuses a call the ranks disagree on with one error on every
rank. Every rank runs the same script, so it makes (or traces) the same collectives in the same order and
the instance keys agree. Gradients are packed per dtype into one flat tensor, so a step costs one all-reduce
(Horovod's tensor fusion). Ops made in one tf.function are chained by control dependencies, so every rank
launches them in the same order (NCCL needs that). ``communication_hint="auto"`` lets TensorFlow pick NCCL
for GPU tensors and its ring for CPU ones; VTRAIN_COLLECTIVE_TIMEOUT (default 300 s) bounds every op.

Gradients are Horovod's: an allreduce's gradient is the same allreduce of the incoming gradient, an
allgather's is this rank's slice of its averaged gradient, a broadcast's the averaged gradient on the root
and zero elsewhere. What a tensor travels as, and how it is scaled, is :mod:`vtrain.horovod.wire`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from vtrain.horovod import agreement
from vtrain.horovod.agreement import Descriptor
from vtrain.horovod.ops import (
    MERGE,
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    agree,
    check_op,
    check_process_set,
    check_root,
    check_sparse,
    collective,
    differentiable,
    gather,
    global_process_set,
    rank_order,
)
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
    rank,
    rocm_built,
    shutdown,
    size,
)
from vtrain.horovod.unsupported import NotSupported, fail
from vtrain.horovod.wire import check_dtype, scale, to_wire


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


# --------------------------------------------------------------------------- allreduce


def allreduce(tensor: Any, average: bool | None = None, device_dense: str = "", device_sparse: str = "",
              compression: Any = Compression.none, op: int | None = None, prescale_factor: float = 1.0,
              postscale_factor: float = 1.0, name: str | None = None, process_set: Any = None,
              ignore_name_scope: bool = False) -> Any:
    """Reduce a tensor (or tf.IndexedSlices) over all ranks; every rank gets the result (Average by default)."""
    import tensorflow as tf

    chosen = check_op(op, average)
    check_process_set(process_set)
    if isinstance(tensor, tf.IndexedSlices):
        check_sparse(chosen, prescale_factor, postscale_factor, "hvd.allreduce")
        return _sparse_reduce(tensor, chosen)
    x = tf.convert_to_tensor(tensor)
    desc = Descriptor(agreement.ALLREDUCE, [x], op=chosen, name=name, prescale=prescale_factor,
                      postscale=postscale_factor)
    return differentiable(
        lambda t: _reduce_dense([t], desc, compression)[0],
        lambda dy: allreduce(dy, op=chosen, prescale_factor=prescale_factor, postscale_factor=postscale_factor),
        [x])


def grouped_allreduce(tensors: Sequence[Any], average: bool | None = None, device_dense: str = "",
                      device_sparse: str = "", compression: Any = Compression.none, op: int | None = None,
                      prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                      process_set: Any = None, ignore_name_scope: bool = False, name: str | None = None) -> list[Any]:
    """allreduce of a list (tensors and tf.IndexedSlices), the dense ones packed: one collective per dtype."""
    import tensorflow as tf

    chosen = check_op(op, average, "hvd.grouped_allreduce")
    check_process_set(process_set)
    tensors = list(tensors)
    if not tensors:
        return tensors
    if any(isinstance(t, tf.IndexedSlices) for t in tensors):
        check_sparse(chosen, prescale_factor, postscale_factor, "hvd.grouped_allreduce")
    out: list[Any] = [None] * len(tensors)
    dense = [i for i, t in enumerate(tensors) if t is not None and not isinstance(t, tf.IndexedSlices)]
    for i, t in enumerate(tensors):
        if isinstance(t, tf.IndexedSlices):
            out[i] = _sparse_reduce(t, chosen)
    if dense:
        xs = [tf.convert_to_tensor(tensors[i]) for i in dense]
        desc = Descriptor(agreement.GROUPED_ALLREDUCE, xs, op=chosen, name=name, prescale=prescale_factor,
                          postscale=postscale_factor)
        reduced = differentiable(
            lambda *ts: _reduce_dense(list(ts), desc, compression),
            lambda *dys: grouped_allreduce(list(dys), op=chosen, prescale_factor=prescale_factor,
                                           postscale_factor=postscale_factor),
            xs)
        for i, value in zip(dense, reduced, strict=True):
            out[i] = value
    return out


def reduce_gradients(grads: Sequence[Any], *, op: int = Average, compression: Any = Compression.none,
                     sparse_as_dense: bool = False, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                     process_set: Any = None) -> list[Any]:
    """The gradients every rank applies: dense ones packed per dtype into one all-reduce each, sparse
    ones (tf.IndexedSlices) gathered (or made dense first with sparse_as_dense); None stays None."""
    import tensorflow as tf

    check_process_set(process_set)
    out: list[Any] = list(grads)
    dense = []
    for i, g in enumerate(grads):
        if g is None:
            continue
        if isinstance(g, tf.IndexedSlices) and not sparse_as_dense:
            out[i] = allreduce(g, op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor)
            continue
        dense.append(i)
        out[i] = tf.convert_to_tensor(g)
    if dense:
        desc = Descriptor(agreement.GROUPED_ALLREDUCE, [out[i] for i in dense], op=op, prescale=prescale_factor,
                          postscale=postscale_factor)
        for i, value in zip(dense, _reduce_dense([out[i] for i in dense], desc, compression), strict=True):
            out[i] = value
    return out


def _sparse_reduce(tensor: Any, op: int) -> Any:
    """Horovod's IndexedSlices reduction: the values and indices of every rank, gathered (Average: values
    divided by the number of ranks)."""
    import tensorflow as tf

    values = allgather(tensor.values)
    indices = allgather(tensor.indices)
    if op == Average:
        values = values / tf.cast(size(), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)


def _reduce_dense(tensors: list[Any], desc: Descriptor, compression: Any) -> list[Any]:
    """Agree, then reduce: compressed, prescaled, packed per dtype into one collective each, postscaled.
    Average divides floats in the collective and scales integers by 1/size in float64, as Horovod does."""
    import tensorflow as tf

    call = "hvd.allreduce" if desc.kind == agreement.ALLREDUCE else "hvd.grouped_allreduce"
    agreed = agree(call, desc)
    for t in tensors:
        check_dtype(t.dtype, call, reduce=True)
    n, op = size(), desc.op
    packed = [compression.compress(t) for t in tensors]
    by_dtype: dict[Any, list[int]] = {}
    for i, (c, _) in enumerate(packed):
        by_dtype.setdefault(c.dtype, []).append(i)
    results: list[Any] = [None] * len(tensors)
    for dtype, idx in by_dtype.items():
        parts = [scale(packed[i][0], desc.prescale) for i in idx]
        flat = tf.concat([tf.reshape(p, [-1]) for p in parts], 0) if len(parts) > 1 else tf.reshape(parts[0], [-1])
        divide = op == Average and not dtype.is_integer
        reduced = _reduce_flat(flat, MERGE[op], divide, agreed.after)
        post = desc.postscale / n if op == Average and dtype.is_integer else desc.postscale
        reduced = scale(reduced, post)
        pieces = tf.split(reduced, [tf.size(p) for p in parts]) if len(parts) > 1 else [reduced]
        for i, piece, part in zip(idx, pieces, parts, strict=True):
            results[i] = compression.decompress(tf.reshape(piece, tf.shape(part)), packed[i][1])
    return results


def _reduce_flat(flat: Any, merge: str, divide: bool, after: Sequence[Any]) -> Any:
    import tensorflow as tf

    n = size()
    if n == 1:
        return flat
    wire, back = to_wire(flat, merge)
    return back(collective(lambda key, timeout: tf.raw_ops.CollectiveReduceV2(
        input=wire, group_size=n, group_key=GROUP_KEY, instance_key=key, ordering_token=[], merge_op=merge,
        final_op="Div" if divide else "Id", communication_hint="auto", timeout_seconds=timeout), after))


# --------------------------------------------------------------------------- allgather


def allgather(tensor: Any, name: str | None = None, ignore_name_scope: bool = False, process_set: Any = None) -> Any:
    """Concatenate every rank's tensor along dimension 0, in rank order; the first dimension may differ."""
    import tensorflow as tf

    check_process_set(process_set)
    x = tf.convert_to_tensor(tensor)
    if x.shape.rank == 0:
        raise ValueError("hvd.allgather needs a tensor of rank >= 1 (it concatenates along dimension 0); "
                         "wrap a scalar as [x]")
    box: dict[str, Any] = {}

    def forward(t: Any) -> Any:
        out, box["lengths"] = _allgather_one(t, name, "hvd.allgather")
        return out

    def backward(dy: Any) -> Any:  # this rank's slice of the averaged gradient
        averaged = allreduce(dy, op=Average)
        return tf.split(averaged, box["lengths"], num=size())[rank()]

    return differentiable(forward, backward, [x])


def grouped_allgather(tensors: Sequence[Any], name: str | None = None, ignore_name_scope: bool = False,
                      process_set: Any = None) -> list[Any]:
    """allgather of each tensor of a list (Horovod's grouped_allgather), after one agreement on the list."""
    import tensorflow as tf

    check_process_set(process_set)
    xs = [tf.convert_to_tensor(t) for t in tensors]
    if not xs:
        return []
    if any(x.shape.rank == 0 for x in xs):
        raise ValueError("hvd.grouped_allgather needs tensors of rank >= 1 (it concatenates along dimension 0)")
    agreed = agree("hvd.grouped_allgather", Descriptor(agreement.GROUPED_ALLGATHER, xs, name=name,
                                                        any_first_dim=True))
    with tf.control_dependencies(agreed.after):  # in a graph, every gather of the group after the check
        return [allgather(x) for x in xs]


def _allgather_one(x: Any, name: str | None, call: str) -> tuple[Any, Any]:
    """The gathered tensor and each rank's first dimension (in rank order)."""
    import tensorflow as tf

    desc = Descriptor(agreement.ALLGATHER, [x], name=name, any_first_dim=True)
    agreed = agree(call, desc)
    check_dtype(x.dtype, call, reduce=False)
    n = size()
    if n == 1:
        return tf.identity(x), tf.shape(x, out_type=tf.int64)[:1]
    order = rank_order(agreed.table)
    lengths = tf.gather(agreed.table[:, 4], order)  # the first dimension of each rank, in rank order
    longest = tf.reduce_max(lengths)
    own = tf.shape(x, out_type=tf.int64)
    padded = tf.pad(x, tf.concat([[[0, longest - own[0]]], tf.zeros([tf.rank(x) - 1, 2], tf.int64)], 0))
    wire, back = to_wire(padded, None)
    gathered = back(gather(wire, agreed.after))
    rows = tf.reshape(gathered, tf.concat([[n, longest], own[1:]], 0))
    rows = tf.gather(rows, order)
    return tf.boolean_mask(rows, tf.sequence_mask(lengths, longest)), lengths


# --------------------------------------------------------------------------- broadcast


def broadcast(tensor: Any, root_rank: int, name: str | None = None, ignore_name_scope: bool = False,
              process_set: Any = None) -> Any:
    """Rank root_rank's tensor, on every rank."""
    import tensorflow as tf

    check_process_set(process_set)
    root_rank = check_root(root_rank, "hvd.broadcast")
    x = tf.convert_to_tensor(tensor)

    def forward(t: Any) -> Any:
        agreed = agree("hvd.broadcast", Descriptor(agreement.BROADCAST, [t], root=root_rank, name=name))
        check_dtype(t.dtype, "hvd.broadcast", reduce=False)
        return _broadcast_one(t, root_rank, agreed.after)

    def backward(dy: Any) -> Any:  # the averaged gradient reaches the root; the others' inputs did not count
        averaged = allreduce(dy, op=Average)
        return averaged if rank() == root_rank else tf.zeros_like(averaged)

    return differentiable(forward, backward, [x])


def _broadcast_one(x: Any, root_rank: int, after: Sequence[Any] = ()) -> Any:
    """Rank root_rank's x on every rank (no agreement: the caller agreed on it)."""
    import tensorflow as tf

    n = size()
    if n == 1:
        return tf.identity(x)
    wire, back = to_wire(x, None)
    if rank() == root_rank:
        out = collective(lambda key, timeout: tf.raw_ops.CollectiveBcastSendV2(
            input=wire, group_size=n, group_key=GROUP_KEY, instance_key=key, communication_hint="auto",
            timeout_seconds=timeout), after)
    else:
        out = collective(lambda key, timeout: tf.raw_ops.CollectiveBcastRecvV2(
            group_size=n, group_key=GROUP_KEY, instance_key=key, shape=tf.shape(wire), T=wire.dtype,
            communication_hint="auto", timeout_seconds=timeout), after)
    return back(out)


def broadcast_variables(variables: Iterable[Any], root_rank: int, process_set: Any = None,
                        inplace: bool = False) -> Any:
    """Assign rank root_rank's values to these variables on every rank (packed: one broadcast per dtype)."""
    import tensorflow as tf

    assigns = _broadcast_assign(variables, root_rank, process_set, "hvd.broadcast_variables")
    return None if tf.executing_eagerly() else tf.group(*assigns)


def broadcast_(variables: Iterable[Any], root_rank: int, name: str | None = None, process_set: Any = None) -> list[Any]:
    """Horovod's in-place broadcast: the variables take rank root_rank's values; returns their new values."""
    import tensorflow as tf

    variables = list(variables)
    assigns = _broadcast_assign(variables, root_rank, process_set, "hvd.broadcast_", name)
    with tf.control_dependencies(assigns if not tf.executing_eagerly() else []):
        return [tf.identity(tf.convert_to_tensor(v)) for v in variables]


def _broadcast_assign(variables: Iterable[Any], root_rank: int, process_set: Any, call: str,
                      name: str | None = None) -> list[Any]:
    import tensorflow as tf

    check_process_set(process_set)
    root_rank = check_root(root_rank, call)
    variables = list(variables() if callable(variables) else variables)
    if not variables:
        return []
    values = [tf.convert_to_tensor(v) for v in variables]  # tf.Variable or a Keras 3 variable
    agreed = agree(call, Descriptor(agreement.BROADCAST_GROUP, values, root=root_rank, name=name))
    for value in values:
        check_dtype(value.dtype, call, reduce=False)
    by_dtype: dict[Any, list[int]] = {}
    for i, value in enumerate(values):
        by_dtype.setdefault(value.dtype, []).append(i)
    assigns = []
    for idx in by_dtype.values():
        flat = tf.concat([tf.reshape(values[i], [-1]) for i in idx], 0)
        received = _broadcast_one(flat, root_rank, agreed.after)
        pieces = tf.split(received, [values[i].shape.num_elements() for i in idx]) if len(idx) > 1 else [received]
        for i, piece in zip(idx, pieces, strict=True):
            assigns.append(variables[i].assign(tf.reshape(piece, tf.shape(values[i]))))
    return assigns


# --------------------------------------------------------------------------- who am I, as tensors


def rank_op(name: str | None = None) -> Any:
    """hvd.rank() as an int32 tensor."""
    import tensorflow as tf

    return tf.constant(rank(), tf.int32, name=name)


def local_rank_op(name: str | None = None) -> Any:
    """hvd.local_rank() as an int32 tensor."""
    import tensorflow as tf

    return tf.constant(local_rank(), tf.int32, name=name)


def size_op(process_set_id: int = 0, name: str | None = None) -> Any:
    """hvd.size() as an int32 tensor (the global process set, the only one)."""
    import tensorflow as tf

    if process_set_id != 0:
        fail("process_set=... (a process set)")
    return tf.constant(size(), tf.int32, name=name)


def local_size_op(name: str | None = None) -> Any:
    """hvd.local_size() as an int32 tensor."""
    import tensorflow as tf

    return tf.constant(local_size(), tf.int32, name=name)


def process_set_included_op(process_set_id: int = 0, name: str | None = None) -> Any:
    """1: this rank is in the global process set (the only one)."""
    import tensorflow as tf

    if process_set_id != 0:
        fail("process_set=... (a process set)")
    return tf.constant(1, tf.int32, name=name)


__all__ = [
    "Adasum", "Average", "Compression", "Max", "Min", "NotSupported", "Product", "Sum", "allgather",
    "allreduce", "broadcast", "broadcast_", "broadcast_variables", "ccl_built", "cross_rank", "cross_size",
    "cuda_built", "ddl_built", "global_process_set", "gloo_built", "gloo_enabled", "grouped_allgather",
    "grouped_allreduce", "init", "is_homogeneous", "is_initialized", "local_rank", "local_rank_op", "local_size",
    "local_size_op", "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "process_set_included_op",
    "rank", "rank_op", "reduce_gradients", "rocm_built", "shutdown", "size", "size_op",
]
_ = (ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, init,
     is_homogeneous, is_initialized, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rocm_built,
     shutdown)  # re-exported: the API modules take them from here
