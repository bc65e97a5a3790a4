"""vtrain.horovod against the behaviours Horovod v0.28.1's TF2 tests check, on every rank of a real ring.

Each check is this project's own test of what one or more upstream tests check (vtrain/horovod/upstream.py maps
them), with rank-dependent inputs where Horovod's use the same values on every rank, so that a wrong rank order
or a dropped rank shows. Every check runs on every rank, in the same order (collectives must), and its outcome is
written, not raised: AIP_MODEL_DIR/conformance-rank<r>.json holds {check: {"ok", "error"}} for the test to read,
with the class 9 probes (:mod:`trainer.probes`), the memory a 64 MB object takes to travel, and the collective
timeout's bound, measured last (it ends the ring).
"""

import itertools
import json
import os
import threading
import time
import traceback

import numpy as np
import tensorflow as tf

import vtrain.horovod.keras as hvd_keras
import vtrain.horovod.tensorflow as hvd
from trainer import probes

REDUCIBLE = [tf.uint8, tf.int8, tf.int32, tf.int64, tf.float16, tf.float32, tf.float64]
CARRIED = [tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.float16, tf.float32, tf.float64, tf.bool]
DIMS = [1, 2, 3]
SIDE = 7
CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def rank_values(dtype, dim, rank, salt=0, shape=None):
    """The input rank `rank` sends for (dtype, dim): small integers, different on each rank, known to all."""
    rng = np.random.default_rng(1000 * rank + 100 * dim + 10 * salt + CARRIED.index(dtype))
    low, high = {tf.uint8: (0, 4), tf.int8: (-4, 4)}.get(dtype, (-30, 30))
    return rng.integers(low, high, size=shape or [SIDE] * dim).astype(dtype.as_numpy_dtype)


def every_rank(dtype, dim, salt=0, shape=None):
    return [rank_values(dtype, dim, k, salt, shape) for k in range(hvd.size())]


