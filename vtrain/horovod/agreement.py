"""The agreement step before a collective: every rank says what it is about to send, and a call the ranks
disagree on is refused on every rank, before any data moves, so the ring stays usable.

Horovod's coordinator compares each rank's request (the op, its name, dtype, shape and root) and answers a
mismatch with one FailedPrecondition error on every rank. TensorFlow's collectives compare nothing: two ranks
that send different shapes get InvalidArgument or Internal errors, or garbage, and every later collective of
both processes fails. So before each call vtrain.horovod gathers a fixed-size int64 description from every
rank (:class:`Descriptor`: 16 numbers, so the gather itself can never mismatch), and each rank checks the
same table: eagerly a ``tf.errors.FailedPreconditionError`` naming what each rank sent; inside a tf.function
an assertion that fails the step on every rank with the same table (TensorFlow raises it as InvalidArgument:
no graph op can raise FailedPrecondition with a message of its own). The gather also tells each rank the
others' first dimensions (what allgather needs) and the order TensorFlow gathers ranks in.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: The kinds of call, as the first number of a description.
ALLREDUCE, ALLGATHER, BROADCAST, GROUPED_ALLREDUCE, GROUPED_ALLGATHER, BROADCAST_GROUP, OBJECT = range(1, 8)
KIND_NAMES = {ALLREDUCE: "allreduce", ALLGATHER: "allgather", BROADCAST: "broadcast",
              GROUPED_ALLREDUCE: "grouped_allreduce", GROUPED_ALLGATHER: "grouped_allgather",
              BROADCAST_GROUP: "broadcast_variables", OBJECT: "broadcast_object/allgather_object"}

WIDTH = 16
_DIMS = 6  # dimensions written out; a hash covers them all
_KIND, _OP, _DTYPE, _NDIM, _DIM0, _HASH, _ROOT, _NAME, _PRE, _POST, _RANK = 0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 15
_PRIME = 2_147_483_647
_UNKNOWN = -1


@dataclass(frozen=True)
class Descriptor:
    """What one rank is about to do, before it is sent as WIDTH int64 numbers."""

    kind: int
    tensors: Sequence[Any]  # the tensors (one, or a group)
    op: int = -1
    root: int = -1
    name: str | None = None
    prescale: float = 1.0
    postscale: float = 1.0
    any_first_dim: bool = False  # allgather: the first dimension may differ between ranks


def _float_bits(value: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", float(value)))[0])


#: 31**i mod _PRIME: the weight of dimension i in a shape's number (TensorFlow allows up to 254 dimensions).
_WEIGHTS = [pow(31, i, _PRIME) for i in range(256)]


def _shape_number(dims: Sequence[int]) -> int:
    return (sum((d + 1) % _PRIME * w % _PRIME for d, w in zip(dims, _WEIGHTS, strict=False)) + len(dims)) % _PRIME


def _shape_number_tf(tf: Any, dims: Any) -> Any:
    """_shape_number of a shape known only when the graph runs (an int64 vector)."""
    weights = tf.constant(_WEIGHTS, tf.int64)[:tf.size(dims)]
    parts = tf.math.floormod(tf.math.floormod(dims + 1, _PRIME) * weights, _PRIME)
    return tf.math.floormod(tf.reduce_sum(parts) + tf.size(dims, out_type=tf.int64), _PRIME)


def _single(desc: Descriptor) -> bool:
    return len(desc.tensors) == 1 and desc.kind not in (GROUPED_ALLREDUCE, GROUPED_ALLGATHER, BROADCAST_GROUP)


def encode(tf: Any, desc: Descriptor, rank: int) -> Any:
    """The description as an int64 vector of WIDTH numbers: a constant when the shapes are known (eagerly, and in
    most graphs), else computed when the graph runs."""
    name = zlib.crc32(desc.name.encode()) if desc.name else 0
    head = [desc.kind, desc.op]
    tail = [desc.root, name, _float_bits(desc.prescale), _float_bits(desc.postscale), rank]
    skip = 1 if desc.any_first_dim else 0
    if all(t.shape.is_fully_defined() for t in desc.tensors):
        if _single(desc):
            tensor = desc.tensors[0]
            shape = [int(d) for d in tensor.shape]
            dims = (shape + [_UNKNOWN] * _DIMS)[:_DIMS]
            middle = [tensor.dtype.as_datatype_enum, len(shape), *dims, _shape_number(shape[skip:])]
        else:  # a group: its length, and one number for all its dtypes and shapes
            signature = len(desc.tensors)
            for t in desc.tensors:
                one = _shape_number([int(d) for d in t.shape][skip:]) * 131 + t.dtype.as_datatype_enum
                signature = (signature * 1_000_003 + one % _PRIME) % _PRIME
            middle = [0, len(desc.tensors), *[_UNKNOWN] * _DIMS, signature]
        return tf.constant(head + middle + tail, tf.int64)
    i64 = tf.int64
    if _single(desc):
        tensor = desc.tensors[0]
        shape = tf.shape(tensor, out_type=i64)
        dtype, ndim = tf.constant([tensor.dtype.as_datatype_enum], i64), tf.size(shape, out_type=i64)[tf.newaxis]
        dims = tf.concat([shape, tf.fill([_DIMS], tf.constant(_UNKNOWN, i64))], 0)[:_DIMS]
        number = _shape_number_tf(tf, shape[skip:])
    else:
        number = tf.constant(len(desc.tensors), i64)
        for t in desc.tensors:
            one = _shape_number_tf(tf, tf.shape(t, out_type=i64)[skip:]) * 131 + t.dtype.as_datatype_enum
            number = tf.math.floormod(number * 1_000_003 + tf.math.floormod(one, _PRIME), _PRIME)
        dtype, ndim = tf.constant([0], i64), tf.constant([len(desc.tensors)], i64)
        dims = tf.fill([_DIMS], tf.constant(_UNKNOWN, i64))
    return tf.concat([tf.constant(head, i64), dtype, ndim, dims, number[tf.newaxis], tf.constant(tail, i64)], 0)


def _compared(desc: Descriptor) -> list[int]:
    columns = [c for c in range(WIDTH) if c != _RANK]
    if desc.any_first_dim:
        columns.remove(_DIM0)
    return columns


def _describe(row: Sequence[int]) -> str:
    """One rank's row, as a person reads it: `float32[17, 18, 17]`, the op, the root."""
    import tensorflow as tf

    kind = KIND_NAMES.get(int(row[_KIND]), f"call {row[_KIND]}")
    if row[_DTYPE]:
        ndim = int(row[_NDIM])
        dims = [str(int(d)) for d in row[_DIM0:_DIM0 + min(ndim, _DIMS)]] + (["..."] if ndim > _DIMS else [])
        try:
            dtype = tf.as_dtype(int(row[_DTYPE])).name
        except TypeError:
            dtype = f"dtype {row[_DTYPE]}"
        what = f"{dtype}[{', '.join(dims)}]"
    else:
        what = f"{int(row[_NDIM])} tensors (signature {int(row[_HASH])})"
    extra = [f"op {int(row[_OP])}"] if row[_OP] >= 0 else []
    extra += [f"root_rank {int(row[_ROOT])}"] if row[_ROOT] >= 0 else []
    extra += [f"name #{int(row[_NAME])}"] if row[_NAME] else []
    if row[_PRE] != _float_bits(1.0) or row[_POST] != _float_bits(1.0):
        pre, post = (struct.unpack("<d", struct.pack("<q", int(v)))[0] for v in (row[_PRE], row[_POST]))
        extra.append(f"prescale {pre:g}, postscale {post:g}")
    return f"{kind} of {what}" + (f" ({', '.join(extra)})" if extra else "")


