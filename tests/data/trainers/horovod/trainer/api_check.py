"""Every collective of the Horovod API with rank-dependent inputs, eager and inside a tf.function; each
rank writes what it got to AIP_MODEL_DIR/api-rank<r>.json for the test to check against the arithmetic."""
# ruff: noqa: I001  (the Horovod import line, as a Horovod script has it)

import json
import os

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd


def keras3_fit(r):
    """Keras 3 (imported as itself; tf.keras is tf_keras here): model.fit with hvd.DistributedOptimizer, which
    MultiWorkerMirrored cannot run. Rank-dependent initial weights, made equal by a broadcast first."""
    import keras

    keras.utils.set_random_seed(r)
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3)])
    hvd.broadcast_variables(model.variables, root_rank=0)
    model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)))
    x = np.full((8, 4), r + 1.0, np.float32)
    model.fit(x, np.zeros((8, 3), np.float32), batch_size=4, epochs=1, verbose=0)
    return {"optimizer": type(model.optimizer).__module__, "weights": [w.tolist() for w in model.get_weights()]}


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    out = {"rank": r, "size": n, "local": [hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size()]}
    x = tf.constant([1.0, 2.0, 3.0]) * (r + 1)
    out["average"] = hvd.allreduce(x).numpy().tolist()
    out["sum"] = hvd.allreduce(x, op=hvd.Sum).numpy().tolist()
    out["max"] = hvd.allreduce(x, op=hvd.Max).numpy().tolist()
    out["fp16"] = hvd.allreduce(x, compression=hvd.Compression.fp16).numpy().tolist()
    out["scaled"] = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5).numpy().tolist()
    out["int_sum"] = hvd.allreduce(tf.constant([r + 1, 10]), op=hvd.Sum).numpy().tolist()
    out["allgather"] = hvd.allgather(tf.fill([r + 1, 2], float(r))).numpy().tolist()  # ragged: 1 row, then 2
    out["broadcast"] = hvd.broadcast(tf.constant([r * 10.0, 1.0]), root_rank=1).numpy().tolist()
    out["broadcast_object"] = hvd.broadcast_object({"from": r, "text": "é"}, root_rank=0)
    out["allgather_object"] = hvd.allgather_object(("rank", r))
    sparse = tf.IndexedSlices(tf.constant([[float(r + 1)] * 2]), tf.constant([r]), tf.constant([n, 2]))
    reduced = hvd.allreduce(sparse, op=hvd.Sum)
    out["sparse"] = tf.convert_to_tensor(reduced).numpy().tolist()
    v = tf.Variable([float(r), float(r)])
    hvd.broadcast_variables([v], root_rank=0)
    out["variable"] = v.numpy().tolist()

    @tf.function
    def in_graph(t):
        return hvd.allreduce(t, op=hvd.Sum), hvd.allgather(t[tf.newaxis])

    total, rows = in_graph(x)
    total2, _ = in_graph(x * 2)  # the traced ops run again with the same instance keys
    out["graph_sum"], out["graph_rows"], out["graph_sum2"] = total.numpy().tolist(), rows.numpy().tolist(), \
        total2.numpy().tolist()
    out["keras3"] = keras3_fit(r)
    try:
        hvd.join()
    except NotImplementedError as err:
        out["join"] = str(err)
    path = os.path.join(os.environ["AIP_MODEL_DIR"], f"api-rank{r}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, default=lambda o: np.asarray(o).tolist())


if __name__ == "__main__":
    main()