def expect_equal(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(got, want):
        raise AssertionError(f"{what}: got {got.dtype}{list(got.shape)} {got.ravel()[:6]}, want "
                             f"{want.dtype}{list(want.shape)} {want.ravel()[:6]}")


def expect_raises(kind, fn, what, text=None):
    try:
        fn()
    except kind as err:
        if text and text not in str(err):
            raise AssertionError(f"{what}: {kind.__name__} without {text!r}: {err}") from None
        return err
    except Exception as err:
        raise AssertionError(f"{what}: raised {type(err).__name__} ({err}), not {kind.__name__}") from None
    raise AssertionError(f"{what}: raised nothing, not {kind.__name__}")


def trunc_scale(values, factor, dtype):
    """Horovod's scaling: integers in float64, then truncated; float16 in float32; the rest in its dtype."""
    if dtype.is_integer:
        return np.trunc(values.astype(np.float64) * factor).astype(dtype.as_numpy_dtype)
    if dtype == tf.float16:
        return (values.astype(np.float32) * np.float32(factor)).astype(np.float16)
    return (values * dtype.as_numpy_dtype(factor)).astype(dtype.as_numpy_dtype)


def total(arrays):
    out = arrays[0].copy()
    for a in arrays[1:]:
        out = (out + a).astype(out.dtype)
    return out


# --------------------------------------------------------------------------- who am I


@check
def rank_and_size():
    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    want = 0 if task["type"] == "chief" else 1 + int(task["index"])
    expect_equal(hvd.rank(), want, "rank")
    expect_equal(hvd.size(), len(config["cluster"].get("chief", [])) + len(config["cluster"]["worker"]), "size")


@check
def rank_and_size_as_tensors():
    for op, want in ((hvd.rank_op(), hvd.rank()), (hvd.local_rank_op(), hvd.local_rank()),
                     (hvd.size_op(), hvd.size()), (hvd.local_size_op(), hvd.local_size())):
        expect_equal(op.numpy(), np.int32(want), op.name if hasattr(op, "name") else "op")


# --------------------------------------------------------------------------- allreduce


def reduce_all(op, dtypes, reference, **kwargs):
    for dtype, dim in itertools.product(dtypes, DIMS):
        inputs = every_rank(dtype, dim)
        got = hvd.allreduce(tf.constant(inputs[hvd.rank()]), op=op, **kwargs)
        expect_equal(got.numpy(), reference(inputs, dtype), f"{dtype.name} {dim}-d")


@check
def allreduce_sum():
    reduce_all(hvd.Sum, REDUCIBLE, lambda xs, dtype: total(xs))


@check
def allreduce_average():
    def mean(xs, dtype):
        return trunc_scale(total([x.astype(np.float64) for x in xs]), 1 / len(xs), dtype) if dtype.is_integer \
            else (total(xs) / np.asarray(len(xs), xs[0].dtype)).astype(xs[0].dtype)
    reduce_all(hvd.Average, REDUCIBLE, mean)


@check
def allreduce_min():
    reduce_all(hvd.Min, REDUCIBLE, lambda xs, dtype: np.minimum.reduce(xs))


@check
def allreduce_max():
    reduce_all(hvd.Max, REDUCIBLE, lambda xs, dtype: np.maximum.reduce(xs))


@check
def allreduce_product():
    reduce_all(hvd.Product, REDUCIBLE, lambda xs, dtype: np.multiply.reduce(xs).astype(xs[0].dtype))


@check
def allreduce_sum_in_one_function():
    cases = list(itertools.product(REDUCIBLE, DIMS))
    inputs = {case: every_rank(*case) for case in cases}

    @tf.function
    def all_at_once(tensors):
        return [hvd.allreduce(t, op=hvd.Sum) for t in tensors]

    got = all_at_once([tf.constant(inputs[case][hvd.rank()]) for case in cases])
    for case, value in zip(cases, got, strict=True):
        expect_equal(value.numpy(), total(inputs[case]), f"{case[0].name} {case[1]}-d in a tf.function")


SCALABLE = [tf.uint8, tf.int8, tf.int32, tf.int64, tf.float16, tf.float32, tf.float64]


@check
def allreduce_prescale():
    factor = 0.37
    reduce_all(hvd.Sum, SCALABLE, lambda xs, dtype: total([trunc_scale(x, factor, dtype) for x in xs]),
               prescale_factor=factor)
    ten = tf.constant([10, 20] if hvd.rank() == 0 else [0, 0])  # issue 45: 0.19 was cast to the int dtype (0)
    expect_equal(hvd.allreduce(ten, op=hvd.Sum, prescale_factor=0.19).numpy(), np.array([1, 3], np.int32),
                 "int32 prescale 0.19")


@check
def allreduce_postscale():
    factor = 0.37
    reduce_all(hvd.Sum, SCALABLE, lambda xs, dtype: trunc_scale(total(xs), factor, dtype), postscale_factor=factor)


def sparse_inputs(dtype, dim, rank):
    values = rank_values(dtype, dim, rank, salt=7, shape=[2] + [SIDE] * (dim - 1))
    return values, np.array([rank, rank + 1], np.int64)


def sparse_check(op):
    n = hvd.size()
    for dtype, dim in itertools.product(REDUCIBLE if op == hvd.Sum else [tf.float16, tf.float32, tf.float64], DIMS):
        mine = sparse_inputs(dtype, dim, hvd.rank())
        got = hvd.allreduce(tf.IndexedSlices(tf.constant(mine[0]), tf.constant(mine[1]),
                                             dense_shape=tf.constant([n + 1] + [SIDE] * (dim - 1), tf.int64)), op=op)
        assert isinstance(got, tf.IndexedSlices), type(got)
        every = [sparse_inputs(dtype, dim, k) for k in range(n)]
        values = np.concatenate([v for v, _ in every])
        if op == hvd.Average:
            values = (values / np.asarray(n, values.dtype)).astype(values.dtype)
        expect_equal(got.values.numpy(), values, f"{dtype.name} {dim}-d values")
        expect_equal(got.indices.numpy(), np.concatenate([i for _, i in every]), f"{dtype.name} {dim}-d indices")


@check
def allreduce_sparse_sum():
    sparse_check(hvd.Sum)


@check
def allreduce_sparse_average():
    sparse_check(hvd.Average)


def a_slice():
    return tf.IndexedSlices(tf.ones([1, 3]), tf.constant([hvd.rank()], tf.int64))


@check
def allreduce_sparse_refusals():
    for op in (hvd.Min, hvd.Max, hvd.Product, hvd.Adasum):
        expect_raises(NotImplementedError, lambda op=op: hvd.allreduce(a_slice(), op=op), f"op {op}")
    for scale in ({"prescale_factor": 0.5}, {"postscale_factor": 0.5}):
        expect_raises(NotImplementedError, lambda s=scale: hvd.allreduce(a_slice(), op=hvd.Sum, **s), str(scale))


def good_allreduce_after(what):
    x = tf.constant([1.0, 2.0]) * (hvd.rank() + 1)
    expect_equal(hvd.allreduce(x, op=hvd.Sum).numpy(), np.array([1.0, 2.0], np.float32) * sum(
        k + 1 for k in range(hvd.size())), f"the allreduce after {what}")


@check
def allreduce_shape_mismatch():
    r = hvd.rank()
    err = expect_raises(tf.errors.FailedPreconditionError, lambda: hvd.allreduce(tf.ones([5, 5 + r, 5])),
                        "dims differ", "float32[5, 6, 5]")
    assert "float32[5, 5, 5]" in str(err), str(err)
    good_allreduce_after("a dimension mismatch")
    shape = [6, 4 * 5] if r == 0 else [6, 4, 5]  # as many elements, another rank
    expect_raises(tf.errors.FailedPreconditionError, lambda: hvd.allreduce(tf.ones(shape)), "ranks differ")
    good_allreduce_after("a rank mismatch")


@check
def allreduce_dtype_mismatch():
    dtype = tf.int32 if hvd.rank() % 2 == 0 else tf.float32
    expect_raises(tf.errors.FailedPreconditionError, lambda: hvd.allreduce(tf.ones([4, 4], dtype)), "dtypes differ",
                  "int32[4, 4]")
    good_allreduce_after("a dtype mismatch")


@check
def allreduce_gradient():
    n = hvd.size()
    for dtype, dim, op in itertools.product([tf.float32, tf.float64], DIMS, [hvd.Sum, hvd.Average]):
        variable = tf.Variable(tf.cast(rank_values(tf.float32, dim, hvd.rank()), dtype))
        with tf.GradientTape() as tape:
            reduced = hvd.allreduce(variable, op=op)
        grad = tape.gradient(reduced, variable, tf.ones([SIDE] * dim, dtype))
        want = np.full([SIDE] * dim, n if op == hvd.Sum else 1, dtype.as_numpy_dtype)
        expect_equal(grad.numpy(), want, f"{dtype.name} {dim}-d op {op}")


def grouped(op, reference, dtypes=REDUCIBLE):
    for dtype, dim in itertools.product(dtypes, DIMS):
        inputs = [every_rank(dtype, dim, salt) for salt in range(5)]
        got = hvd.grouped_allreduce([tf.constant(i[hvd.rank()]) for i in inputs], op=op)
        for k, (value, xs) in enumerate(zip(got, inputs, strict=True)):
            expect_equal(value.numpy(), reference(xs, dtype), f"{dtype.name} {dim}-d tensor {k}")


@check
def grouped_allreduce_sum():
    grouped(hvd.Sum, lambda xs, dtype: total(xs))


@check
def grouped_allreduce_average():
    grouped(hvd.Average, lambda xs, dtype: (total(xs) / np.asarray(len(xs), xs[0].dtype)).astype(xs[0].dtype),
            [tf.float16, tf.float32, tf.float64])
    grouped(hvd.Average, lambda xs, dtype: trunc_scale(total([x.astype(np.float64) for x in xs]), 1 / len(xs), dtype),
            [tf.uint8, tf.int8, tf.int32, tf.int64])


@check
def grouped_allreduce_min_max_product():
    grouped(hvd.Min, lambda xs, dtype: np.minimum.reduce(xs))
    grouped(hvd.Max, lambda xs, dtype: np.maximum.reduce(xs))
    grouped(hvd.Product, lambda xs, dtype: np.multiply.reduce(xs).astype(xs[0].dtype))


@check
def grouped_allreduce_sparse_and_mixed():
    n = hvd.size()
    for op, dtype, dim in itertools.product([hvd.Sum, hvd.Average], [tf.float16, tf.float32, tf.float64], DIMS):
        slices = [sparse_inputs(dtype, dim, hvd.rank()) for _ in range(3)]
        dense = every_rank(dtype, dim, salt=3)
        group = [tf.IndexedSlices(tf.constant(v), tf.constant(i)) for v, i in slices] + [tf.constant(dense[hvd.rank()])]
        got = hvd.grouped_allreduce(group, op=op)
        every = [sparse_inputs(dtype, dim, k) for k in range(n)]
        values = np.concatenate([v for v, _ in every])
        divide = op == hvd.Average
        for k in range(3):
            assert isinstance(got[k], tf.IndexedSlices), type(got[k])
            want = (values / np.asarray(n, values.dtype)).astype(values.dtype) if divide else values
            expect_equal(got[k].values.numpy(), want, f"slices {k} {dtype.name} {dim}-d op {op}")
        want = (total(dense) / np.asarray(n, dense[0].dtype)).astype(dense[0].dtype) if divide else total(dense)
        expect_equal(got[3].numpy(), want, f"the dense tensor {dtype.name} {dim}-d op {op}")


@check
def grouped_allreduce_sparse_refusals():
    for mixed, op in itertools.product([False, True], [hvd.Min, hvd.Max, hvd.Product, hvd.Adasum]):
        group = [a_slice() for _ in range(3)] + ([tf.ones([3])] if mixed else [])
        expect_raises(NotImplementedError, lambda g=group, op=op: hvd.grouped_allreduce(g, op=op),
                      f"op {op} mixed={mixed}")


@check
def grouped_allreduce_gradient():
    n = hvd.size()
    for dtype, dim in itertools.product([tf.float32, tf.float64], DIMS):
        variables = [tf.Variable(tf.cast(rank_values(tf.float32, dim, hvd.rank(), salt), dtype)) for salt in range(5)]
        with tf.GradientTape(persistent=True) as tape:
            summed = hvd.grouped_allreduce(variables, op=hvd.Sum)
        for k, (s, v) in enumerate(zip(summed, variables, strict=True)):
            grad = tape.gradient(s, v, tf.ones([SIDE] * dim, dtype))
            expect_equal(grad.numpy(), np.full([SIDE] * dim, n, dtype.as_numpy_dtype), f"{dtype.name} {dim}-d #{k}")


# --------------------------------------------------------------------------- allgather


def filled(dtype, shape, value):
    return tf.cast(tf.fill(shape, float(value % 2 if dtype == tf.bool else value)), dtype)


def gathered_ok(got, dtype, lengths, dim, what):
    want = np.concatenate([filled(dtype, [length] + [SIDE] * (dim - 1), k).numpy() for k, length in enumerate(lengths)])
    expect_equal(got, want, what)


@check
def allgather_every_dtype():
    for dtype, dim in itertools.product(CARRIED, DIMS):
        got = hvd.allgather(filled(dtype, [SIDE] * dim, hvd.rank()))
        gathered_ok(got.numpy(), dtype, [SIDE] * hvd.size(), dim, f"{dtype.name} {dim}-d")


def ragged(k):
    return [3, 5, 2, 4][k % 4]


@check
def allgather_ragged():
    for dtype, dim in itertools.product(CARRIED, DIMS):
        got = hvd.allgather(filled(dtype, [ragged(hvd.rank())] + [SIDE] * (dim - 1), hvd.rank()))
        gathered_ok(got.numpy(), dtype, [ragged(k) for k in range(hvd.size())], dim, f"{dtype.name} {dim}-d")


@check
def allgather_in_one_function():
    cases = [(dtype, dim, dim == 3) for dtype in CARRIED for dim in (1, 3)]  # 20 gathers in one graph

    @tf.function
    def all_at_once(tensors):
        return [hvd.allgather(t) for t in tensors]

    tensors = [filled(d, [ragged(hvd.rank()) if uneven else SIDE] + [SIDE] * (dim - 1), hvd.rank())
               for d, dim, uneven in cases]
    for (dtype, dim, uneven), got in zip(cases, all_at_once(tensors), strict=True):
        lengths = [ragged(k) if uneven else SIDE for k in range(hvd.size())]
        gathered_ok(got.numpy(), dtype, lengths, dim, f"{dtype.name} {dim}-d uneven={uneven} in a tf.function")


def good_allgather_after(what):
    got = hvd.allgather(tf.fill([hvd.rank() + 1, 2], float(hvd.rank())))
    want = np.concatenate([np.full([k + 1, 2], float(k), np.float32) for k in range(hvd.size())])
    expect_equal(got.numpy(), want, f"the allgather after {what}")


@check
def allgather_shape_mismatch():
    shape = [SIDE, 10 * (hvd.rank() + 1), SIDE]
    expect_raises(tf.errors.FailedPreconditionError, lambda: hvd.allgather(tf.ones(shape)), "dims differ")
    good_allgather_after("a dimension mismatch")


@check
def allgather_dtype_mismatch():
    dtype = tf.int32 if hvd.rank() % 2 == 0 else tf.float32
    expect_raises(tf.errors.FailedPreconditionError, lambda: hvd.allgather(tf.ones([3, 3], dtype)), "dtypes differ")
    good_allgather_after("a dtype mismatch")


def gradient_of_gather(gather_many):
    n, r = hvd.size(), hvd.rank()
    for dtype, dim in itertools.product([tf.float32, tf.float64], DIMS):
        lengths = [[3, 2, 7, 4][k % 4] for k in range(n)]
        variables = [tf.Variable(tf.cast(tf.ones([lengths[r]] + [SIDE] * (dim - 1)) * r, dtype)) for _ in range(2)]
        with tf.GradientTape(persistent=True) as tape:
            gathered = gather_many(variables)
        upstream = tf.concat([tf.cast(tf.ones([length] + [SIDE] * (dim - 1)) * k, dtype)
                              for k, length in enumerate(lengths)], 0)
        for g, v in zip(gathered, variables, strict=True):
            grad = tape.gradient(g, v, upstream)
            expect_equal(grad.numpy(), np.full([lengths[r]] + [SIDE] * (dim - 1), r, dtype.as_numpy_dtype),
                         f"{dtype.name} {dim}-d")


@check
def allgather_gradient():
    gradient_of_gather(lambda vs: [hvd.allgather(v) for v in vs])


@check
def grouped_allgather_every_dtype():
    for dtype, dim in itertools.product(CARRIED, DIMS):
        group = [filled(dtype, [ragged(hvd.rank())] + [SIDE] * (dim - 1), hvd.rank()) for _ in range(3)]
        for k, got in enumerate(hvd.grouped_allgather(group)):
            gathered_ok(got.numpy(), dtype, [ragged(j) for j in range(hvd.size())], dim, f"{dtype.name} {dim}-d #{k}")


@check
def grouped_allgather_gradient():
    gradient_of_gather(hvd.grouped_allgather)


# --------------------------------------------------------------------------- broadcast


@check
def broadcast_every_dtype_and_root():
    for dtype, dim, root in itertools.product(CARRIED, DIMS, range(hvd.size())):
        got = hvd.broadcast(filled(dtype, [SIDE] * dim, hvd.rank()), root)
        expect_equal(got.numpy(), filled(dtype, [SIDE] * dim, root).numpy(), f"{dtype.name} {dim}-d root {root}")


@check
def broadcast_in_place():
    for dtype, dim, root in itertools.product(CARRIED, DIMS, range(hvd.size())):
        variable = tf.Variable(filled(dtype, [SIDE] * dim, hvd.rank()))
        (value,) = hvd.broadcast_([variable], root)
        assert value.dtype == dtype and variable.dtype == dtype, (value.dtype, variable.dtype)
        expect_equal(variable.numpy(), filled(dtype, [SIDE] * dim, root).numpy(), f"{dtype.name} {dim}-d root {root}")
        expect_equal(value.numpy(), variable.numpy(), "the returned value is the variable's")
    for root in range(hvd.size()):  # several variables, several shapes, at once
        variables = [tf.Variable(tf.ones([SIDE] * dim) * hvd.rank(), name=f"v{dim}") for dim in DIMS]
        values = hvd.broadcast_(variables, root)
        for v, value, dim in zip(variables, values, DIMS, strict=True):
            expect_equal(v.numpy(), np.full([SIDE] * dim, root, np.float32), f"variable {dim}-d root {root}")
            expect_equal(value.numpy(), v.numpy(), "the returned values are the variables'")


def good_broadcast_after(what):
    expect_equal(hvd.broadcast(tf.constant([float(hvd.rank())] * 2), 0).numpy(), np.zeros(2, np.float32),
                 f"the broadcast after {what}")


@check
def broadcast_shape_mismatch():
    shape = [SIDE, 10 * (hvd.rank() + 1), SIDE]
    expect_raises(tf.errors.FailedPreconditionError, lambda: hvd.broadcast(tf.ones(shape), 0), "dims differ")
    good_broadcast_after("a dimension mismatch")


@check
def broadcast_dtype_mismatch():
    dtype = tf.int32 if hvd.rank() % 2 == 0 else tf.float32
    expect_raises(tf.errors.FailedPreconditionError, lambda: hvd.broadcast(tf.ones([3], dtype), 0), "dtypes differ")
    good_broadcast_after("a dtype mismatch")


@check
def broadcast_root_mismatch():
    expect_raises(tf.errors.FailedPreconditionError, lambda: hvd.broadcast(tf.ones([3]), hvd.rank()), "roots differ",
                  "root_rank")
    good_broadcast_after("a root mismatch")


@check
def broadcast_gradient():
    for dtype, dim, root in itertools.product([tf.float32, tf.float64], DIMS, range(hvd.size())):
        variable = tf.Variable(tf.cast(tf.ones([5] * dim) * hvd.rank(), dtype))
        with tf.GradientTape() as tape:
            got = hvd.broadcast(variable, root)
        grad = tape.gradient(got, variable)
        want = np.full([5] * dim, 1 if hvd.rank() == root else 0, dtype.as_numpy_dtype)
        expect_equal(grad.numpy(), want, f"{dtype.name} {dim}-d root {root}")


@check
def broadcast_global_variables_refused():
    expect_raises(RuntimeError, lambda: hvd.broadcast_global_variables(root_rank=0), "in eager mode")


# --------------------------------------------------------------------------- the rest of test_tensorflow.py


@check
def fp16_compression():
    compression = hvd.Compression.fp16
    for dtype in [tf.float16, tf.float32, tf.float64]:
        compressed, ctx = compression.compress(tf.ones([SIDE] * 3, dtype))
        assert compressed.dtype == tf.float16, compressed.dtype
        back = compression.decompress(compressed, ctx)
        expect_equal(back.numpy(), np.ones([SIDE] * 3, dtype.as_numpy_dtype), dtype.name)
    for dtype in [tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.bool]:
        compressed, ctx = compression.compress(tf.ones([SIDE] * 3, dtype))
        assert compressed.dtype == dtype, (dtype, compressed.dtype)
        expect_equal(compression.decompress(compressed, ctx).numpy(), np.ones([SIDE] * 3, dtype.as_numpy_dtype),
                     dtype.name)


@check
def broadcast_object():
    sent = {"hello": 123, 0: [1, 2], "from": hvd.rank()}
    got = hvd.broadcast_object(sent if hvd.rank() == 0 else {}, root_rank=0)
    assert got == {"hello": 123, 0: [1, 2], "from": 0}, got
    lock = threading.Lock()  # cloudpickle cannot serialize one either: every rank hears of it
    err = expect_raises(Exception, lambda: hvd.broadcast_object(lock if hvd.rank() == 1 else None, root_rank=1),
                        "an object the root cannot serialize", "rank 1: TypeError")
    assert type(err).__name__ == "PicklingError", type(err)
    assert hvd.broadcast_object(f"after {hvd.rank()}", root_rank=1) == "after 1"


@check
def allgather_object():
    mine = {"metric_val_1": hvd.rank()}
    if hvd.rank() == 1:
        mine["metric_val_2"] = 42
    got = hvd.allgather_object(mine)
    want = [{"metric_val_1": k} for k in range(hvd.size())]
    want[1]["metric_val_2"] = 42
    assert got == want, got


@check
def partial_tape_keeps_local_gradients():
    keras = tf.keras
    n = hvd.size()
    x = np.full((1, 3), 0.5 + hvd.rank(), np.float32)
    y = np.full((1, 3, 3), 0.25, np.float32)
    for local_count in range(3):
        init = keras.initializers.Constant(hvd.rank() + 1.0)
        model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,), kernel_initializer=init,
                                                     bias_initializer=init),
                                  keras.layers.RepeatVector(3),
                                  keras.layers.TimeDistributed(keras.layers.Dense(3, kernel_initializer=init,
                                                                                  bias_initializer=init))])
        with tf.GradientTape(persistent=True) as tape:
            loss = tf.reduce_mean(keras.losses.mean_squared_error(y, model(x, training=True)))
        own = [g.numpy() for g in tape.gradient(loss, model.trainable_weights)]
        everyone = hvd.allgather_object(own)
        local_layers = model.layers[:local_count]
        local = {id(v) for layer in local_layers for v in layer.trainable_weights}
        partial = hvd.PartialDistributedGradientTape(tape, local_layers=local_layers)
        grads = partial.gradient(loss, model.trainable_weights)
        for k, (v, g) in enumerate(zip(model.trainable_weights, grads, strict=True)):
            if id(v) in local:  # kept on this rank, divided by size (Horovod's scale_local_gradients)
                np.testing.assert_allclose(g.numpy(), own[k] / n, rtol=1e-6, err_msg=f"local {v.name}")
            else:
                np.testing.assert_allclose(g.numpy(), sum(e[k] for e in everyone) / n, rtol=1e-6,
                                           err_msg=f"shared {v.name}")
        local_pairs, shared_pairs = partial.get_local_and_global_gradients(loss, model.trainable_weights)
        assert [id(v) for v, _ in local_pairs] == [id(v) for v in model.trainable_weights if id(v) in local]
        assert len(local_pairs) + len(shared_pairs) == len(model.trainable_weights)


