"""A Horovod TF2 Keras script in the shape of Horovod's tensorflow2_keras_mnist example: model.fit with
hvd.DistributedOptimizer and the three hvd.callbacks. Synthetic data instead of the MNIST download, no
dropout and a fixed seed, so that a MultiWorkerMirrored run of the same model can be compared with it."""
# ruff: noqa: I001  (written as Horovod's examples are)

import sys

import tensorflow as tf

import horovod.tensorflow.keras as hvd

from trainer.data import images_and_labels


def train():
    # Horovod: initialize Horovod.
    hvd.init()

    # Horovod: one GPU per process, chosen by local rank.
    gpus = tf.config.experimental.list_physical_devices('GPU')
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], 'GPU')

    tf.keras.utils.set_random_seed(42)
    images, labels = images_and_labels()
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.cast(images[..., tf.newaxis], tf.float32), tf.cast(labels, tf.int64)))
    dataset = dataset.shard(hvd.size(), hvd.rank()).repeat().batch(16)

    model = tf.keras.Sequential([
        tf.keras.Input(shape=(12, 12, 1)),
        tf.keras.layers.Conv2D(8, [3, 3], activation='relu'),
        tf.keras.layers.Conv2D(16, [3, 3], activation='relu'),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation='relu'),
        tf.keras.layers.Dense(10, activation='softmax'),
    ])

    # Horovod: scale the learning rate by the number of workers.
    scaled_lr = 0.002 * hvd.size()
    opt = tf.optimizers.Adam(scaled_lr)

    # Horovod: wrap the optimizer.
    opt = hvd.DistributedOptimizer(opt, backward_passes_per_step=1, average_aggregated_gradients=True)

    model.compile(loss=tf.losses.SparseCategoricalCrossentropy(), optimizer=opt, metrics=['accuracy'],
                  experimental_run_tf_function=False)

    callbacks = [
        # Horovod: start all ranks from rank 0's variables.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # Horovod: average the metrics over the ranks at each epoch's end.
        hvd.callbacks.MetricAverageCallback(),
        # Horovod: warm the scaled learning rate up over the first epochs.
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=2, verbose=1),
    ]

    # Horovod: write logs on rank 0 only.
    verbose = 2 if hvd.rank() == 0 else 0

    # Horovod: split the steps over the workers.
    model.fit(dataset, steps_per_epoch=16 // hvd.size(), callbacks=callbacks, epochs=3, verbose=verbose)
    return model


if __name__ == '__main__':
    train()
    sys.exit(0)
