"""Rank 1 is alive but makes no tensor for two minutes after hvd.init() (stuck in its own code, or gone before its
first tensor): rank 0's first collective must end after VTRAIN_COLLECTIVE_TIMEOUT, not wait for it (issue 46,
class 7). Each rank writes AIP_MODEL_DIR/late-rank<r>.json: how its first collective ended and how long it waited."""

import json
import os
import time

import vtrain.horovod.tensorflow as hvd


def main():
    hvd.init()
    if hvd.rank() == 1:
        time.sleep(120)
    import tensorflow as tf

    start = time.monotonic()
    try:
        hvd.allreduce(tf.constant([1.0]))
        outcome = "returned"
    except Exception as err:  # noqa: BLE001 - recorded for the test
        outcome = f"{type(err).__name__}: {err}"
    out = os.environ["AIP_MODEL_DIR"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"late-rank{hvd.rank()}.json"), "w") as f:
        json.dump({"outcome": outcome, "waited": time.monotonic() - start}, f)
    if outcome != "returned":
        raise SystemExit(f"the first collective failed: {outcome.splitlines()[0]}")