# --------------------------------------------------------------------------- test_tensorflow2_keras.py


@check
def fit_with_learning_rate_schedule():
    keras = tf.keras
    initial = 0.1 * hvd.size()
    steps = 3
    seen = {}

    class Record(keras.callbacks.Callback):
        def on_batch_begin(self, batch, logs=None):
            seen[(self.epoch, batch)] = float(keras.backend.get_value(self.model.optimizer.learning_rate))

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

    keras.utils.set_random_seed(hvd.rank())  # different weights on each rank, made one by the broadcast
    model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,)), keras.layers.RepeatVector(3),
                              keras.layers.ThresholdedReLU(0.5)])
    model.compile(loss="mse", optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.Adam()),
                  experimental_run_tf_function=False)
    rng = np.random.default_rng(hvd.rank())
    callbacks = [
        hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd_keras.callbacks.MetricAverageCallback(),
        hvd_keras.callbacks.LearningRateWarmupCallback(initial_lr=initial, warmup_epochs=2),
        hvd_keras.callbacks.LearningRateScheduleCallback(initial_lr=initial, multiplier=1e-1, start_epoch=2,
                                                         end_epoch=4),
        hvd_keras.callbacks.LearningRateScheduleCallback(initial_lr=initial, multiplier=1e-2, start_epoch=4,
                                                         end_epoch=6),
        hvd_keras.callbacks.LearningRateScheduleCallback(initial_lr=initial, multiplier=lambda epoch: epoch,
                                                         start_epoch=6, end_epoch=8),
        Record(),
    ]
    history = model.fit(rng.random((12, 3)), rng.random((12, 3, 2)), batch_size=4, steps_per_epoch=steps,
                        epochs=8, callbacks=callbacks, verbose=0)
    n = hvd.size()
    for (epoch, batch), lr in sorted(seen.items()):
        if epoch < 2:  # Horovod's warm-up: from initial/size, reaching initial after the last warm-up batch
            e = epoch + batch / steps + 1 / steps
            want = initial / n * (e * (n - 1) / 2 + 1)
        else:
            want = initial * (0.1 if epoch < 4 else 0.01 if epoch < 6 else epoch)
        assert abs(lr - want) <= 1e-6 * max(1.0, want), (epoch, batch, lr, want)
    assert abs(history.history["lr"][-1] - initial * 7) < 1e-6, history.history["lr"]  # logged at each epoch end
    losses = hvd.allgather_object(history.history["loss"])
    assert all(ls == losses[0] for ls in losses), losses  # MetricAverageCallback: one loss on every rank


