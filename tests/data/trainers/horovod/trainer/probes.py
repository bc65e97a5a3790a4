"""Calls whose outcome must not depend on the number of replicas (issue 46, class 9): each is made with inputs
whose result is the same for a ring of one and a ring of two, so a one-replica run (tests/horovod/test_api.py) and
every rank of a two-replica run must say the same thing, value or error, word for word."""

import threading

PROBES = {
    "complex allreduce": lambda hvd, tf, r: hvd.allreduce(tf.constant([1 + 2j], tf.complex64)),
    "string allreduce": lambda hvd, tf, r: hvd.allreduce(tf.constant(["a"])),
    "bool allreduce": lambda hvd, tf, r: hvd.allreduce(tf.constant([True]), op=hvd.Max),
    "scalar allgather": lambda hvd, tf, r: hvd.allgather(tf.constant(1.0)),
    "complex broadcast": lambda hvd, tf, r: hvd.broadcast(tf.constant([1j], tf.complex64), 0),
    "fp16 compression": lambda hvd, tf, r: hvd.allreduce(tf.constant([1.0001, 3.14159]),
                                                         compression=hvd.Compression.fp16),
    "uint64 Max(2**63+5, 1)": lambda hvd, tf, r: hvd.allreduce(tf.constant([2**63 + 5 if r == 0 else 1], tf.uint64),
                                                               op=hvd.Max),
    "uint64 Min": lambda hvd, tf, r: hvd.allreduce(tf.constant([2**63 + 5 if r == 0 else 2**63 + 9], tf.uint64),
                                                   op=hvd.Min),
    "uint64 Sum": lambda hvd, tf, r: hvd.allreduce(tf.constant([2**63 + 5 if r == 0 else 0], tf.uint64), op=hvd.Sum),
    "uint32 Max": lambda hvd, tf, r: hvd.allreduce(tf.constant([2**32 - 1 if r == 0 else 1], tf.uint32), op=hvd.Max),
    "int prescale 0.19": lambda hvd, tf, r: hvd.allreduce(tf.constant([10, 20] if r == 0 else [0, 0]), op=hvd.Sum,
                                                          prescale_factor=0.19),
    "int Average": lambda hvd, tf, r: hvd.allreduce(tf.constant([7, -7])),
    "op and average": lambda hvd, tf, r: hvd.allreduce(tf.constant([1.0]), op=hvd.Sum, average=True),
    "Adasum": lambda hvd, tf, r: hvd.allreduce(tf.constant([1.0]), op=hvd.Adasum),
    "sparse Max": lambda hvd, tf, r: hvd.allreduce(tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0])), op=hvd.Max),
    "lambda broadcast_object": lambda hvd, tf, r: hvd.broadcast_object(
        (lambda x: x + 1) if r == 0 else None, root_rank=0)(41),
    "lock broadcast_object": lambda hvd, tf, r: hvd.broadcast_object(threading.Lock() if r == 0 else None, 0),
    "lock allgather_object": lambda hvd, tf, r: hvd.allgather_object(threading.Lock() if r == 0 else 1)[0],
    "allgather_object copies": lambda hvd, tf, r: hvd.allgather_object([r * 0, "x"])[0],
}


def outcome(value):
    """A value or an error as text that compares across processes."""
    if hasattr(value, "numpy"):
        array = value.numpy()
        return f"{array.dtype} {array.tolist()}"
    return repr(value)


def run(hvd, tf, r):
    results = {}
    for name, probe in PROBES.items():
        try:
            results[name] = outcome(probe(hvd, tf, r))
        except Exception as err:  # noqa: BLE001 - the error itself is the outcome
            results[name] = f"{type(err).__name__}: {err}"
    return results
