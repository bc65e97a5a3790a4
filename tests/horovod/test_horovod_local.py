"""Horovod TF2 scripts, written for real Horovod, run under `vtrain local` as 2 replicas after changing only
their import line (issue 34): both ranks end with identical weights, and the losses and weights match a
MultiWorkerMirrored run of the same model and data. The API check runs every collective over the ring of 2. Two jobs
in all:
the shared Horovod job of conftest.py, one MultiWorkerMirrored job both twins."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tests.horovod.conftest import run

np = pytest.importorskip("numpy")
# Not imported here: TensorFlow at collection would cost every pytest run, the ones that deselect these tests too.
pytestmark = pytest.mark.skipif(not all(importlib.util.find_spec(name) for name in ("tensorflow", "tf_keras")),
                                reason="TensorFlow and tf_keras are not installed")


@pytest.fixture(scope="module")
def twin_run(tmp_path_factory: pytest.TempPathFactory, cache: Path, migrated: Path) -> Path:
    """One MultiWorkerMirrored job trains both examples' twins."""
    return run(tmp_path_factory.mktemp("twin"), cache, migrated, "twin_keras,twin_tape", "multi_worker_mirrored")


def ranks(folder: Path, script: str) -> list[dict[str, Any]]:
    return [dict(np.load(folder / f"{script}-rank{r}.npz")) for r in (0, 1)]


def weights(record: dict[str, Any]) -> list[Any]:
    return [record[f"w{i}"] for i in range(sum(k.startswith("w") for k in record))]


@pytest.mark.slow
@pytest.mark.parametrize("script", ["keras_mnist", "tape_mnist"])
def test_a_horovod_example_trains_as_multi_worker_mirrored_does(horovod_run: Path, twin_run: Path, script: str) -> None:
    hvd = ranks(horovod_run, script)
    twin = ranks(twin_run, f"twin_{script.split('_')[0]}")
    for a, b in zip(weights(hvd[0]), weights(hvd[1]), strict=True):  # both ranks hold one model
        assert np.array_equal(a, b)
    for a, b in zip(weights(hvd[0]), weights(twin[0]), strict=True):  # ... the one MultiWorkerMirrored trains
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # model.fit's epoch losses are averaged over the ranks (MetricAverageCallback); the tape's are each rank's
    # own batch, so their mean is the global batch's loss, which is what MultiWorkerMirrored reports.
    losses = (hvd[0]["losses"] + hvd[1]["losses"]) / 2 if script == "tape_mnist" else hvd[0]["losses"]
    np.testing.assert_allclose(losses, twin[0]["losses"], rtol=1e-5)
    assert losses[-1] < losses[0]  # it learned
    assert len(losses) == (3 if script == "keras_mnist" else 20)


@pytest.mark.slow
def test_every_collective_over_a_ring_of_two(horovod_run: Path) -> None:
    got = [json.loads((horovod_run / f"api-rank{r}.json").read_text()) for r in (0, 1)]
    assert [g["local"] for g in got] == [[0, 1, 0, 2], [0, 1, 1, 2]]  # local rank/size, cross rank/size
    for g in got:  # rank r sent [1, 2, 3] * (r + 1)
        assert (g["average"], g["sum"], g["max"], g["fp16"]) == ([1.5, 3, 4.5], [3, 6, 9], [2, 4, 6], [1.5, 3, 4.5])
        assert (g["scaled"], g["int_sum"]) == ([3, 6, 9], [3, 20])
        assert g["allgather"] == [[0, 0], [1, 1], [1, 1]]  # rank order, 1 row from rank 0 and 2 from rank 1
        assert g["broadcast"] == [10, 1] and g["variable"] == [0, 0]
        assert g["broadcast_object"] == {"from": 0, "text": "é"}
        assert g["allgather_object"] == [["rank", 0], ["rank", 1]]
        assert g["sparse"] == [[1, 1], [2, 2]]  # IndexedSlices: each rank's row, gathered
        assert (g["graph_sum"], g["graph_sum2"], g["graph_rows"]) == ([3, 6, 9], [6, 12, 18], [[1, 2, 3], [2, 4, 6]])
        assert g["join"].startswith("vtrain.horovod: hvd.join is not supported")
        assert g["keras3"]["optimizer"].startswith("keras.")  # Keras 3's own optimizer, wrapped
    assert got[0]["keras3"]["weights"] == got[1]["keras3"]["weights"]  # one model on both ranks
