"""A linear regressor trained by tf.estimator.train_and_evaluate across chief, worker, ps and evaluator.

Every replica says which TensorFlow and Python it runs and which task TF_CONFIG gives it; the checkpoints
go to AIP_CHECKPOINT_DIR (shared by the cluster), the export to AIP_MODEL_DIR (the chief's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import tensorflow as tf


def input_fn(batch: int):  # type: ignore[no-untyped-def]
    """y = 3x + 1 with a little noise, repeated."""
    def make():  # type: ignore[no-untyped-def]
        x = tf.random.uniform([256, 1], seed=1)
        y = 3.0 * x + 1.0 + tf.random.normal([256, 1], stddev=0.01, seed=2)
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(batch)
    return make


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    print(f"estimator replica {task.get('type')}-{task.get('index')}: TensorFlow {tf.__version__}, "
          f"Python {sys.version_info.major}.{sys.version_info.minor}", flush=True)
    model_dir = os.environ["AIP_CHECKPOINT_DIR"]
    config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=10, log_step_count_steps=10)
    estimator = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], config=config)
    train = tf.estimator.TrainSpec(input_fn(16), max_steps=args.steps)
    evaluate = tf.estimator.EvalSpec(input_fn(16), steps=2, start_delay_secs=0, throttle_secs=1)
    result = tf.estimator.train_and_evaluate(estimator, train, evaluate)
    if task.get("type") == "chief":
        print(f"chief finished: {result[0] if result else None}", flush=True)


if __name__ == "__main__":
    main()
