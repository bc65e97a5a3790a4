"""One prepared check for a GPU machine (never part of CI): `python benchmarks/gpu_check.py [--quick]`.

1. MirroredStrategy on the local GPU(s), a dense model, a hand-written tf.function loop with Adam:
   steps/sec in float32 and with `runtime.mixed_precision()` (auto: mixed_bfloat16 on compute
   capability ≥ 8.0, mixed_float16 + loss scaling on 7.x).
2. The trainer templates (keras: model.fit; custom-loop: strategy.run) against a hand-written TF loop
   on the same model, data and batch, all under MirroredStrategy. Goal: within 5 %.
3. Memory: what `vtrain.estimate` predicts for the dense model (state + activations) against what
   TensorFlow allocated (`tf.config.experimental.get_memory_info("GPU:0")["peak"]`).
4. `--dtensor`: instead, the DTensor path (NCCL collectives, tensor parallel): gpu_check_dtensor.py.

Each case runs in its own process (the strategy and the Keras policy are per process) and prints
one JSON line; the parent prints a table. Without a GPU it still runs, on the CPU with smaller
sizes, and says so loudly: those numbers say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- inside one case's process


def _gpu_memory(tf: Any) -> tuple[float | None, str]:
    if not tf.config.list_physical_devices("GPU"):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0, "process max RSS (CPU run)"
    return float(tf.config.experimental.get_memory_info("GPU:0")["peak"]), "TF GPU:0 peak"


def dense_case(mixed: bool, width: int, batch: int, steps: int) -> dict[str, Any]:
    """MirroredStrategy + a hand-written loop on a dense model; steps/sec and memory."""
    import tensorflow as tf

    from vtrain import runtime
    from vtrain.estimate import memory_need

    strategy = tf.distribute.MirroredStrategy()
    import keras

    precision = runtime.mixed_precision("auto" if mixed else "float32", keras)
    layers = [width, 4 * width, 4 * width, 4 * width, width]
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input(shape=(layers[0],))]
            + [keras.layers.Dense(n, activation="relu") for n in layers[1:-1]]
            + [keras.layers.Dense(layers[-1], dtype="float32")]
        )
        optimizer = runtime.loss_scale_optimizer(keras.optimizers.Adam(1e-4), keras)
    params = int(sum(v.shape.num_elements() for v in model.trainable_variables))
    x = tf.random.normal((batch * strategy.num_replicas_in_sync, layers[0]))
    dataset = tf.data.Dataset.from_tensors((x, x)).repeat()
    batches = iter(strategy.experimental_distribute_dataset(dataset))

    def step_fn(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
            scaled = runtime.scale_loss(optimizer, loss)
        grads = runtime.unscale_gradients(optimizer, tape.gradient(scaled, model.trainable_variables))
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train(iterator: Any) -> Any:
        return strategy.run(step_fn, args=next(iterator))

    for _ in range(5):
        train(batches)
    start = time.perf_counter()
    for _ in range(steps):
        loss = train(batches)
    float(strategy.reduce(tf.distribute.ReduceOp.MEAN, loss, axis=None))  # wait for the device
    rate = steps / (time.perf_counter() - start)
    # The model's activations: every layer's output per example, kept for the backward pass.
    width_bytes = 2 if precision.policy != "float32" else 4
    acts = batch * sum(layers) * width_bytes * 2  # outputs and their gradients
    need = memory_need(params, "adam", "mixed_bf16" if width_bytes == 2 else "fp32", acts)
    allocated, how = _gpu_memory(tf)
    return {
        "case": f"mirrored {'mixed' if mixed else 'fp32'}",
        "policy": precision.policy,
        "reason": precision.reason,
        "replicas": strategy.num_replicas_in_sync,
        "params": params,
        "steps_per_sec": rate,
        "model_bytes": need.total,
        "allocated_bytes": allocated,
        "allocated_how": how,
    }


def template_case(template: str, steps: int, batch: int, features: int) -> dict[str, Any]:
    """Run a template's main() and read its own steps/sec log (best epoch after the first)."""
    sys.path.insert(0, str(REPO / "trainer_templates" / template))
    rates: list[float] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if "steps/sec" in text:
                rates.append(float(text.split(":")[1].split("steps/sec")[0]))

    logging.getLogger("trainer").addHandler(Grab())
    from trainer import task  # type: ignore[import-not-found]

    argv = [f"--epochs={3}", f"--steps-per-epoch={steps}", f"--batch-size={batch}", f"--num-features={features}"]
    task.main(argv)
    return {"case": f"template {template}", "steps_per_sec": max(rates[1:] or rates), "epochs": rates}


