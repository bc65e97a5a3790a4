"""Does the profile's memory agree with `vtrain estimate`'s model? Run by hand: `python benchmarks/profile_memory.py`.

The quickstart's 161-parameter model is far below what a process's RSS can resolve (TensorFlow's own
runtime is ~650 MB), so this trains a model big enough to see: 5 × Dense over 1024 features (9.3M
parameters), Adam, batch 64, 20 steps of model.fit with runtime.profile_callback, on CPU. It prints
what the profile measured next to the advisor's memory model for the measured inputs (weights +
gradients + Adam's two slots + activations). Target: within 20%.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    folder = tempfile.mkdtemp(prefix="vtrain-profile-")
    os.environ["VTRAIN_PROFILE_DIR"] = folder
    from vtrain import runtime

    runtime.strategy()
    import keras
    import tensorflow as tf

    from vtrain.estimate.fromrun import Run, memory_check
    from vtrain.estimate.memory import human_bytes, memory_need

    x, y = tf.random.normal((256, 1024)), tf.random.normal((256, 1))
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(64, drop_remainder=True).repeat()
    model = keras.Sequential([keras.Input(shape=(1024,)),
                              *[keras.layers.Dense(1600, activation="relu") for _ in range(4)], keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    model.fit(data, epochs=1, steps_per_epoch=20, callbacks=[runtime.profile_callback(keras, 64, data)], verbose=0)
    p = json.loads((Path(folder) / "chief-0.json").read_text())
    need = memory_need(p["count_params"], "adam", "fp32", p["activation_bytes_per_example"] * 64)
    check = memory_check(Run(Path(folder), None, None, {"chief-0": p}), need.state, need.total)
    print("| model | params (count_params) | state in variables | model's state | training (peak RSS − at attach "
          "+ weights) | model's total | ratio | target |")
    print(f"| 5 × Dense, Adam, batch 64, CPU | {p['count_params']:,} ({model.count_params():,}) | "
          f"{human_bytes(check['measured_state_bytes'])} | {human_bytes(need.state)} | "
          f"{human_bytes(check['training_bytes'])} | {human_bytes(need.total)} | {check['training_ratio']:.2f}× | "
          "within 20% |")
    print(f"FLOPs per example {p['flops']['per_example']:.4g} = {p['flops']['ratio_to_6n']:.3f} × 6 × parameters")
    print("PASS" if abs(check["training_ratio"] - 1) <= 0.2 else "FAIL")


if __name__ == "__main__":
    main()
