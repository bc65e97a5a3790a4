"""`vtrain.runtime.keras()` under single-host MirroredStrategy over more than one device: tf_keras where it is
installed, because a Keras 3 optimizer applied inside `strategy.run` fails there (keras-team/keras#21069,
tensorflow#72686), found on tf-cpu.2-17's stack (Keras 3.6.0) and on this machine's TensorFlow 2.21 (Keras
3.15); Keras 3's model.fit itself trains there. One real TensorFlow process: MirroredStrategy over two logical
CPU devices (VTRAIN_LOCAL_DEVICES=2), both ways of training with what keras() returned, and the Keras 3 loop
that fails, for the record."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json, tensorflow as tf
from vtrain import runtime
strategy = runtime.strategy()
keras = runtime.keras()

def train(keras, loop):
    data = tf.data.Dataset.from_tensor_slices((tf.random.uniform([64, 4]), tf.random.uniform([64, 1]))).batch(16)
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1)])
        optimizer = keras.optimizers.Adam()
        model.compile(optimizer=optimizer, loss="mse")
    if not loop:
        model.fit(data, epochs=1, verbose=0)
        return "ok"

    @tf.function
    def step(x, y):
        def one(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss
        return strategy.reduce("SUM", strategy.run(one, (x, y)), axis=None)
    try:
        for x, y in strategy.experimental_distribute_dataset(data):
            step(x, y)
    except Exception as err:
        return type(err).__name__
    return "ok"

import keras as keras3
print("RESULT " + json.dumps({"replicas": strategy.num_replicas_in_sync, "chosen": keras.__name__,
                              "fit": train(keras, False), "loop": train(keras, True),
                              "keras3_fit": train(keras3, False), "keras3_loop": train(keras3, True)}))
"""


@pytest.mark.slow
def test_keras_under_mirrored_strategy_is_the_one_that_trains_both_ways() -> None:
    if importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("tf_keras") is None:
        pytest.skip("needs TensorFlow and tf_keras (the development set has both)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "VTRAIN_"))}
    env.update(VTRAIN_DISTRIBUTION_STRATEGY="mirrored", VTRAIN_LOCAL_DEVICES="2", TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stderr[-3000:]
    seen = json.loads(line[len("RESULT "):])
    assert seen["replicas"] == 2
    assert seen["chosen"] == "tf_keras" and seen["fit"] == "ok" and seen["loop"] == "ok"
    assert seen["keras3_fit"] == "ok"  # Keras 3's model.fit trains here...
    assert seen["keras3_loop"] == "InvalidArgumentError"  # ...its optimizer in a custom loop does not
