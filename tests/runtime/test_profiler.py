"""The runtime profile from real TensorFlow: both templates profile themselves, and FLOPs are counted.

Slow (TensorFlow): one short single-replica run per template in a subprocess (which also shows that counting
FLOPs prints no TensorFlow deprecation), one in-process count, two trainers that die.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from vtrain.estimate.memory import memory_need

FEATURES = 8
PARAMS = FEATURES * 16 + 16 + 16 + 1  # the templates' Dense(16) and Dense(1), counted by hand


@pytest.mark.slow
@pytest.mark.parametrize("template", ["keras", "custom-loop"])
def test_each_template_writes_its_profile(template: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'trainer_templates' / template}{os.pathsep}{REPO}",
           "AIP_MODEL_DIR": f"{tmp_path}/model/", "AIP_CHECKPOINT_DIR": f"{tmp_path}/checkpoints/",
           "AIP_TENSORBOARD_LOG_DIR": f"{tmp_path}/logs/", "CLOUD_ML_JOB_ID": "t1",
           "VTRAIN_PROFILE_DIR": str(tmp_path / "profile"), "TF_CPP_MIN_LOG_LEVEL": "2"}  # fmt: skip
    args = ["--epochs=1", "--steps-per-epoch=12", "--batch-size=8", f"--num-features={FEATURES}"]
    done = subprocess.run([sys.executable, "-m", "trainer.task", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    p = json.loads((tmp_path / "profile" / "chief-0.json").read_text())
    assert p["complete"] is True and p["job_id"] == "t1"
    assert p["count_params"] == p["parameters"]["trainable"] + p["parameters"]["non_trainable"] == PARAMS
    assert p["gradient_bytes"] == PARAMS * 4 == p["parameters"]["by_dtype"]["float32"]["bytes"]
    assert p["examples_per_step"] == 8
    assert p["steps"]["count"] == 12 and p["steps"]["timed"] == 10 and p["steps"]["median_s"] > 0
    assert p["steps"]["p90_s"] >= p["steps"]["median_s"]
    assert 0 <= p["steps"]["input_wait_share"] <= 1
    if template == "custom-loop":
        assert p["steps"]["input_wait_method"].startswith("time in next()")
    slots = p["optimizer"]["slot_bytes"]
    need = memory_need(PARAMS, {0: "sgd", 1: "momentum", 2: "adam"}[round(slots / (PARAMS * 4))])
    assert PARAMS * 4 + p["gradient_bytes"] + slots == pytest.approx(need.state, rel=0.2)
    assert p["memory"]["kind"] == "rss" and p["memory"]["peak_bytes"] >= p["memory"]["baseline_bytes"] > 0
    assert p["flops"]["per_step"] > 0 and p["flops"]["batch"] == 8
    assert p["activation_bytes_per_example"] == (16 + 1) * 4
    # TF's graph profiler, which counted those FLOPs, calls `tensor_shape_from_node_def_name`, which TF
    # deprecated: the warning came with every local run (issue 30, class 6). A fresh process, as here: TF
    # says each deprecation once per process.
    assert "tensor_shape_from_node_def_name" not in done.stderr and "is deprecated" not in done.stderr, done.stderr


@pytest.mark.slow
def test_a_dense_model_counts_about_six_flops_per_parameter_per_example() -> None:
    import keras

    from vtrain.runtime.profiler import count_flops

    model = keras.Sequential([keras.Input(shape=(256,)), *[keras.layers.Dense(256) for _ in range(4)]])
    flops = count_flops(model, 32)
    assert flops["per_step"] == pytest.approx(32 * flops["per_example"])
    assert flops["per_example"] == pytest.approx(6 * model.count_params(), rel=0.10)
    assert flops["ratio_to_6n"] < 1  # the first layer's input gradient is not computed: the note says so
    assert "first layer" in flops["note"]

    class NoShape(keras.Model):
        def call(self, x: object) -> object:
            return x

    assert count_flops(NoShape(), 8)["note"].startswith("cannot count: the model has no static input shape")


CRASH = """
import sys
from vtrain import runtime
strategy = runtime.strategy()
if sys.argv[1] == "model":
    import keras
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
    prof = runtime.profile(model, keras.optimizers.SGD(0.1), examples_per_step=8)
    for _ in range(3):
        with prof.step():
            model(keras.ops.ones((8, 4)))
raise SystemExit(3)  # the trainer fails before training ends
"""


@pytest.mark.slow
@pytest.mark.parametrize("attached", ["model", "strategy-only"])
def test_a_trainer_that_dies_leaves_an_incomplete_profile(attached: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CLOUD_ML_JOB_ID": "t2", "TF_CPP_MIN_LOG_LEVEL": "2",
           "VTRAIN_PROFILE_DIR": str(tmp_path / "profile")}
    done = subprocess.run([sys.executable, "-c", CRASH, attached], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    p = json.loads((tmp_path / "profile" / "chief-0.json").read_text())
    assert p["complete"] is False and p["strategy"] == "default" and p["steps"]["count"] == (3 if attached == "model"
                                                                                               else 0)
    assert p["steps"]["median_s"] is None  # 3 steps are too few for a step time
    if attached == "model":
        assert p["count_params"] == 4 * 2 + 2
    else:
        assert "count_params" not in p and p["note"].startswith("no model attached")
