"""Horovod v0.28.1's TF2 tests as vtrain.horovod's specification (issue 45): every upstream test is covered by one
of this project's checks, run on 2 ranks (trainer/conformance.py in the shared job of conftest.py), or left out in
vtrain/horovod/upstream.py's one list with its reason; every public Horovod name is implemented or refused with a
reason; and what 2 replicas refuse or compute, 1 replica refuses or computes alike (issue 46, class 9)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from vtrain.errors import HorovodUnsupported
from vtrain.horovod import upstream
from vtrain.horovod.unsupported import ARGUMENTS, REASONS

TRAINER = Path(__file__).resolve().parents[1] / "data" / "trainers" / "horovod" / "trainer"
has_tf = pytest.mark.skipif(not all(importlib.util.find_spec(name) for name in ("tensorflow", "tf_keras")),
                            reason="TensorFlow and tf_keras are not installed")


# --------------------------------------------------------------------------- the one list (no TensorFlow)


def test_every_upstream_test_is_covered_or_left_out_once() -> None:
    assert not set(upstream.COVERED) & set(upstream.LEFT_OUT)
    counts = Counter(test.split("::")[0] for test in [*upstream.COVERED, *upstream.LEFT_OUT])
    assert counts == upstream.TEST_COUNTS  # 143 + 11 test functions at v0.28.1
    assert (len(upstream.COVERED), len(upstream.LEFT_OUT)) == (60, 94)


def test_a_left_out_test_names_a_gpu_or_a_refusal_the_guide_lists() -> None:
    for test, key in upstream.LEFT_OUT.items():
        assert key == upstream.GPU or key in REASONS or key in ARGUMENTS, test
        assert upstream.reason(key)
    gpu = [t for t, k in upstream.LEFT_OUT.items() if k == upstream.GPU]
    assert all("gpu" in t for t in gpu), [t for t in gpu if "gpu" not in t]
    assert not [t for t in upstream.COVERED if t.endswith("_gpu")]


@pytest.mark.slow  # the first of them imports TensorFlow and tf_keras
@has_tf
@pytest.mark.parametrize("module", sorted(upstream.API))
def test_every_public_horovod_name_is_implemented_or_refused_with_its_reason(module: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    ours = importlib.import_module(upstream.MODULES[module])
    for name in upstream.API[module]:
        implemented = name in getattr(ours, "__all__", ()) or name == "callbacks"
        if implemented:
            assert name not in REASONS, f"{module}.{name} is both implemented and refused"
            getattr(ours, name)
            continue
        assert name in REASONS, f"{module}.{name} is neither implemented nor refused"
        with pytest.raises(HorovodUnsupported, match=r"vtrain.horovod: hvd\.\w+ is not supported: .+"):
            getattr(ours, name)()


# --------------------------------------------------------------------------- the 2-rank run


@pytest.mark.slow
@has_tf
def test_the_run_made_exactly_the_checks_the_list_names(conformance: list[dict[str, Any]]) -> None:
    for report in conformance:
        assert set(report["checks"]) == set(upstream.COVERED.values())


@pytest.mark.slow
@has_tf
@pytest.mark.parametrize("test", sorted(upstream.COVERED))
def test_an_upstream_behaviour_holds_on_2_ranks(conformance: list[dict[str, Any]], test: str) -> None:
    name = upstream.COVERED[test]
    for rank, report in enumerate(conformance):
        outcome = report["checks"][name]
        assert outcome["ok"], f"rank {rank}, {name}: {outcome['error']}"


@pytest.mark.slow
@has_tf
def test_a_collective_bounded_by_the_timeout_ends_when_a_live_peer_never_joins(
        conformance: list[dict[str, Any]]) -> None:
    waiting = conformance[0]["timeouts"]  # rank 0 called allreduce; rank 1, alive, slept 10 s
    assert waiting["outcome"].startswith("DeadlineExceededError"), waiting
    assert waiting["timeout"] <= waiting["waited"] < waiting["timeout"] + 5, waiting
    late = conformance[1]["timeouts"]  # its collective then fails at once: the ring ended with the timeout
    assert late["outcome"].startswith("DeadlineExceededError") and late["waited"] < late["timeout"] + 5, late


@pytest.mark.slow
@has_tf
def test_a_64_mb_object_travels_in_a_small_multiple_of_its_size(conformance: list[dict[str, Any]]) -> None:
    for rank, report in enumerate(conformance):
        memory = report["memory"]
        size = memory["object_bytes"]
        # the root's bytes, or a receiver's buffer and its object: ~1.5x and ~3x measured (issue 46: ~19x)
        assert memory["broadcast_peak_bytes"] < 4 * size, (rank, memory)
        # every rank's bytes and objects (2 of them), plus this rank's own bytes: ~4x measured
        assert memory["allgather_peak_bytes"] < 6 * size, (rank, memory)


# --------------------------------------------------------------------------- 1 replica answers as 2 do


def _probes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("horovod_probes", TRAINER / "probes.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@has_tf
def test_one_replica_refuses_and_computes_what_two_do(conformance: list[dict[str, Any]],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")
    import tensorflow as tf

    import vtrain.horovod.tensorflow as hvd

    hvd.shutdown()
    hvd.init()
    try:
        alone = _probes().run(hvd, tf, 0)
    finally:
        hvd.shutdown()
    for report in conformance:
        assert report["probes"] == alone
    assert alone["uint64 Max(2**63+5, 1)"] == "uint64 [9223372036854775813]"
    assert alone["int prescale 0.19"] == "int32 [1, 3]"
    assert alone["fp16 compression"] == "float32 [1.0, 3.140625]"  # compressed with 1 replica too
    assert alone["complex allreduce"].startswith("TypeError: hvd.allreduce: cannot reduce complex64 tensors")
    assert alone["scalar allgather"].startswith("ValueError: hvd.allgather needs a tensor of rank >= 1")
    cloudpickle = "cloudpickle" in sys.modules or importlib.util.find_spec("cloudpickle") is not None
    lambda_outcome = alone["lambda broadcast_object"]
    assert lambda_outcome == "42" if cloudpickle else lambda_outcome.startswith("PicklingError: ")
