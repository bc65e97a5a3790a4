"""Issue 30, class 6: the "Keras 3 ... model.fit fails" warning, once per job and only when it applies.

TensorFlow >= 2.16 imports Keras 3 by itself, so the old check (`keras` in sys.modules) warned in
every replica of every multi-worker run, the quickstart's too, which trains with tf_keras through
`vtrain.runtime.keras()` and succeeds. No TensorFlow here: the rule is a pure function of the
decision and the trainer's entry module.
"""

from __future__ import annotations

import sys
from types import ModuleType

import pytest

from vtrain.runtime.decision import Decision
from vtrain.runtime.tfsetup import keras3_warning

CHIEF = Decision("multi_worker_mirrored", "TF_CONFIG", "chief", 0, True, 3)
WORKER = Decision("multi_worker_mirrored", "TF_CONFIG", "worker", 0, False, 3)


def entry(**held: object) -> ModuleType:
    main = ModuleType("__main__")
    vars(main).update(held)
    return main


def keras_module(version: str, name: str = "keras") -> ModuleType:
    module = ModuleType(name)
    module.__version__ = version  # type: ignore[attr-defined]
    return module


@pytest.fixture(autouse=True)
def _keras3_in_sys_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "keras", keras_module("3.15.1"))  # as TensorFlow 2.16+ leaves it
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)


def test_a_trainer_that_takes_vtrains_keras_gets_no_warning() -> None:
    assert keras3_warning(CHIEF, entry(runtime=ModuleType("vtrain.runtime"))) is None  # the quickstart template


def test_a_trainer_that_holds_keras_3_is_warned_by_the_chief_only() -> None:
    main = entry(keras=keras_module("3.15.1"))
    said = keras3_warning(CHIEF, main)
    assert said is not None and "keras-team/keras#20585" in said and "multi_worker_mirrored" in said
    assert keras3_warning(WORKER, main) is None  # once per job, not once per replica
    assert keras3_warning(Decision("mirrored", "GPUs", "chief", 0, True, 1), main) is None  # one machine: fit works


def test_keras_2_tf_keras_and_the_legacy_switch_get_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    assert keras3_warning(CHIEF, entry(keras=keras_module("2.15.0"))) is None
    assert keras3_warning(CHIEF, entry(keras=keras_module("2.17.0", "tf_keras"))) is None
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    assert keras3_warning(CHIEF, entry(keras=keras_module("3.15.1"))) is None
