"""The examples' model, data and schedule under MultiWorkerMirroredStrategy, written without vtrain.horovod:
the reference the Horovod runs must match. Rank r here is the worker whose input pipeline id is r."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainer.data import images_and_labels
from vtrain import runtime


def _model(keras: Any) -> Any:
    return keras.Sequential([
        keras.Input(shape=(12, 12, 1)),
        keras.layers.Conv2D(8, [3, 3], activation="relu"),
        keras.layers.Conv2D(16, [3, 3], activation="relu"),
        keras.layers.MaxPooling2D(pool_size=(2, 2)),
        keras.layers.Flatten(),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])


def train(style: str) -> tuple[Any, list[float], int]:
    strategy = runtime.strategy()
    keras = runtime.keras()
    n = strategy.num_replicas_in_sync
    info = runtime.info()
    rank = 0 if info.task_type == "chief" else info.task_index + 1
    keras.utils.set_random_seed(42)
    images, labels = images_and_labels()

    def shard(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices((tf.cast(images[..., tf.newaxis], tf.float32),
                                                 tf.cast(labels, tf.int64)))
        return ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).repeat().batch(16)

    dataset = strategy.distribute_datasets_from_function(shard)
    with strategy.scope():
        model = _model(keras)
        lr = 0.002 * n
        opt = keras.optimizers.Adam(lr)
    if style == "keras":
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(), optimizer=opt, metrics=["accuracy"])
        steps, warmup = 16 // n, 2

        def warm(epoch: int, batch: int) -> None:  # Goyal et al.: lr/n, rising to lr at the last warm-up batch
            if epoch < warmup:
                done = epoch + (batch + 1) / steps
                model.optimizer.learning_rate.assign(lr / n * (done * (n - 1) / warmup + 1))

        state = {"epoch": 0}
        callbacks = [keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: state.update(epoch=epoch),
            on_batch_begin=lambda batch, logs: warm(state["epoch"], batch))]
        history = model.fit(dataset, steps_per_epoch=steps, epochs=3, callbacks=callbacks, verbose=0)
        return model, history.history["loss"], rank
    loss = keras.losses.SparseCategoricalCrossentropy(reduction="none")

    @tf.function
    def step(batch: Any) -> Any:
        def one(images: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                local = tf.reduce_sum(loss(labels, model(images, training=True))) / (16 * n)
            grads = tape.gradient(local, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return local

        return strategy.reduce("SUM", strategy.run(one, args=batch), axis=None)

    losses = []
    iterator = iter(dataset)
    for _ in range(40 // n):
        losses.append(float(step(next(iterator))))
    return model, losses, rank
