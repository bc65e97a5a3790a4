"""Horovod scripts on Vertex AI without Horovod: its TF2 API on TensorFlow's own collectives.

A Horovod script changes one line and runs as a vtrain job (`distribution_strategy: horovod`)::

    import horovod.tensorflow.keras as hvd   →   import vtrain.horovod.keras as hvd
    import horovod.tensorflow as hvd         →   import vtrain.horovod.tensorflow as hvd
    import horovod                           →   import vtrain.horovod as horovod   (if the script has it)

Each chief/worker replica is one rank (chief 0, then the workers in order; :mod:`.topology`); the
gradients travel over the ring (CPU) or NCCL (GPU) all-reduce MultiWorkerMirroredStrategy uses
(:mod:`.collectives` on :mod:`.ops`, each call after the ranks agree on it: :mod:`.agreement`; dtypes and
scaling: :mod:`.wire`; Python objects: :mod:`.objects`); :mod:`.gradients` has DistributedGradientTape and
DistributedOptimizer and :mod:`.keras.callbacks` the Keras callbacks. What Horovod has and this does not
(hvd.join, process sets, Adasum, elastic, the timeline) fails at the call with why and what to do
(:mod:`.unsupported`); :mod:`.upstream` accounts for each of Horovod's names and TF2 tests.

Horovod's scripts are written for Keras 2 (``tf.keras``, ``opt.variables()``, compile's
``experimental_run_tf_function``), and Keras 3 was never supported by Horovod: importing ``.keras`` or
``.tensorflow`` sets TF_USE_LEGACY_KERAS=1, so ``tf.keras`` is tf_keras, when tf_keras is installed and ``tf.keras``
was not used yet (a script that uses Keras 3 directly still can: the optimizer wrapper knows both).
The docs page is docs/guides/horovod.md. This package ships to the replicas with :mod:`vtrain.runtime`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("vtrain.horovod")


def _keras_resolved() -> bool:
    """Whether ``tf.keras`` is already decided: its lazy loader resolved (`import tensorflow` itself imports
    Keras 3's package, so `keras` in sys.modules says nothing)."""
    if "tf_keras" in sys.modules:
        return True
    tf = sys.modules.get("tensorflow")
    loader = getattr(tf, "__dict__", {}).get("keras") if tf is not None else None
    return bool(getattr(loader, "_tfll_initialized", False))


def prefer_tf_keras(env: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """Set TF_USE_LEGACY_KERAS=1 when it can still take effect and tf_keras is installed; True if set now."""
    env = os.environ if env is None else env
    if env.get("TF_USE_LEGACY_KERAS") is not None or _keras_resolved():
        return False
    spec = importlib.util.find_spec("tf_keras")
    if spec is None or spec.origin is None:
        return False
    env["TF_USE_LEGACY_KERAS"] = "1"
    tf = sys.modules.get("tensorflow")
    if env is os.environ and tf is not None and "tensorflow.keras" not in sys.modules:
        # `import tensorflow` already chose where `from tensorflow.keras import x` looks (its __path__, by
        # TF_USE_LEGACY_KERAS as it was then): look in tf_keras first, as TensorFlow does when the variable is
        # set before it is imported (Horovod's synthetic benchmark imports tensorflow, then horovod, then
        # `from tensorflow.keras import applications`).
        legacy = os.path.join(os.path.dirname(spec.origin), "api", "_v2")
        if os.path.isdir(os.path.join(legacy, "keras")) and legacy not in tf.__path__:
            tf.__path__.insert(0, legacy)
    log.info("vtrain.horovod: TF_USE_LEGACY_KERAS=1, so tf.keras is tf_keras (Keras 2), as Horovod scripts expect")
    return True



def unconverted(namespace: dict[str, Any], names: Iterable[str]) -> None:
    """Mark the API's functions as not for AutoGraph (``tf.autograph.experimental.do_not_convert``).

    A tf.function converts every Python function it calls that is not marked; converting vtrain.horovod's
    modules cost ~6 s of the first trace of a step with one hvd.allreduce (0.1 s unconverted), and they
    branch on Python values only, so there is nothing to convert."""
    import tensorflow as tf

    for name in names:
        namespace[name] = tf.autograph.experimental.do_not_convert(namespace[name])


def __getattr__(name: str) -> Any:
    from vtrain.horovod.unsupported import lookup

    return lookup(__name__, name)
