"""The model: an MLP block split Megatron-style over the mesh's `model` dimension, data parallel over `batch`.

    x [batch, features]  --w1 [features, hidden] column-sharded-->  h [batch, hidden/model]  (relu, local)
    h                    --w2 [hidden, features] row-sharded----->  partial sums, one all-reduce over model
    x + that             --w3 [features, 1] replicated----------->  prediction [batch, 1]

A plain tf.Module of DTensor variables (Keras 3 has no DTensor path on the TensorFlow backend). Every
client draws the same initial values from the seed and keeps only the pieces its devices hold.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from vtrain.runtime import dtensor_layouts as layouts


class TensorParallelMLP(tf.Module):
    def __init__(self, mesh: Any, features: int, hidden: int, seed: int) -> None:
        super().__init__(name="mlp")
        rng = np.random.default_rng(seed)

        def normal(*shape: int) -> np.ndarray:
            return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

        zeros = lambda n: np.zeros((n,), np.float32)  # noqa: E731
        self.w1 = layouts.variable(normal(features, hidden), layouts.column_sharded(mesh), "w1")
        self.b1 = layouts.variable(zeros(hidden), layouts.bias_sharded(mesh), "b1")
        self.w2 = layouts.variable(normal(hidden, features), layouts.row_sharded(mesh), "w2")
        self.b2 = layouts.variable(zeros(features), layouts.replicated(mesh, 1), "b2")
        self.w3 = layouts.variable(normal(features, 1), layouts.replicated(mesh, 2), "w3")
        self.b3 = layouts.variable(zeros(1), layouts.replicated(mesh, 1), "b3")

    def named(self) -> dict[str, Any]:
        """Name -> variable: what the sharded checkpoint saves and the final model holds."""
        return {n: getattr(self, n) for n in ("w1", "b1", "w2", "b2", "w3", "b3")}

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        hidden = tf.nn.relu(tf.matmul(x, self.w1) + self.b1)  # split over model: no communication
        block = tf.matmul(hidden, self.w2) + self.b2  # partial sums over model: DTensor all-reduces them
        return tf.matmul(x + block, self.w3) + self.b3


class Served(tf.Module):
    """The trained weights, gathered, as an ordinary (not DTensor) module: what serving loads."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        super().__init__(name="mlp")
        self.weights = {n: tf.Variable(v, name=n, trainable=False) for n, v in weights.items()}
        features = int(weights["w1"].shape[0])
        self.serve = tf.function(self._serve, input_signature=[tf.TensorSpec([None, features], tf.float32)])

    def _serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
        w = self.weights
        hidden = tf.nn.relu(tf.matmul(x, w["w1"]) + w["b1"])
        return {"prediction": tf.matmul(x + tf.matmul(hidden, w["w2"]) + w["b2"], w["w3"]) + w["b3"]}
