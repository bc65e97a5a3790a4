"""vtrain.horovod's API in one process (a ring of one, as a one-replica job has): the names a Horovod TF2
script calls, the wrappers' contracts, and the clear refusals. The ring of two: test_horovod_local.py."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from vtrain.errors import HorovodUnsupported

# Skipped without TensorFlow, which is imported by the first test that needs it, not at collection (every
# pytest run, the ones that deselect these tests too, would pay for it).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")


@pytest.fixture
def tf() -> ModuleType:
    import tensorflow

    return tensorflow


@pytest.fixture
def hvd(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    # Set, so that importing vtrain.horovod.tensorflow leaves this test process's Keras choice alone.
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")
    import vtrain.horovod.tensorflow as module

    module.init()
    yield module
    module.shutdown()


def test_a_ring_of_one_answers_as_horovod_does(hvd: Any, tf: Any) -> None:
    assert hvd.is_initialized() and (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)
    assert (hvd.cross_rank(), hvd.cross_size(), hvd.mpi_enabled(), hvd.gloo_enabled()) == (0, 1, False, False)
    x = tf.constant([1.0, 2.0])
    assert hvd.allreduce(x).numpy().tolist() == [1.0, 2.0]
    assert hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=3.0).numpy().tolist() == [6.0, 12.0]
    assert hvd.allgather(tf.ones([2, 3])).shape == (2, 3)
    assert hvd.broadcast(x, root_rank=0).numpy().tolist() == [1.0, 2.0]
    assert hvd.broadcast_object({"a": 1}) == {"a": 1} and hvd.allgather_object(5) == [5]
    reduced, nothing = hvd.grouped_allreduce([x, None])
    assert reduced.numpy().tolist() == [1.0, 2.0] and nothing is None
    hvd.init()  # a second init changes nothing
    assert hvd.size() == 1


def test_what_is_not_there_fails_at_the_call(hvd: Any, tf: Any) -> None:
    x = tf.constant([1.0])
    with pytest.raises(HorovodUnsupported, match="Adasum reduction is not implemented"):
        hvd.allreduce(x, op=hvd.Adasum)
    with pytest.raises(HorovodUnsupported, match="process sets are not supported"):
        hvd.allreduce(x, process_set=object())
    with pytest.raises(HorovodUnsupported, match="every rank must take part in every collective"):
        hvd.join()
    with pytest.raises(HorovodUnsupported, match="an MPI communicator"):
        hvd.init(comm=[0, 1])
    with pytest.raises(ValueError, match="root_rank 1 is not a rank of this job"):
        hvd.broadcast(x, root_rank=1)
    with pytest.raises(ValueError, match="give op or the deprecated average, not both"):
        hvd.allreduce(x, average=True, op=hvd.Sum)


def test_before_init_the_ranks_are_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")
    import vtrain.horovod.tensorflow as hvd

    hvd.shutdown()
    with pytest.raises(Exception, match="has not been initialized; call hvd.init"):
        hvd.rank()


def test_the_tape_returns_the_tapes_gradients_in_their_structure(hvd: Any, tf: Any) -> None:
    v = {"a": tf.Variable(2.0), "b": tf.Variable([1.0, 3.0])}
    with tf.GradientTape() as tape:
        y = v["a"] ** 2 + tf.reduce_sum(v["b"] * 3.0)
    wrapped = hvd.DistributedGradientTape(tape)
    assert isinstance(wrapped, tf.GradientTape) and type(wrapped).__name__ == "GradientTape"
    grads = wrapped.gradient(y, v)
    assert float(grads["a"]) == 4.0 and grads["b"].numpy().tolist() == [3.0, 3.0]


@pytest.mark.parametrize("flavour", ["tf_keras", "keras"])
def test_the_optimizer_is_a_copy_of_its_class_that_still_steps(hvd: Any, tf: Any, flavour: str) -> None:
    keras = pytest.importorskip(flavour)
    original = keras.optimizers.SGD(learning_rate=0.5, momentum=0.25)
    wrapped = hvd.DistributedOptimizer(original)
    assert isinstance(wrapped, type(original)) and type(wrapped).__name__ == "SGD"
    assert wrapped.get_config() == original.get_config()
    var = tf.Variable(1.0)
    wrapped.apply_gradients([(tf.constant(2.0), var)])
    assert float(var.numpy()) == pytest.approx(0.0)
    with pytest.raises(HorovodUnsupported, match="backward_passes_per_step=2"):
        hvd.DistributedOptimizer(original, backward_passes_per_step=2)


def test_a_tf1_optimizer_is_refused(hvd: Any, tf: Any) -> None:
    with pytest.raises(HorovodUnsupported, match="TF1 tf.compat.v1.train optimizers are not supported"):
        hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))


def test_tf_keras_is_chosen_only_while_it_can_still_take_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    from vtrain.horovod import prefer_tf_keras

    pytest.importorskip("tf_keras")
    monkeypatch.delitem(__import__("sys").modules, "tf_keras")
    fresh: dict[str, str] = {}
    assert prefer_tf_keras(fresh) is True and fresh == {"TF_USE_LEGACY_KERAS": "1"}
    chosen = {"TF_USE_LEGACY_KERAS": "0"}
    assert prefer_tf_keras(chosen) is False and chosen == {"TF_USE_LEGACY_KERAS": "0"}


@pytest.mark.slow
def test_a_script_that_imports_tensorflow_first_still_gets_keras_2(tmp_path: Any) -> None:
    """Horovod's synthetic benchmark imports tensorflow, then horovod, then `from tensorflow.keras import
    applications`: tf.keras must be tf_keras there too, as for a script that imports horovod first."""
    import os
    import subprocess
    import sys

    pytest.importorskip("tf_keras")
    code = ("import tensorflow as tf\nimport vtrain.horovod.tensorflow as hvd\n"
            "from tensorflow.keras import applications, layers\n"
            "print(layers.Dense.__module__.split('.')[0], applications.MobileNetV3Small.__module__.split('.')[0])\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["tf_keras", "tf_keras"]


def test_init_after_the_first_tensor_says_to_call_it_first(monkeypatch: pytest.MonkeyPatch, tf: Any) -> None:
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")
    import vtrain.horovod.tensorflow as hvd

    hvd.shutdown()
    tf.constant(1.0)  # TensorFlow's context is running
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, '
                                    '"task": {"type": "worker", "index": 0}}')
    with pytest.raises(Exception, match=r"hvd.init\(\) must come before TensorFlow's first tensor, model or "
                                        r"strategy .*call it first, as Horovod's examples do"):
        hvd.init()
    assert not hvd.is_initialized()


def test_a_ring_of_one_checks_and_types_as_a_ring_of_two(hvd: Any, tf: Any) -> None:
    """Issue 46, class 9 (tests/horovod/test_upstream.py compares every probe with a 2-rank run's)."""
    with pytest.raises(TypeError, match="hvd.allreduce: cannot reduce complex64 tensors"):
        hvd.allreduce(tf.constant([1j], tf.complex64))
    with pytest.raises(TypeError, match="cannot reduce string tensors"):
        hvd.allreduce(tf.constant(["a"]))
    with pytest.raises(ValueError, match="hvd.allgather needs a tensor of rank >= 1"):
        hvd.allgather(tf.constant(1.0))
    fp16 = hvd.allreduce(tf.constant([1.0001]), compression=hvd.Compression.fp16)
    assert fp16.dtype == tf.float32 and fp16.numpy().tolist() == [1.0]  # compressed, as with 2 replicas
    scaled = hvd.allreduce(tf.constant([10, 20]), op=hvd.Sum, prescale_factor=0.19, postscale_factor=2.0)
    assert scaled.numpy().tolist() == [2, 6]  # 10 * 0.19 = 1.9 -> 1, then * 2; the factor was cast to int (0)
    big = hvd.allreduce(tf.constant([2**63 + 5], tf.uint64), op=hvd.Max)
    assert big.dtype == tf.uint64 and big.numpy().tolist() == [2**63 + 5]
    assert [int(t) for t in (hvd.rank_op(), hvd.size_op(), hvd.local_rank_op(), hvd.local_size_op())] == [0, 1, 0, 1]


def test_gradients_of_the_collectives_with_one_replica(hvd: Any, tf: Any) -> None:
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape(persistent=True) as tape:
        total = hvd.allreduce(v, op=hvd.Sum, postscale_factor=3.0)
        gathered = hvd.allgather(v * 1.0)
        sent = hvd.broadcast(v * 1.0, root_rank=0)
    assert tape.gradient(total, v).numpy().tolist() == [3.0, 3.0]  # the same allreduce of the upstream gradient
    assert tape.gradient(gathered, v, tf.constant([4.0, 5.0])).numpy().tolist() == [4.0, 5.0]
    assert tape.gradient(sent, v).numpy().tolist() == [1.0, 1.0]


def test_an_object_goes_through_cloudpickle_where_it_is_installed(hvd: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    if importlib.util.find_spec("cloudpickle") is not None:
        assert hvd.broadcast_object(lambda x: x + 1)(41) == 42 and hvd.allgather_object(lambda: 7)[0]() == 7
    monkeypatch.setitem(__import__("sys").modules, "cloudpickle", None)  # as where it is not installed
    with pytest.raises(Exception, match=r"hvd.broadcast_object: the object could not be serialized, so no rank "
                                        r"received it: rank 0: AttributeError: .*install cloudpickle") as info:
        hvd.broadcast_object(lambda x: x + 1)
    assert type(info.value).__name__ == "PicklingError"
    with pytest.raises(Exception, match="rank 0: TypeError: cannot pickle '_thread.lock' object"):
        hvd.allgather_object(threading.Lock())
    assert hvd.allgather_object({"a": 1}) == [{"a": 1}]


def test_partial_optimizer_arguments_are_refused_with_the_reason(hvd: Any, tf: Any) -> None:
    keras = pytest.importorskip("tf_keras")

    def tf_variable() -> Any:
        return tf.Variable(1.0)

    import vtrain.horovod.keras as hvd_keras

    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    with pytest.raises(HorovodUnsupported, match="register_local_var is not supported: .*PartialDistributedGradient"):
        optimizer.register_local_var(tf_variable())
    with pytest.raises(HorovodUnsupported, match="PartialDistributedOptimizer is not supported"):
        hvd_keras.PartialDistributedOptimizer(keras.optimizers.SGD(0.1), local_layers=[])
    with pytest.raises(HorovodUnsupported, match="BestModelCheckpoint is not supported"):
        hvd_keras.callbacks.BestModelCheckpoint(monitor="val_loss")
