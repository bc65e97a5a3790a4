"""Runs one of the example scripts (or its MultiWorkerMirrored twin) and writes what the tests compare:
this rank's final weights and its losses, as AIP_MODEL_DIR/<script>-rank<r>.npz."""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np


def main() -> None:
    name = sys.argv[1]
    if name == "api_check":
        from trainer import api_check

        api_check.main()
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
