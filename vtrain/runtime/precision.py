"""Mixed precision that fits this replica's hardware: `runtime.mixed_precision()`.

16-bit compute with fp32 variables speeds up training where the hardware has fast 16-bit math
(TensorFlow's mixed-precision guide): TPUs compute in bfloat16; NVIDIA GPUs of compute capability
≥ 8.0 (A100, L4, H100, H200, B200) have bfloat16 tensor cores; 7.x (V100, T4) have float16 tensor
cores only, and float16 needs loss scaling so small gradients do not flush to zero; older GPUs
and CPUs gain nothing (CPUs usually lose). The decision (:func:`choose_precision`) is a pure
function of the environment, the GPUs' compute capabilities and TPU presence, tested per
environment like :func:`~vtrain.runtime.decision.choose_strategy`.

``VTRAIN_MIXED_PRECISION`` (set through the job file's ``trainer.env`` or a pool's ``env``)
overrides what the trainer asked for: ``auto``, ``mixed_bfloat16``, ``mixed_float16`` or
``float32`` (aliases: bf16, fp16, fp32, off). An explicit policy the hardware cannot run (float16
on a TPU, bfloat16 on a pre-Ampere GPU) is a :class:`RuntimeMismatch`, not a silent fallback.

On TPUs, bfloat16 keeps 8 bits of mantissa: Keras' mixed_bfloat16 keeps variables (and so the
optimizer's slots) in fp32; keep your own accumulators (loss sums, metrics, batch-norm statistics)
in fp32 too, and make the model's last layer output float32 (``dtype="float32"``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from vtrain.errors import RuntimeMismatch

log = logging.getLogger("vtrain.runtime")

ENV = "VTRAIN_MIXED_PRECISION"
POLICIES = ("auto", "mixed_bfloat16", "mixed_float16", "float32")
_ALIASES = {
    "bf16": "mixed_bfloat16",
    "mixed_bf16": "mixed_bfloat16",
    "bfloat16": "mixed_bfloat16",
    "fp16": "mixed_float16",
    "mixed_fp16": "mixed_float16",
    "float16": "mixed_float16",
    "fp32": "float32",
    "off": "float32",
    "none": "float32",
}


@dataclass(frozen=True)
class PrecisionDecision:
    """The Keras policy for this replica and why; `set_policy` False leaves Keras' default alone."""

    policy: str  # mixed_bfloat16 | mixed_float16 | float32
    reason: str
    loss_scaling: bool
    set_policy: bool


def _normalise(raw: str, where: str) -> str:
    value = raw.strip().lower().replace("-", "_")
    value = _ALIASES.get(value, value)
    if value not in POLICIES:
        raise RuntimeMismatch(f"{where}={raw!r} is not one of: {', '.join(POLICIES)} (or bf16, fp16, fp32, off)")
    return value


def choose_precision(
    env: Mapping[str, str], gpus: Sequence[tuple[int, int]], tpu: bool, asked: str = "auto"
) -> PrecisionDecision:
    """Decide the policy from VTRAIN_MIXED_PRECISION (wins), else `asked`; `gpus` are compute capabilities.

    Pure: no TensorFlow, no os.environ.
    """
    if env.get(ENV, "").strip():
        policy, source = _normalise(env[ENV], ENV), ENV
    else:
        policy, source = _normalise(asked, "mixed_precision(policy)"), "asked for"
    slowest = min(gpus) if gpus else None
    cc = f"{slowest[0]}.{slowest[1]}" if slowest else ""

    def decide(name: str, reason: str, set_policy: bool = True) -> PrecisionDecision:
        return PrecisionDecision(name, reason, name == "mixed_float16", set_policy)

    if policy == "auto":
        if tpu:
            return decide("mixed_bfloat16", "a TPU computes in bfloat16 natively")
        if slowest is not None and slowest >= (8, 0):
            return decide("mixed_bfloat16", f"{len(gpus)} GPU(s) of compute capability ≥ {cc}: bfloat16 tensor cores")
        if slowest is not None and slowest >= (7, 0):
            return decide(
                "mixed_float16", f"{len(gpus)} GPU(s) of compute capability {cc}: float16 tensor cores, loss scaling"
            )
        if slowest is not None:
            return decide("float32", f"GPU compute capability {cc}: no fast 16-bit math; left at float32", False)
        return decide("float32", "no GPU or TPU: 16-bit math is no faster on CPUs; left at float32", False)
    if policy == "mixed_float16" and tpu:
        raise RuntimeMismatch(
            f"{source} mixed_float16, but this replica has a TPU, which computes in bfloat16: use mixed_bfloat16"
        )
    if policy == "mixed_bfloat16" and slowest is not None and slowest < (8, 0) and not tpu:
        raise RuntimeMismatch(
            f"{source} mixed_bfloat16, but a GPU here has compute capability {cc} (bfloat16 needs 8.0, "
            "A100/L4/H100 or newer): use mixed_float16"
        )
    if policy == "float32":  # from the trainer's own argument: leave Keras' default untouched
        return decide("float32", f"{source}: float32", source == ENV)
    where = "TPU" if tpu else (f"GPU compute capability {cc}" if slowest else "CPU only: expect slower steps")
    return decide(policy, f"{source} ({where})")


