"""Runs example scripts (or their MultiWorkerMirrored twins), one after the other in this process (argv: their
names, comma-separated), and writes what the tests compare: each one's final weights and losses on this rank, as
AIP_MODEL_DIR/<script>-rank<r>.npz. One process for several scripts, as a user's trainer may train twice: the
tests start TensorFlow (~7 CPU-s a process) half as often, and each script seeds itself, so the order changes
no number. `upstream_tape` and `upstream_fit` run Horovod's own synthetic benchmarks as scripts (trainer/upstream/)
with a small model, and write what they printed and a digest of the weights they trained; `conformance` runs the
checks of Horovod's TF2 tests, and ends the ring (its last phase times a collective out): it comes last."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import os
import runpy
import sys

import numpy as np

#: Horovod's benchmarks, with arguments that make them small: a MobileNetV3Small on batches of 2, a few steps.
UPSTREAM = {
    "upstream_tape": ("tensorflow2_synthetic_benchmark.py", ["--num-warmup-batches", "1"]),
    "upstream_fit": ("tensorflow2_keras_synthetic_benchmark.py", []),
}
SMALL = ["--model", "MobileNetV3Small", "--batch-size", "2", "--num-batches-per-iter", "1", "--num-iters", "2",
         "--no-cuda"]


def main() -> None:
    for name in sys.argv[1].split(","):
        run(name)


def run_upstream(name: str) -> None:
    script, extra = UPSTREAM[name]
    path = os.path.join(os.path.dirname(__file__), "upstream", script)
    printed = io.StringIO()
    argv = sys.argv
    sys.argv = [path, *extra, *SMALL]
    try:
        with contextlib.redirect_stdout(printed):
            namespace = runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv = argv
    rank = namespace["hvd"].rank()
    # the trainable weights: the batch normalisation statistics follow each rank's own (random) data
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(w.numpy()).tobytes()
                                     for w in namespace["model"].trainable_weights))
    out = os.environ["AIP_MODEL_DIR"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}-rank{rank}.txt"), "w") as f:
        f.write(f"weights {digest.hexdigest()}\n{printed.getvalue()}")


def run(name: str) -> None:
    if name == "api_check":
        from trainer import api_check

        api_check.main()
        return
    if name in ("conformance", "late_start"):
        importlib.import_module(f"trainer.{name}").main()
        return
    if name in UPSTREAM:
        run_upstream(name)
        return
    if name.startswith("twin_"):
        from trainer import twin

        model, losses, rank = twin.train(name.removeprefix("twin_"))
    else:
        example = importlib.import_module(f"trainer.{name}")
        model = example.train()
        rank = example.hvd.rank()
        losses = example.LOSSES if hasattr(example, "LOSSES") else model.history.history["loss"]
    out = os.environ["AIP_MODEL_DIR"]
    os.makedirs(out, exist_ok=True)
    weights = {f"w{i}": w for i, w in enumerate(model.get_weights())}
    np.savez(os.path.join(out, f"{name}-rank{rank}.npz"), losses=np.asarray(losses, np.float64), **weights)


if __name__ == "__main__":
    main()