def problem(call: str, desc: Descriptor, rows: Sequence[Sequence[int]]) -> str | None:
    """What the ranks disagree on (rows in any order, each ending with its rank), or None."""
    columns = _compared(desc)
    first = rows[0]
    if all(all(row[c] == first[c] for c in columns) for row in rows[1:]):
        return None
    ordered = sorted(rows, key=lambda row: int(row[_RANK]))
    said = "; ".join(f"rank {int(row[_RANK])}: {_describe(row)}" for row in ordered)
    return (f"vtrain.horovod: {call} was called differently on different ranks, so no rank ran it (the ring is "
            f"still usable): {said}. Every rank must make the same collective calls in the same order, with "
            "the same dtype, shape (allgather: but the first dimension), op and root_rank")


def first_dims(rows: Sequence[Sequence[int]]) -> list[int]:
    """Each rank's first dimension, in rank order."""
    return [int(row[_DIM0]) for row in sorted(rows, key=lambda row: int(row[_RANK]))]


def gather_order(rows: Sequence[Sequence[int]]) -> list[int]:
    """The rank of each row, in the order TensorFlow's gather returned them."""
    return [int(row[_RANK]) for row in rows]


def graph_check(tf: Any, call: str, desc: Descriptor, table: Any) -> Any:
    """Inside a tf.function: an op that fails on every rank when the gathered rows disagree."""
    columns = tf.constant(_compared(desc), tf.int32)
    picked = tf.gather(table, columns, axis=1)
    agree = tf.reduce_all(tf.equal(picked, picked[:1]))
    return tf.debugging.Assert(agree, [
        f"vtrain.horovod: {call} was called differently on different ranks (Horovod refuses it with "
        "FailedPrecondition), so no rank ran it. One row per rank: kind, op, dtype, ndim, first 6 dims, shape "
        "hash, root_rank, name, prescale, postscale, rank:", table], summarize=WIDTH * 64)