def handloop_case(steps: int, batch: int, features: int) -> dict[str, Any]:
    """The templates' model, data and optimizer in the plainest TF loop: no vtrain, no callbacks."""
    import keras
    import tensorflow as tf

    sys.path.insert(0, str(REPO / "trainer_templates" / "keras"))
    from trainer import data  # type: ignore[import-not-found]

    strategy = tf.distribute.MirroredStrategy()
    global_batch = batch * strategy.num_replicas_in_sync
    batches = iter(strategy.experimental_distribute_dataset(data.make_dataset(None, features, global_batch, 42)))
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input(shape=(features,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
        )
        optimizer = keras.optimizers.SGD(0.05)

    def step_fn(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            per_example = tf.reduce_mean(tf.square(y - model(x, training=True)), axis=-1)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train(iterator: Any) -> Any:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=next(iterator)), axis=None)

    rates = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(steps):
            total = train(batches)
        float(total)
        rates.append(steps / (time.perf_counter() - start))
    return {"case": "hand-written loop", "steps_per_sec": max(rates[1:]), "epochs": rates}


# --------------------------------------------------------------------------- the parent


def run_case(args: list[str], out: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "VTRAIN_DISTRIBUTION_STRATEGY": "mirrored",
        "AIP_MODEL_DIR": str(out / "model"),
        "AIP_CHECKPOINT_DIR": str(out / "checkpoints"),
        "AIP_TENSORBOARD_LOG_DIR": str(out / "logs"),
    }
    env.pop("TF_CONFIG", None)
    done = subprocess.run(
        [sys.executable, __file__, "--case", *args], capture_output=True, text=True, env=env, timeout=540
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"case": " ".join(args), "error": done.stderr.strip().splitlines()[-3:]}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--dtensor", action="store_true", help="the DTensor (NCCL) check instead: gpu_check_dtensor.py")
    args, rest = parser.parse_known_args()
    if args.dtensor:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from gpu_check_dtensor import main as dtensor_check

        raise SystemExit(dtensor_check(rest + (["--json", args.json] if args.json else [])))
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.case:
        kind, *rest = args.case
        if kind == "dense":
            mixed, width, batch, steps = (int(x) for x in rest)
            result = dense_case(bool(mixed), width, batch, steps)
        elif kind == "template":
            result = template_case(rest[0], *(int(x) for x in rest[1:]))
        else:
            result = handloop_case(*(int(x) for x in rest))
        print(json.dumps(result))
        return

    probe = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, check=True,
    )  # fmt: skip
    gpus = int(probe.stdout.strip().splitlines()[-1])
    if gpus:
        print(f"GPU run: {gpus} GPU(s) visible")
        width, batch, steps, tsteps = 1024, 256, 20 if args.quick else 100, 50 if args.quick else 300
    else:
        print("NO GPU VISIBLE: running on the CPU with small sizes. These numbers say nothing about a GPU.")
        width, batch, steps, tsteps = 128, 64, 10, 30
    with tempfile.TemporaryDirectory() as tmp:
        results = [
            run_case(["dense", "0", str(width), str(batch), str(steps)], Path(tmp) / "a"),
            run_case(["dense", "1", str(width), str(batch), str(steps)], Path(tmp) / "b"),
            run_case(["handloop", str(tsteps), str(batch), "8"], Path(tmp) / "c"),
            run_case(["template", "keras", str(tsteps), str(batch), "8"], Path(tmp) / "d"),
            run_case(["template", "custom-loop", str(tsteps), str(batch), "8"], Path(tmp) / "e"),
        ]
    report(results, gpus)
    if args.json:
        Path(args.json).write_text(json.dumps({"gpus": gpus, "results": results}, indent=2))


def report(results: list[dict[str, Any]], gpus: int) -> None:
    for r in results:
        if "error" in r:
            print(f"{r['case']:24} FAILED: {' | '.join(r['error'])}")
            continue
        line = f"{r['case']:24} {r['steps_per_sec']:10.1f} steps/sec"
        if "policy" in r:
            line += f"  policy {r['policy']} ({r['reason']}); {r['params'] / 1e6:.1f}M params"
            model, allocated = r["model_bytes"] / 1e9, r["allocated_bytes"] / 1e9
            line += f"; model {model:.3f} GB vs {r['allocated_how']} {allocated:.3f} GB"
        print(line)
    by = {r["case"]: r for r in results if "error" not in r}
    if "mirrored fp32" in by and "mirrored mixed" in by:
        speedup = by["mirrored mixed"]["steps_per_sec"] / by["mirrored fp32"]["steps_per_sec"]
        print(f"mixed / fp32 speed-up: {speedup:.2f}×")
    hand = by.get("hand-written loop")
    for template in ("keras", "custom-loop"):
        mine = by.get(f"template {template}")
        if hand and mine:
            ratio = mine["steps_per_sec"] / hand["steps_per_sec"]
            verdict = "at most 5 % slower: goal met" if ratio >= 0.95 else "MORE than 5 % slower: goal missed"
            print(f"template {template} / hand-written loop: {ratio:.3f} ({verdict})")
    if not gpus:
        print("(CPU run: not a GPU result)")


if __name__ == "__main__":
    main()