def same_on_every_rank(model, what):
    weights = hvd.allgather_object([w.tolist() for w in model.get_weights()])
    assert all(w == weights[0] for w in weights), f"{what}: the ranks' weights differ"


@check
def sparse_as_dense_step():
    keras = tf.keras
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.layers.Embedding(100, 8, input_length=10)])
    model.compile(loss="mse", optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.RMSprop(1e-3),
                                                                        sparse_as_dense=True))
    rng = np.random.default_rng(hvd.rank())
    model.train_on_batch(rng.integers(100, size=(4, 10)), rng.random((4, 10, 8)))
    same_on_every_rank(model, "Embedding with sparse_as_dense")


@check
def legacy_optimizer_step():
    keras = tf.keras
    keras.utils.set_random_seed(8)
    model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,)), keras.layers.RepeatVector(3)])
    model.compile(loss="mse", optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.legacy.Adam(1e-3)))
    rng = np.random.default_rng(hvd.rank())
    model.train_on_batch(rng.random((4, 3)), rng.random((4, 3, 2)))
    same_on_every_rank(model, "a legacy optimizer")


@check
def optimizer_from_config():
    wrapped = hvd_keras.DistributedOptimizer(tf.keras.optimizers.Adam(0.25))
    config = wrapped.get_config()
    for copy in (wrapped.from_config(config), type(wrapped).from_config(config)):
        assert copy.get_config() == config, copy.get_config()
        assert type(copy) is type(wrapped), type(copy)  # still the distributed class


