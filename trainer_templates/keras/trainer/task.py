"""Train a small Keras model with whatever distribution the job gives this replica.

    python -m trainer.task --epochs 3 --train-data 'gs://my-bucket/data/*.csv'

vtrain.runtime picks the strategy (one machine, several GPUs, several workers,
parameter servers, a TPU, or a DiLoCo learner that syncs every H steps) and the Keras that can train under it: tf_keras
for multi-worker jobs, where Keras 3's model.fit fails. The chief saves the
model to AIP_MODEL_DIR; every replica writes weights.json with a checksum of
its final weights, so a launcher can check that all of them agree. In a
hyperparameter tuning trial, the flags are the tunable values and the chief
reports the loss per epoch (runtime.metric_reporter) for the tuner to compare; in a job with an
experiment run, the same reports become the run's metric and its per-epoch series. Every replica
profiles itself (runtime.profile_callback) for `vtrain estimate --from-run`.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import time
from types import ModuleType
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
    p.add_argument("--backup-every", default="epoch",
                   help="back up for restarts every epoch (default) or every N steps")
    p.add_argument(
        "--mixed-precision",
        action="store_true",
        help="16-bit compute where the hardware runs it fast (runtime.mixed_precision); "
        "VTRAIN_MIXED_PRECISION in the job's env overrides it",
    )
    p.add_argument("--metric", default="loss", help="in a tuning trial, report the mean training loss per epoch "
                   "under this name (the job file's tuning.metric.name)")
    return p.parse_args(argv)


def build_model(keras: ModuleType, num_features: int, learning_rate: float) -> Any:
    model = keras.Sequential(
        [
            keras.Input(shape=(num_features,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, dtype="float32"),  # float32 outputs keep the loss stable under mixed precision
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="mse")
    return model


def throughput(keras: ModuleType, steps: int, global_batch: int) -> Any:
    """Logs steps/sec and examples/sec per epoch: the number to watch when adding workers.

    Epoch hooks only: ParameterServerStrategy refuses batch-level callbacks.
    """

    class Throughput(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            rate = steps / max(time.perf_counter() - self.start, 1e-9)
            log.info(
                "epoch %d: %.1f steps/sec, %.0f examples/sec, loss %.4f",
                epoch + 1,
                rate,
                rate * global_batch,
                (logs or {}).get("loss", float("nan")),
            )

    return Throughput()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    strategy = runtime.strategy()  # first: multi-worker set-up must precede any other TF work
    keras = runtime.keras()
    precision = runtime.mixed_precision("auto" if args.mixed_precision else "float32", keras)
    from trainer import data  # imports TensorFlow; after the strategy on purpose

    info = runtime.info()
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    log.info(
        "%s/%d of %d worker(s), %s, %d replica(s) in sync, global batch %d, keras %s, %s, restarts %d",
        info.task_type,
        info.task_index,
        info.num_workers,
        info.strategy,
        strategy.num_replicas_in_sync,
        global_batch,
        keras.__name__,
        precision.policy,
        info.restarts,
    )

    keras.utils.set_random_seed(args.seed)
    diloco = info.strategy == "diloco"  # a standalone learner: its own slice of the data
    shard = runtime.learner_shard() if diloco else (1, 0)
    dataset = data.make_dataset(args.train_data, args.num_features, global_batch, args.seed, shard=shard)
    with strategy.scope():
        model = build_model(keras, args.num_features, args.learning_rate)

    backup_every = args.backup_every if args.backup_every == "epoch" else int(args.backup_every)
    callbacks = [runtime.backup_and_restore(keras, backup_every), throughput(keras, args.steps_per_epoch, global_batch)]
    if info.strategy != "parameter_server":  # it refuses batch-level callbacks
        callbacks.append(runtime.step_reporter(keras))  # steps for the launcher (VTRAIN_STATUS_FILE)
        # The rehearsal's measurements for `vtrain estimate --from-run` (profile/<replica>.json in the run folder)
        callbacks.append(runtime.profile_callback(keras, global_batch, dataset))
    if diloco:  # after BackupAndRestore: joining replaces the weights with the global model
        callbacks.append(runtime.diloco_callback(keras, examples_per_step=global_batch))
    if runtime.trial_id() is not None or runtime.experiment_run() is not None:  # a tuning trial's metric, or
        # the experiment run's: its final value and, with a TensorBoard linked, its per-epoch series
        callbacks.append(runtime.metric_reporter(keras, "loss", name=args.metric))
    if info.is_chief and importlib.util.find_spec("tensorboard"):  # TF >= 2.21 no longer bundles it
        callbacks.append(keras.callbacks.TensorBoard(runtime.tensorboard_dir()))
    model.fit(dataset, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, callbacks=callbacks, verbose=2)
    return runtime.save_model(model)


if __name__ == "__main__":
    main()
