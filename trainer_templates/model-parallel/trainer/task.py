"""Train an MLP block tensor-parallel over `model` and data-parallel over `batch` with DTensor, resumable.

    python -m trainer.task --mesh batch=2,model=2 --epochs 3

One process per replica, as Vertex AI (or `vtrain local`) starts them: runtime.dtensor_mesh() makes
each replica a DTensor client (DTENSOR_* from TF_CONFIG / CLUSTER_SPEC) and returns the mesh. The
mesh comes from --mesh, else VTRAIN_DTENSOR_MESH (the job file's dtensor.mesh), else
batch=<replicas>,model=2. Each client feeds only its rows of the global batch; the loss is the mean
over the global batch, so DTensor averages the gradients over `batch` and sums the partial products
over `model` itself. Every client saves its own pieces each --checkpoint-every steps (a restarted job
resumes from the newest step all clients finished) and reports each step (runtime.report_step).
At the end the weights are gathered; client 0 saves a SavedModel to AIP_MODEL_DIR, and every client
writes weights.json (the checksum is equal on all of them when they trained together).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from typing import Any

from vtrain import runtime
from vtrain.runtime import dtensor as rdt
from vtrain.runtime.dtensor_env import MESH_ENV, clients

log = logging.getLogger("trainer")


def whole(text: str) -> int:
    """An integer flag that also takes `32.0`: a tuning service may pass a discrete value as a float."""
    number = float(text)
    if not number.is_integer():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text}")
    return int(number)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mesh", help=f"e.g. batch=2,model=2; default: {MESH_ENV}, else batch=<replicas>,model=2")
    p.add_argument("--epochs", type=whole, default=3)
    p.add_argument("--steps-per-epoch", type=whole, default=50)
    p.add_argument("--batch-size", type=whole, default=16, help="per batch shard; the global batch scales")
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--num-features", type=whole, default=8)
    p.add_argument("--hidden", type=whole, default=64, help="width of the MLP block (split over model)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--checkpoint-every", type=whole, default=100, help="steps between sharded checkpoints")
    return p.parse_args(argv)


def default_mesh() -> str:
    return os.environ.get(MESH_ENV, "").strip() or f"batch={clients(os.environ).num_clients},model=2"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    mesh = runtime.dtensor_mesh(args.mesh or default_mesh())  # first: DTensor configures the devices
    import tensorflow as tf
    from tensorflow.experimental import dtensor

    from trainer import data
    from trainer.model import Served, TensorParallelMLP
    from vtrain.runtime import dtensor_layouts as layouts

    me, shards = rdt.client_id(), dict(rdt.mesh_dims(mesh)).get("batch", 1)
    global_batch = args.batch_size * shards
    start_row, stop_row = layouts.client_rows(mesh, global_batch)
    log.info("client %d of %d, mesh %s, global batch %d, this client feeds rows [%d, %d)",
             me, rdt.num_clients(), mesh_text(mesh), global_batch, start_row, stop_row)  # fmt: skip

    model = TensorParallelMLP(mesh, args.num_features, args.hidden, args.seed)
    variables = model.named()
    checkpoint = runtime.ShardedCheckpoint(variables, mesh)
    step = resumed = checkpoint.restore()
    if resumed:
        log.info("resumed from step %d", resumed)

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))  # the global mean: DTensor reduces over batch
        trainable = list(variables.values())
        for v, g in zip(trainable, tape.gradient(loss, trainable), strict=True):
            v.assign_sub(args.learning_rate * g)
        return loss

    total_steps = args.epochs * args.steps_per_epoch
    losses: list[float] = []
    begin, since = time.perf_counter(), 0
    while step < total_steps:
        x, y = data.rows(args.seed, step, start_row, stop_row, args.num_features)
        loss = train_step(layouts.pack_batch(x, mesh, global_batch), layouts.pack_batch(y, mesh, global_batch))
        step, since = step + 1, since + 1
        losses.append(float(dtensor.unpack(loss)[0].numpy()))
        runtime.report_step(step)
        if step % args.checkpoint_every == 0:
            checkpoint.save(step)
        if step % args.steps_per_epoch == 0:
            rate = since / max(time.perf_counter() - begin, 1e-9)
            log.info("epoch %d: %.1f steps/sec, loss %.4f", step // args.steps_per_epoch, rate, losses[-1])
            begin, since = time.perf_counter(), 0
    if step % args.checkpoint_every and step > resumed:
        checkpoint.save(step)  # a restart after the loop redoes nothing
    return finish(mesh, variables, losses, resumed, step, Served)


def mesh_text(mesh: Any) -> str:
    return ",".join(f"{n}={s}" for n, s in rdt.mesh_dims(mesh))


def finish(mesh: Any, variables: dict[str, Any], losses: list[float], resumed: int, step: int,
           served: Any) -> dict[str, Any]:  # fmt: skip
    """Gather the weights (every client: a collective), save the model from client 0, write weights.json."""
    import tensorflow as tf

    from vtrain.runtime import dtensor_layouts as layouts

    full = {name: layouts.gather(v) for name, v in variables.items()}
    me = rdt.client_id()
    final = runtime.model_dir()
    where = final if me == 0 else runtime.scratch_dir(final)
    if me == 0:
        tf.saved_model.save(served(full), final)
    per_device = layouts.device_bytes(variables.values())
    record = {
        "sha256": runtime.weights_checksum(full[n] for n in sorted(full)),
        "task_type": "chief" if me == 0 else "worker",
        "client": me,
        "is_chief": me == 0,
        "strategy": "dtensor",
        "mesh": mesh_text(mesh),
        "step": step,
        "resumed_from": resumed,
        "losses": losses,
        "shard_shapes": {n: [list(p.shape) for p in layouts.local_shards(v)] for n, v in variables.items()},
        "device_bytes": per_device,
        "full_bytes": int(sum(a.nbytes for a in full.values())),
    }
    tf.io.gfile.makedirs(where)
    with tf.io.gfile.GFile(runtime.join(where, runtime.WEIGHTS_FILE), "w") as f:
        f.write(json.dumps(record, indent=2) + "\n")
    log.info("client %d: weights sha256=%s, %d step(s), final loss %s, max %d weight bytes per device", me,
             record["sha256"], step, f"{losses[-1]:.6f}" if losses else "-", max(per_device.values()))
    return record


if __name__ == "__main__":
    main()