@check
def broadcast_callback_keeps_local_variables():
    keras = tf.keras
    root = hvd.size() - 1
    init = keras.initializers.Constant(float(hvd.rank()))
    model = keras.Sequential([keras.layers.Dense(3, input_shape=(3,), kernel_initializer=init, bias_initializer=init,
                                                 trainable=False)]
                             + [keras.layers.Dense(3, kernel_initializer=init, bias_initializer=init, trainable=False)
                                for _ in range(2)])
    model.compile(loss="mse")
    local = list(model.layers[0].variables)
    callback = hvd_keras.callbacks.BroadcastGlobalVariablesCallback(root_rank=root, local_variables=local)
    model.fit(np.ones((1, 3)), np.ones((1, 3)), callbacks=[callback], verbose=0)
    local_ids = {id(v) for v in local}
    for v in model.variables:
        want = float(hvd.rank()) if id(v) in local_ids else float(root)
        expect_equal(v.numpy(), np.full(v.shape, want, np.float32), v.name)


# --------------------------------------------------------------------------- memory, timeouts, the run


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def peak_above_now(fn):
    """Bytes the process's peak RSS rose above its RSS before fn (the kernel's high-water mark, reset first)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status("VmRSS")
    result = fn()
    return max(0, _status("VmHWM") - before), result


def memory(size_mb=64):
    """What a size_mb MB object (incompressible bytes) costs to broadcast and to allgather, on this rank."""
    payload = os.urandom(size_mb << 20) if hvd.rank() == 0 else None
    grew, got = peak_above_now(lambda: hvd.broadcast_object(payload, root_rank=0))
    assert len(got) == size_mb << 20 and (hvd.rank() != 0 or got is payload)
    del got
    own = os.urandom(size_mb << 20)
    grew_gather, everything = peak_above_now(lambda: hvd.allgather_object(own))
    assert [len(x) for x in everything] == [size_mb << 20] * hvd.size() and everything[hvd.rank()] == own
    return {"object_bytes": size_mb << 20, "broadcast_peak_bytes": grew, "allgather_peak_bytes": grew_gather}


def timeouts(out_dir):
    """A peer alive but never joining: the waiting rank's collective ends after VTRAIN_COLLECTIVE_TIMEOUT."""
    hvd.shutdown()
    os.environ["VTRAIN_COLLECTIVE_TIMEOUT"] = "3"
    hvd.init()  # shutdown, then init, reads the timeout again (as Horovod reads its environment)
    hvd.allreduce(tf.constant([1.0]))
    if hvd.rank() == 1:
        time.sleep(10)  # alive, not joining
    start = time.monotonic()
    try:
        hvd.allreduce(tf.constant([1.0]))
        outcome = "returned"
    except Exception as err:  # noqa: BLE001 - recorded for the test
        outcome = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
    return {"timeout": 3.0, "waited": time.monotonic() - start, "outcome": outcome}


