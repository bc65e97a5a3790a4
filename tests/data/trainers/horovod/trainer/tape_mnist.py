"""A Horovod TF2 script in the shape of Horovod's tensorflow2_mnist example: a tf.function step with
hvd.DistributedGradientTape and hvd.broadcast_variables after the first step. Synthetic data instead of
MNIST, no dropout and a fixed seed, so that a MultiWorkerMirrored run of the same model can be compared."""
# ruff: noqa: I001, B905, UP031  (written as Horovod's examples are)

import tensorflow as tf

import horovod.tensorflow as hvd

from trainer.data import images_and_labels

LOSSES = []


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
        tf.keras.layers.Conv2D(8, [3, 3], activation='relu'),
        tf.keras.layers.Conv2D(16, [3, 3], activation='relu'),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation='relu'),
        tf.keras.layers.Dense(10, activation='softmax'),
    ])
    loss = tf.losses.SparseCategoricalCrossentropy()

    # Horovod: scale the learning rate by the number of workers.
    opt = tf.optimizers.Adam(0.002 * hvd.size())

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            probs = model(images, training=True)
            loss_value = loss(labels, probs)

        # Horovod: reduce the gradients over the ranks.
        tape = hvd.DistributedGradientTape(tape)

        grads = tape.gradient(loss_value, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))

        # Horovod: after the first step (the optimizer has its slots then), take rank 0's variables.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables(), root_rank=0)

        return loss_value

    # Horovod: split the steps over the workers.
    for batch, (images, labels) in enumerate(dataset.take(40 // hvd.size())):
        loss_value = training_step(images, labels, batch == 0)
        LOSSES.append(float(loss_value))
        if batch % 10 == 0 and hvd.local_rank() == 0:
            print('Step #%d\tLoss: %.6f' % (batch, loss_value))

    return model


if __name__ == '__main__':
    train()
