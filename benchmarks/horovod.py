"""vtrain.horovod against MultiWorkerMirrored on CPU, run by hand: `python benchmarks/horovod.py`.

The same model (an MLP, --features x --hidden x --hidden x 10, float32), the same global batch and SGD,
trained by 2 processes on 127.0.0.1 (TF_CONFIG, as `vtrain local` sets it) in four ways:

  horovod-tape   vtrain.horovod.tensorflow: a tf.function step with hvd.DistributedGradientTape
  mwms-loop      MultiWorkerMirroredStrategy (RING): strategy.run in a tf.function, the same step
  horovod-fit    vtrain.horovod.keras: model.fit with hvd.DistributedOptimizer (tf_keras)
  mwms-fit       MultiWorkerMirroredStrategy (RING): model.fit (tf_keras)

Each pair runs its warm-up, then every rank waits at a file barrier while this script reads the TCP
counters (`ss -tinp`: bytes_sent of every socket the rank owns), runs --steps timed steps, and waits again
for the second reading. Reported per rank: steps/s over the timed steps, and bytes sent per step as the
kernel counted them (gRPC framing and the coordination service's heartbeats included). A ring all-reduce
of S gradient bytes over n ranks sends 2(n-1)/n x S per rank: S itself for 2 ranks, printed beside them.
On one machine the "network" is loopback: the numbers compare the two implementations, not a cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vtrain.local.ports import free_ports

REPO = Path(__file__).resolve().parents[1]
MODES = ("horovod-tape", "mwms-loop", "horovod-fit", "mwms-fit")


def _wait_for(path: Path, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path.name} after {timeout:.0f}s")
        time.sleep(0.05)


def child(mode: str, args: argparse.Namespace, rank: int, sync: Path) -> None:
    """One rank: build, warm up, barrier, timed steps, barrier, exit."""
    import numpy as np

    if mode.startswith("horovod"):
        if mode == "horovod-fit":
            import vtrain.horovod.keras as hvd
        else:
            import vtrain.horovod.tensorflow as hvd  # type: ignore[no-redef]
        hvd.init()
        strategy = None
        n = hvd.size()
    else:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        from vtrain import runtime

        strategy = runtime.strategy()
        n = strategy.num_replicas_in_sync
    import tensorflow as tf

    keras = tf.keras
    keras.utils.set_random_seed(1)
    local_batch = args.batch // n
    rng = np.random.default_rng(rank)
    x = rng.random((local_batch * 8, args.features), dtype=np.float32)
    y = rng.integers(0, 10, local_batch * 8)

    def build() -> Any:
        return keras.Sequential([keras.Input(shape=(args.features,)), keras.layers.Dense(args.hidden, "relu"),
                                 keras.layers.Dense(args.hidden, "relu"), keras.layers.Dense(10)])

    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    steps: dict[str, Any] = {}
    if mode == "horovod-tape":
        model, opt = build(), keras.optimizers.SGD(0.01)
        data = iter(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(local_batch))

        @tf.function  # type: ignore[untyped-decorator]
        def step(images: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                value = loss(labels, model(images, training=True))
            grads = hvd.DistributedGradientTape(tape).gradient(value, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return value

        steps["run"] = lambda k: [step(*next(data)) for _ in range(k)][-1].numpy()
    elif mode == "mwms-loop":
        assert strategy is not None
        with strategy.scope():
            model, opt = build(), keras.optimizers.SGD(0.01)
        per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        dist = iter(strategy.experimental_distribute_dataset(
            tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(args.batch)))

        @tf.function  # type: ignore[untyped-decorator]
        def step(batch: Any) -> Any:
            def one(images: Any, labels: Any) -> Any:
                with tf.GradientTape() as tape:
                    value = tf.nn.compute_average_loss(per_example(labels, model(images, training=True)),
                                                       global_batch_size=args.batch)
                grads = tape.gradient(value, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
                return value

            return strategy.reduce("SUM", strategy.run(one, args=batch), axis=None)

        steps["run"] = lambda k: [step(next(dist)) for _ in range(k)][-1].numpy()
    else:
        if strategy is not None:
            with strategy.scope():
                model = build()
                model.compile(optimizer=keras.optimizers.SGD(0.01), loss=loss)
            ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(args.batch)
        else:
            model = build()
            model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss=loss)
            ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(local_batch)
        steps["run"] = lambda k: model.fit(ds, steps_per_epoch=k, epochs=1, verbose=0).history["loss"][-1]
    steps["run"](args.warmup)
    (sync / f"ready-{rank}").write_text("")
    _wait_for(sync / "go")
    start = time.perf_counter()
    last = steps["run"](args.steps)
    seconds = time.perf_counter() - start
    (sync / f"done-{rank}.json").write_text(json.dumps({"seconds": seconds, "loss": float(last)}))
    _wait_for(sync / "exit")


def _sent_by(pids: set[int]) -> dict[int, int]:
    """bytes_sent of every TCP socket each pid owns, summed per pid (ss -tinp)."""
    text = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True, check=True).stdout
    totals = dict.fromkeys(pids, 0)
    owner: int | None = None
    for line in text.splitlines():
        found = re.search(r"pid=(\d+),", line)
        if found:
            owner = int(found.group(1))
            continue
        sent = re.search(r"\bbytes_sent:(\d+)", line)
        if sent and owner in totals:
            totals[owner] += int(sent.group(1))
    return totals


def measure(mode: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    sync = work / mode
    sync.mkdir(parents=True)
    ports = free_ports(2)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    procs = []
    for rank, (kind, index) in enumerate((("chief", 0), ("worker", 0))):
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}}),
               "VTRAIN_DISTRIBUTION_STRATEGY": "horovod" if mode.startswith("horovod") else "multi_worker_mirrored",
               "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
        argv = [sys.executable, __file__, "--child", mode, "--rank", str(rank), "--sync", str(sync),
                f"--features={args.features}", f"--hidden={args.hidden}", f"--batch={args.batch}",
                f"--warmup={args.warmup}", f"--steps={args.steps}"]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                      stderr=open(sync / f"rank{rank}.log", "w")))  # noqa: SIM115
    try:
        for rank in (0, 1):
            _wait_for(sync / f"ready-{rank}")
        pids = {p.pid for p in procs}
        before = _sent_by(pids)
        (sync / "go").write_text("")
        for rank in (0, 1):
            _wait_for(sync / f"done-{rank}.json")
        after = _sent_by(pids)
        (sync / "exit").write_text("")
        for p in procs:
            p.wait(timeout=120)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    done = [json.loads((sync / f"done-{r}.json").read_text()) for r in (0, 1)]
    sent = [after[p.pid] - before[p.pid] for p in procs]
    return {"mode": mode, "steps_per_s": args.steps / max(d["seconds"] for d in done),
            "bytes_per_step": [s / args.steps for s in sent], "loss": done[0]["loss"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64, help="global batch")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--child")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--sync", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args, args.rank, args.sync)
        return
    import tempfile

    params = args.features * args.hidden + args.hidden + args.hidden * args.hidden + args.hidden + args.hidden * 10 + 10
    print(f"MLP {args.features}x{args.hidden}x{args.hidden}x10: {params:,} parameters = {4 * params / 1e6:.2f} MB of "
          f"float32 gradients; a ring all-reduce over 2 ranks sends {4 * params / 1e6:.2f} MB per rank per step")
    print(f"{'mode':14} {'steps/s':>8} {'MB sent/step rank0':>19} {'rank1':>7} {'final loss':>11}")
    with tempfile.TemporaryDirectory() as work:
        for mode in args.modes.split(","):
            r = measure(mode, args, Path(work))
            b0, b1 = (b / 1e6 for b in r["bytes_per_step"])
            print(f"{mode:14} {r['steps_per_s']:8.1f} {b0:19.2f} {b1:7.2f} {r['loss']:11.4f}", flush=True)


if __name__ == "__main__":
    main()
