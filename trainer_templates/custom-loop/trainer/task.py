"""Train a small model with a custom loop: strategy.run on a distributed dataset, resumable at any step.

    python -m trainer.task --epochs 3 --train-data 'gs://my-bucket/data/*.csv'

The pattern every tf.distribute strategy shares: build variables under
strategy.scope(), split each global batch with experimental_distribute_dataset,
scale the loss by the *global* batch size (tf.nn.compute_average_loss) so the
all-reduced gradients are an average, and sum the per-replica losses. Keras
layers and optimizers work here even under multi-worker (only model.fit breaks
with Keras 3). The chief keeps checkpoints and the model; every replica writes
weights.json with a checksum of its final weights. Under DiLoCo each learner trains
alone and runtime.diloco() exchanges parameter changes with the syncer every H steps.
In a tuning trial, or a job with an experiment run, the chief reports the mean loss per epoch
(runtime.report_metric): the trial's metric, the run's metric and its series.
Every replica profiles itself (runtime.profile) for `vtrain estimate --from-run`.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from vtrain import runtime

log = logging.getLogger("trainer")


def whole(text: str) -> int:
    """An integer flag that also takes `32.0`: a tuning service may pass a discrete value as a float."""
    number = float(text)
    if not number.is_integer():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text}")
    return int(number)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=whole, default=3)
    p.add_argument("--steps-per-epoch", type=whole, default=50)
    p.add_argument("--batch-size", type=whole, default=32, help="per replica; the global batch scales")
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--train-data", help="CSV file pattern (local or gs://); default: built-in data")
    p.add_argument("--num-features", type=whole, default=8)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--checkpoint-every", type=int, default=100, help="steps between backups")
    p.add_argument(
        "--mixed-precision",
        action="store_true",
        help="16-bit compute where the hardware runs it fast (runtime.mixed_precision); "
        "VTRAIN_MIXED_PRECISION in the job's env overrides it",
    )
    p.add_argument("--metric", default="loss", help="in a tuning trial, report the mean training loss per epoch "
                   "under this name (the job file's tuning.metric.name)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    strategy = runtime.strategy()  # first: multi-worker set-up must precede any other TF work
    if runtime.info().strategy == "parameter_server":
        raise SystemExit("parameter servers need a ClusterCoordinator loop; use the keras template")
    import keras
    import tensorflow as tf

    precision = runtime.mixed_precision("auto" if args.mixed_precision else "float32", keras)

    from trainer import data

    info = runtime.info()
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    log.info(
        "%s/%d of %d worker(s), %s, %d replica(s) in sync, global batch %d, %s, restarts %d",
        info.task_type,
        info.task_index,
        info.num_workers,
        info.strategy,
        strategy.num_replicas_in_sync,
        global_batch,
        precision.policy,
        info.restarts,
    )

    keras.utils.set_random_seed(args.seed)
    diloco = info.strategy == "diloco"  # a standalone learner: its own slice of the data
    shard = runtime.learner_shard() if diloco else (1, 0)
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input(shape=(args.num_features,)),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.Dense(1, dtype="float32"),  # float32 outputs keep the loss stable under mixed precision
            ]
        )
        # Under mixed_float16 a custom loop scales the loss itself (model.compile would do it for Keras).
        optimizer = runtime.loss_scale_optimizer(keras.optimizers.SGD(args.learning_rate), keras)
        step = tf.Variable(0, dtype=tf.int64, trainable=False)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    # Restores the newest backup (or SIGTERM save) of the chief on every replica: `step` resumes.
    checkpoints = runtime.StepCheckpoints(strategy, checkpoint, step, every=args.checkpoint_every)
    dataset = data.make_dataset(args.train_data, args.num_features, global_batch, args.seed, shard=shard)
    batches = iter(strategy.experimental_distribute_dataset(dataset.skip(checkpoints.resumed_from)))
    # DiLoCo: join the syncer (the global model replaces the restored weights), exchange every H steps.
    sync = runtime.diloco(model, examples_per_step=global_batch) if diloco else None

    def step_fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            per_example = tf.reduce_mean(tf.square(y - model(x, training=True)), axis=-1)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            scaled = runtime.scale_loss(optimizer, loss)
        grads = runtime.unscale_gradients(optimizer, tape.gradient(scaled, model.trainable_variables))
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(batch: Any) -> tf.Tensor:
        per_replica = strategy.run(step_fn, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    # The rehearsal's measurements for `vtrain estimate --from-run` (profile/<replica>.json in the run folder)
    profile = runtime.profile(model, optimizer, examples_per_step=global_batch)
    total_steps = args.epochs * args.steps_per_epoch
    start, total, steps, done = time.perf_counter(), 0.0, 0, int(step.numpy())
    while done < total_steps:
        with profile.step():
            with profile.waiting():  # the batch is read here, outside the step function, to time the wait
                batch = next(batches)
            total += float(checkpoints.run(train_step, batch))  # may save and exit on SIGTERM
        done, steps = int(step.numpy()), steps + 1
        if sync is not None:
            sync.step()
            if sync.stopped:  # min_quorum learners finished: this straggler stops here
                break
        if done % args.steps_per_epoch == 0:
            rate = steps / max(time.perf_counter() - start, 1e-9)
            log.info(
                "epoch %d: %.1f steps/sec, %.0f examples/sec, loss %.4f",
                done // args.steps_per_epoch,
                rate,
                rate * global_batch,
                total / steps,
            )
            reporting = runtime.trial_id() is not None or runtime.experiment_run() is not None
            if reporting and info.is_chief:  # a tuning trial's metric, or the experiment run's
                runtime.report_metric(args.metric, total / steps, step=done // args.steps_per_epoch)
            start, total, steps = time.perf_counter(), 0.0, 0
    checkpoints.close()
    profile.write()
    if sync is not None:
        sync.finish()  # every learner ends with the same global model; the first one saves it
    return runtime.save_model(model)


if __name__ == "__main__":
    main()
