"""runtime.mixed_precision: the pure decision for every environment, and what the trainer must be told."""

from __future__ import annotations

import pytest

from vtrain import runtime
from vtrain.errors import RuntimeMismatch
from vtrain.runtime import choose_precision

A100, L4, H100, V100, T4, P100 = (8, 0), (8, 9), (9, 0), (7, 0), (7, 5), (6, 0)

# (id, env, gpus, tpu, asked) -> (policy, loss scaling, sets the policy)
CASES = [
    ("cpu-auto", {}, [], False, "auto", ("float32", False, False)),
    ("tpu-auto", {}, [], True, "auto", ("mixed_bfloat16", False, True)),
    ("a100-auto", {}, [A100] * 8, False, "auto", ("mixed_bfloat16", False, True)),
    ("l4-auto", {}, [L4], False, "auto", ("mixed_bfloat16", False, True)),
    ("h100-auto", {}, [H100] * 8, False, "auto", ("mixed_bfloat16", False, True)),
    ("t4-auto", {}, [T4, T4], False, "auto", ("mixed_float16", True, True)),
    ("v100-auto", {}, [V100], False, "auto", ("mixed_float16", True, True)),
    ("p100-auto", {}, [P100], False, "auto", ("float32", False, False)),
    ("mixed-gpus-take-the-slowest", {}, [A100, T4], False, "auto", ("mixed_float16", True, True)),
    ("flag-off", {}, [A100], False, "float32", ("float32", False, False)),
    ("env-wins-over-asked", {"VTRAIN_MIXED_PRECISION": "auto"}, [T4], False, "float32", ("mixed_float16", True, True)),
    ("env-off", {"VTRAIN_MIXED_PRECISION": "off"}, [A100], False, "auto", ("float32", False, True)),
    ("env-alias-bf16", {"VTRAIN_MIXED_PRECISION": "bf16"}, [H100], False, "auto", ("mixed_bfloat16", False, True)),
    ("env-fp16-on-a100", {"VTRAIN_MIXED_PRECISION": "mixed-float16"}, [A100], False, "auto",
     ("mixed_float16", True, True)),
    ("explicit-on-cpu", {}, [], False, "mixed_bfloat16", ("mixed_bfloat16", False, True)),
    ("blank-env-is-unset", {"VTRAIN_MIXED_PRECISION": " "}, [], True, "auto", ("mixed_bfloat16", False, True)),
]  # fmt: skip


@pytest.mark.parametrize(("env", "gpus", "tpu", "asked", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decision_per_environment(env: dict, gpus: list, tpu: bool, asked: str, expected: tuple) -> None:
    d = choose_precision(env, gpus, tpu, asked)
    assert (d.policy, d.loss_scaling, d.set_policy) == expected
    assert d.reason


@pytest.mark.parametrize(
    ("env", "gpus", "tpu", "message"),
    [
        ({"VTRAIN_MIXED_PRECISION": "mixed_float16"}, [], True, "TPU, which computes in bfloat16"),
        ({"VTRAIN_MIXED_PRECISION": "bf16"}, [T4], False, "compute capability 7.5 (bfloat16 needs 8.0"),
        ({"VTRAIN_MIXED_PRECISION": "int8"}, [], False, "VTRAIN_MIXED_PRECISION='int8' is not one of: auto"),
    ],
)
def test_what_the_hardware_cannot_run_is_a_clear_error(env: dict, gpus: list, tpu: bool, message: str) -> None:
    with pytest.raises(RuntimeMismatch, match=message.replace("(", r"\(")):
        choose_precision(env, gpus, tpu)


def test_a_bad_argument_names_the_argument() -> None:
    with pytest.raises(RuntimeMismatch, match=r"mixed_precision\(policy\)='half'"):
        choose_precision({}, [], False, "half")


def test_exported_from_the_runtime() -> None:
    for name in ("mixed_precision", "choose_precision", "loss_scale_optimizer", "scale_loss", "unscale_gradients"):
        assert name in runtime.__all__


class _Plain:
    """An optimizer without loss scaling (Keras 3's scale_loss is the identity then)."""

    def scale_loss(self, loss: float) -> float:
        return loss


class _TfKerasScaled:
    """tf_keras' LossScaleOptimizer: scaled loss in, gradients unscaled by hand."""

    def get_scaled_loss(self, loss: float) -> float:
        return loss * 1024

    def get_unscaled_gradients(self, grads: list[float]) -> list[float]:
        return [g / 1024 for g in grads]


def test_loss_scaling_helpers_follow_the_optimizer_api() -> None:
    assert runtime.scale_loss(_Plain(), 2.0) == 2.0 and runtime.unscale_gradients(_Plain(), [1.0]) == [1.0]
    assert runtime.scale_loss(object(), 2.0) == 2.0
    scaled = _TfKerasScaled()
    assert runtime.scale_loss(scaled, 2.0) == 2048.0
    assert runtime.unscale_gradients(scaled, [2048.0]) == [2.0]
