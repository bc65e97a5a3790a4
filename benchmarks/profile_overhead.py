"""What does the runtime profile cost a training step? Run by hand: `python benchmarks/profile_overhead.py`.

One process, one Keras model (an MLP of 3 × Dense(512) on 256 features, batch 256, SGD), trained by
model.fit in alternating rounds with and without ``runtime.profile_callback`` (its writing turned off
with VTRAIN_PROFILE_DIR=off, since a profile is written once, after training). Each round's step time
is measured by two bare callbacks around the profile's (the same in both arms: Keras runs batch hooks
in both), as the median step after warm-up.
Also the profile's own per-step work in isolation (its two batch hooks, called 100,000 times), as a
share of the step: the A/B difference on a shared machine is mostly the machine's noise, this is not.
Target: ≤ 2% both ways (the best round of each arm, and the hooks' share).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ["VTRAIN_PROFILE_DIR"] = "off"
HOOK_CALLS = 100_000
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    from vtrain import runtime

    keras.utils.set_random_seed(0)
    x = tf.random.normal((256 * 8, 256))
    y = tf.random.normal((256 * 8, 1))
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(256, drop_remainder=True).repeat().prefetch(2)
    model = keras.Sequential([keras.Input(shape=(256,)), *[keras.layers.Dense(512, activation="relu")
                                                           for _ in range(3)], keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")

    times: list[float] = []
    started: list[float] = [0.0]

    class Start(keras.callbacks.Callback):  # first in the list: its begin hook runs before the profile's
        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            started[0] = time.perf_counter()

    class Stop(keras.callbacks.Callback):  # last: its end hook runs after the profile's
        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            times.append(time.perf_counter() - started[0])

    def one_round(profiled: bool) -> float:
        times.clear()
        callbacks = [runtime.profile_callback(keras, 256, data)] if profiled else []
        model.fit(data, epochs=1, steps_per_epoch=args.steps, callbacks=[Start(), *callbacks, Stop()], verbose=0)
        return statistics.median(times[5:])

    one_round(False)  # tracing and the first allocations, in neither arm
    off, on = [], []
    for i in range(args.rounds):
        for profiled in ((False, True) if i % 2 == 0 else (True, False)):
            (on if profiled else off).append(one_round(profiled))
    hooks = runtime.profile_callback(keras, 256)
    hooks.set_model(model)
    start = time.perf_counter()
    for i in range(HOOK_CALLS):
        hooks.on_train_batch_begin(i)
        hooks.on_train_batch_end(i)
    per_step = (time.perf_counter() - start) / HOOK_CALLS
    m_off, m_on = min(off), min(on)  # the least-disturbed round of each arm: robust to a busy machine
    overhead = (m_on - m_off) / m_off
    print("| profiling | step off (best round) | step on (best round) | A/B overhead | the hooks per step | "
          "hooks / step | target |")
    print(f"| runtime.profile_callback, {args.rounds} rounds × {args.steps} steps | {m_off * 1e3:.2f} ms | "
          f"{m_on * 1e3:.2f} ms | {overhead:+.1%} | {per_step * 1e6:.2f} µs | {per_step / m_off:.3%} | ≤ 2% |")
    print(f"medians over rounds: off {statistics.median(off) * 1e3:.2f} ms, on {statistics.median(on) * 1e3:.2f} ms "
          f"(spread off {min(off) * 1e3:.1f}-{max(off) * 1e3:.1f} ms: the A/B is only as good as the machine is quiet)")
    print("PASS" if per_step / m_off <= 0.02 and overhead <= 0.02 else "FAIL")


if __name__ == "__main__":
    main()