def run_checks():
    results = {}
    for name, fn in CHECKS.items():
        start = time.monotonic()
        try:
            fn()
            results[name] = {"ok": True, "error": "", "seconds": time.monotonic() - start}
        except Exception as err:  # noqa: BLE001 - every check's outcome is recorded, none stops the others
            results[name] = {"ok": False, "error": f"{type(err).__name__}: {err}\n{traceback.format_exc()[-2000:]}",
                             "seconds": time.monotonic() - start}
    return results


def main():
    hvd.init()
    out_dir = os.environ["AIP_MODEL_DIR"]
    os.makedirs(out_dir, exist_ok=True)
    report = {"rank": hvd.rank(), "checks": run_checks(), "probes": probes.run(hvd, tf, hvd.rank())}
    report["memory"] = memory()
    report["timeouts"] = timeouts(out_dir)
    path = os.path.join(out_dir, f"conformance-rank{hvd.rank()}.json")
    with open(path + ".partial", "w") as f:
        json.dump(report, f, indent=1)
    os.replace(path + ".partial", path)
    if hvd.rank() == 0:  # the chief's exit ends the job: wait for the others' reports
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(
                os.path.exists(os.path.join(out_dir, f"conformance-rank{k}.json")) for k in range(hvd.size())):
            time.sleep(0.2)
