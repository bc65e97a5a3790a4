"""A numpy DiLoCo learner for service tests: real process, real sockets, no TensorFlow.

    python -m tests.diloco_toy --steps 60 --out result.json   (CLUSTER_SPEC, VTRAIN_DILOCO, CLOUD_ML_JOB_ID set)

Noisy SGD towards a fixed target, synced through vtrain.diloco.learner.Client exactly as
vtrain.runtime.diloco does (fragments on the same schedule). Writes its final parameters and traffic.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import asdict

import numpy as np

from vtrain.diloco import settings as envsettings
from vtrain.diloco.codec import TensorSpec
from vtrain.diloco.learner import Client

MANIFEST = [TensorSpec("w", "float32", (64,), True), TensorSpec("b", "float32", (1,), True),
            TensorSpec("stat", "float32", (4,), False)]
TARGET = np.linspace(-1, 1, 64).astype(np.float32)


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
    settings = envsettings.settings()
    rng = np.random.default_rng(args.seed)
    manifest = list(MANIFEST)
    if args.dim_mismatch:
        manifest[0] = TensorSpec("w", "float32", (65,), True)
    initial = [rng.normal(size=t.shape).astype(np.float32) for t in manifest]
    client = Client(envsettings.syncer_address(), envsettings.token(), envsettings.this_replica(), manifest,
                    settings, lambda: initial)
    values = client.connect()
    every = settings.inner_steps // settings.fragments
    since = [0.0] * len(client.fragments)
    for step in range(1, args.steps + 1):
        if args.delay:
            time.sleep(args.delay)
        noise = rng.normal(size=64).astype(np.float32)
        values[0] = values[0] - np.float32(0.05) * (values[0] - TARGET + np.float32(0.3) * noise)
        values[2] = np.float32(0.9) * values[2] + np.float32(0.1 * args.seed)
        since = [s + args.examples for s in since]
        if step % every == 0:
            f = client.next_fragment()
            for g, new in client.sync(f, [values[i] for i in client.fragments[f]], since[f]).items():
                for i, v in zip(client.fragments[g], new, strict=True):
                    values[i] = v
                since[g] = 0.0
            if client.stopped:
                break
    pending = {f: ([values[i] for i in ix], since[f]) for f, ix in enumerate(client.fragments) if since[f] > 0}
    final = client.finish(pending)
    time.sleep(args.after_final)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"final": [v.tolist() for v in final], "rounds": client.rounds,
                   "traffic": asdict(client.traffic)}, f)


if __name__ == "__main__":
    main()
