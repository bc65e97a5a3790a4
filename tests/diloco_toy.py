"""A numpy DiLoCo learner for service tests: real process, real sockets, no TensorFlow.

    python -m tests.diloco_toy --steps 60 --out result.json   (CLUSTER_SPEC, VTRAIN_DILOCO, CLOUD_ML_JOB_ID set)

Noisy SGD towards a fixed target on three numpy "variables", synced by vtrain.runtime.diloco.Diloco
itself (the helper trainers use), so these tests exercise the same schedule, rejoin and overlap code.
Writes its final parameters and traffic.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from vtrain.runtime.diloco import Diloco

TARGET = np.linspace(-1, 1, 64).astype(np.float32)


def sgd_step(w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    noise = rng.normal(size=64).astype(np.float32)
    return w - np.float32(0.05) * (w - TARGET + np.float32(0.3) * noise)


class Var:
    """Just what runtime.diloco reads of a variable: name, dtype, shape, trainable, numpy(), assign()."""

    def __init__(self, name: str, value: np.ndarray, trainable: bool = True) -> None:
        self.name, self.trainable, self.value = name, trainable, value.astype(np.float32)
        self.dtype, self.shape = self.value.dtype, self.value.shape

    def numpy(self) -> np.ndarray:
        return self.value.copy()

    def assign(self, value: Any) -> None:
        self.value = np.asarray(value, np.float32).reshape(self.shape)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--examples", type=float, default=32.0)
    p.add_argument("--dim-mismatch", action="store_true")
    p.add_argument("--after-final", type=float, default=0.0, help="seconds of work after the final model (a save)")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO)
    rng = np.random.default_rng(args.seed)
    w, b, stat = (Var("w", rng.normal(size=65 if args.dim_mismatch else 64)), Var("b", rng.normal(size=1)),
                  Var("stat", rng.normal(size=4), trainable=False))  # the first learner's are the initial model
    sync = Diloco([w, b, stat], examples_per_step=args.examples)
    for _ in range(args.steps):
        if args.delay:
            time.sleep(args.delay)
        w.assign(sgd_step(w.value, rng))
        stat.assign(np.float32(0.9) * stat.value + np.float32(0.1 * args.seed))
        sync.step()
        if sync.stopped:
            break
    sync.finish()
    time.sleep(args.after_final)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"final": [v.value.tolist() for v in (w, b, stat)], "rounds": sync.client.rounds,
                   "traffic": asdict(sync.client.traffic)}, f)


if __name__ == "__main__":
    main()
