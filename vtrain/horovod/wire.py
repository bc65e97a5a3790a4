"""What a tensor travels as: the dtypes Horovod's collectives take, how each crosses TensorFlow's collective
ops, and how a tensor is scaled.

TensorFlow's CollectiveReduceV2/GatherV2/Bcast carry float16/32/64 and int32/64. Narrower integers and bool
travel widened to int32 and come back in their own dtype; bfloat16 as float32; uint32 as int64 (every value
fits); uint64 bit for bit as int64, which adds and multiplies alike modulo 2**64, and whose order Min/Max keep
once the sign bit is flipped (so ``Max(2**63 + 5, 1)`` is ``2**63 + 5``, never a wrapped negative). Complex,
string and resource tensors are refused with a TypeError, as Horovod's ops refuse them, and bool is refused
by the reductions (Horovod reduces numbers only) but carried by allgather and broadcast.

Scaling follows Horovod: an integer tensor is scaled in float64 and truncated back to its dtype (a factor of
0.19 is not cast to 0 first), float16 and bfloat16 in float32, other floats in their own dtype. All of this
is the same for a ring of one: a call that two replicas refuse, one refuses too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: What allreduce reduces (Horovod's list, plus the unsigned and bfloat16 types this carries exactly).
_REDUCIBLE = ("uint8", "int8", "uint16", "int16", "int32", "int64", "uint32", "uint64", "float16", "bfloat16",
              "float32", "float64")
#: What allgather and broadcast carry: the above and bool.
_CARRIED = (*_REDUCIBLE, "bool")
_SIGN_BIT = -(2**63)


def check_dtype(dtype: Any, call: str, reduce: bool) -> None:
    """TypeError for a dtype the collective does not take, naming the ones it does."""
    allowed = _REDUCIBLE if reduce else _CARRIED
    if dtype.name not in allowed:
        raise TypeError(f"{call}: cannot {'reduce' if reduce else 'carry'} {dtype.name} tensors; "
                        f"Horovod's {call.removeprefix('hvd.')} takes {', '.join(allowed)}")


def to_wire(tensor: Any, op: str | None) -> tuple[Any, Callable[[Any], Any]]:
    """The tensor as TensorFlow's collectives carry it, and the function that brings a result back to its
    dtype. `op` is the merge op of a reduction (Add, Mul, Min, Max), None for a gather or broadcast."""
    import tensorflow as tf

    dtype = tensor.dtype
    if dtype in (tf.float16, tf.float32, tf.float64, tf.int32, tf.int64):
        return tensor, lambda t: t
    if dtype == tf.bfloat16:
        return tf.cast(tensor, tf.float32), lambda t: tf.cast(t, dtype)
    if dtype == tf.uint64:
        bits = tf.bitcast(tensor, tf.int64)
        if op in ("Min", "Max"):  # unsigned order = signed order with the sign bit flipped
            flip = tf.constant(_SIGN_BIT, tf.int64)
            return tf.bitwise.bitwise_xor(bits, flip), \
                lambda t: tf.bitcast(tf.bitwise.bitwise_xor(t, flip), tf.uint64)
        return bits, lambda t: tf.bitcast(t, tf.uint64)
    wide = tf.int64 if dtype == tf.uint32 else tf.int32
    return tf.cast(tensor, wide), lambda t: tf.cast(t, dtype)


def scale(tensor: Any, factor: float) -> Any:
    """`tensor * factor` as Horovod computes it: integers in float64, half floats in float32."""
    import tensorflow as tf

    if factor == 1.0:
        return tensor
    dtype = tensor.dtype
    if dtype.is_integer:
        math = tf.float64
    elif dtype in (tf.float16, tf.bfloat16):
        math = tf.float32
    else:
        math = dtype
    return tf.cast(tf.cast(tensor, math) * tf.constant(factor, math), dtype)
