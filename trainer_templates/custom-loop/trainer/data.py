"""Input pipeline: CSV files (local or gs://) or a built-in generator, sharded across workers.

Each CSV line is `f1,...,fN,label`. Without --train-data the trainer makes a
deterministic synthetic regression problem, so it runs offline and in tests.
"""

from __future__ import annotations

import tensorflow as tf


def synthetic(num_examples: int, num_features: int, seed: int) -> tf.data.Dataset:
    """y = x . w + b + noise, with fixed w and b: a model can learn it in a few steps."""
    gen = tf.random.Generator.from_seed(seed)
    x = gen.normal((num_examples, num_features))
    w = tf.linspace(-1.0, 1.0, num_features)[:, None]
    y = x @ w + 0.5 + 0.1 * gen.normal((num_examples, 1))
    return tf.data.Dataset.from_tensor_slices((x, y))


def from_files(pattern: str, num_features: int) -> tf.data.Dataset:
    """Read every CSV file matching `pattern`; tf.io.gfile makes gs:// work like a local path."""
    files = tf.data.Dataset.list_files(pattern, shuffle=False)
    lines = files.interleave(tf.data.TextLineDataset, cycle_length=tf.data.AUTOTUNE)
    defaults = [[0.0]] * (num_features + 1)

    def parse(line: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        columns = tf.io.decode_csv(line, defaults)
        return tf.stack(columns[:-1]), tf.stack(columns[-1:])

    return lines.map(parse, num_parallel_calls=tf.data.AUTOTUNE)


def make_dataset(
    pattern: str | None, num_features: int, global_batch: int, seed: int, num_examples: int = 4096,
    shard: tuple[int, int] = (1, 0),
) -> tf.data.Dataset:
    """An endless, batched dataset; the strategy splits each global batch across replicas.

    Sharding across workers: files are split by file when there are enough of them
    (AUTO), in-memory data by element (DATA), so no two workers see the same example.
    DiLoCo learners train alone (no strategy splits their input): `shard` = (learners,
    this learner) gives each its own slice.
    """
    options = tf.data.Options()
    if pattern:
        ds = from_files(pattern, num_features)
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.AUTO
    else:
        ds = synthetic(num_examples, num_features, seed)
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    if shard[0] > 1:
        ds = ds.shard(*shard)
    ds = ds.shuffle(1024, seed=seed).repeat()
    # Static batch shapes (drop_remainder) are required on TPUs and harmless elsewhere.
    return ds.batch(global_batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE).with_options(options)