# --------------------------------------------------------------------------- applying it (TensorFlow)


def _hardware() -> tuple[list[tuple[int, int]], bool]:
    from vtrain.runtime.decision import detect_tpu

    if detect_tpu() is not None:
        return [], True
    import tensorflow as tf

    capabilities = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        capabilities.append(tuple(details.get("compute_capability") or (0, 0)))
    return capabilities, False


def mixed_precision(policy: str = "auto", keras: ModuleType | None = None) -> PrecisionDecision:
    """Set the Keras mixed-precision policy that fits this replica; call it after `strategy()`, before the model.

    `keras` is the module the model is built with (default: :func:`vtrain.runtime.keras`). A Keras
    without the mixed-precision API is left alone (logged), so the trainer still runs.
    """
    gpus, tpu = _hardware()
    decision = choose_precision(os.environ, gpus, tpu, policy)
    log.info("vtrain: precision %s (%s)", decision.policy, decision.reason)
    if not decision.set_policy:
        return decision
    if keras is None:
        from vtrain.runtime.tfsetup import keras as runtime_keras

        keras = runtime_keras()
    api = getattr(keras, "mixed_precision", None)
    if api is None or not hasattr(api, "set_global_policy"):
        log.warning("vtrain: %s has no mixed_precision.set_global_policy; precision left unchanged", keras.__name__)
        return PrecisionDecision("float32", f"{keras.__name__} has no mixed-precision API", False, False)
    api.set_global_policy(decision.policy)
    return decision


def loss_scale_optimizer(optimizer: Any, keras: ModuleType) -> Any:
    """Wrap `optimizer` for loss scaling when the global policy is mixed_float16 (custom loops need it;
    Keras' model.compile does it by itself); any other policy returns it unchanged."""
    policy = keras.mixed_precision.global_policy()
    if getattr(policy, "name", str(policy)) != "mixed_float16":
        return optimizer
    wrapper = getattr(keras.optimizers, "LossScaleOptimizer", None) or keras.mixed_precision.LossScaleOptimizer
    return wrapper(optimizer)


def scale_loss(optimizer: Any, loss: Any) -> Any:
    """The loss to differentiate: scaled under a loss-scale optimizer (Keras 3 or tf_keras), else as is."""
    if hasattr(optimizer, "get_scaled_loss"):  # tf_keras
        return optimizer.get_scaled_loss(loss)
    if hasattr(optimizer, "scale_loss"):  # Keras 3: identity unless loss-scaled
        return optimizer.scale_loss(loss)
    return loss


def unscale_gradients(optimizer: Any, grads: Any) -> Any:
    """Gradients to apply: tf_keras needs them unscaled by hand; Keras 3's apply unscales them itself."""
    if hasattr(optimizer, "get_unscaled_gradients"):
        return optimizer.get_unscaled_gradients(grads)
    return grads
