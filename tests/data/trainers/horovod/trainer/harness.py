"""Runs example scripts (or their MultiWorkerMirrored twins), one after the other in this process (argv: their
names, comma-separated), and writes what the tests compare: each one's final weights and losses on this rank, as
AIP_MODEL_DIR/<script>-rank<r>.npz. One process for several scripts, as a user's trainer may train twice: the
tests start TensorFlow (~7 CPU-s a process) half as often, and each script seeds itself, so the order changes
no number. `conformance` runs the project's own checks of what Horovod's TF2 tests check, and ends the ring (its
last phase times a collective out): it comes last."""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np


def main() -> None:
    for name in sys.argv[1].split(","):
        run(name)


def run(name: str) -> None:
    if name == "api_check":
        from trainer import api_check

        api_check.main()
        return
    if name in ("conformance", "late_start"):
        importlib.import_module(f"trainer.{name}").main()
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
