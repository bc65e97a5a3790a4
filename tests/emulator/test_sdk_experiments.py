"""The SDK's own Experiments flow against the emulator (issue 31 acceptance): `aiplatform.init(experiment=...,
experiment_tensorboard=...)` → `start_run` → `log_params` → `log_metrics` → `end_run` → `get_experiment_df()`,
in the three set-ups: the default (the SDK finds or makes the region's default TensorBoard), a TensorBoard
of the user's, and `experiment_tensorboard=False`. The real high-level SDK over REST; slow (its import)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from vtrain.emulator import Emulator, sleep_runner

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sdk() -> Iterator[tuple[Any, Emulator, dict[str, Any]]]:
    pytest.importorskip("pandas", reason="get_experiment_df needs pandas (dev extra)")
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    with Emulator(runner=sleep_runner(0.01)) as emu:
        init = dict(project="test-project", location="us-central1", api_transport="rest", api_endpoint=emu.url,
                    credentials=AnonymousCredentials())  # fmt: skip
        yield aiplatform, emu, init


def test_the_default_tensorboard_is_found_not_made_twice(sdk: tuple[Any, Emulator, dict[str, Any]]) -> None:
    aiplatform, emu, init = sdk
    aiplatform.init(experiment="exp-again-1", **init)
    aiplatform.init(experiment="exp-again-2", **init)
    defaults = [b for b in emu.tensorboards() if b.get("isDefault")]
    assert len(defaults) == 1


# Once `experiment_tensorboard=` names one, the SDK's later `init` calls google.auth.default() for it (metadata.py
# _get_global_tensorboard), which a machine without ADC lacks: tests/conftest.py clears it before each test.
@pytest.mark.parametrize("setup", ["default", "no-tensorboard", "own-tensorboard"])
def test_experiment_run_params_and_metrics_come_back_in_the_data_frame(
        sdk: tuple[Any, Emulator, dict[str, Any]], setup: str) -> None:  # fmt: skip
    aiplatform, emu, init = sdk
    experiment = f"exp-{setup}"
    if setup == "default":
        aiplatform.init(experiment=experiment, **init)
    elif setup == "own-tensorboard":
        aiplatform.init(**init)
        board = aiplatform.Tensorboard.create(display_name="mine")
        aiplatform.init(experiment=experiment, experiment_tensorboard=board, **init)
    else:
        aiplatform.init(experiment=experiment, experiment_tensorboard=False, **init)
    aiplatform.start_run("run-1")
    aiplatform.log_params({"lr": 0.01, "optimizer": "adam"})
    aiplatform.log_metrics({"loss": 0.25, "accuracy": 0.9})
    if setup != "no-tensorboard":
        for step in (1, 2):
            aiplatform.log_time_series_metrics({"loss": 1.0 / step}, step=step)
    aiplatform.end_run()
    aiplatform.start_run("run-2")
    aiplatform.log_params({"lr": 0.1})
    aiplatform.end_run()

    frame = aiplatform.get_experiment_df()
    rows = {r["run_name"]: r for r in frame.to_dict("records")}
    assert set(rows) == {"run-1", "run-2"}
    one = rows["run-1"]
    assert (one["experiment_name"], one["state"], one["param.lr"], one["param.optimizer"]) == (
        experiment, "COMPLETE", 0.01, "adam")
    assert (one["metric.loss"], one["metric.accuracy"]) == (0.25, 0.9)
    if setup != "no-tensorboard":
        assert one["time_series_metric.loss"] == 0.5  # the last step's value, read back from the TensorBoard
        series = aiplatform.ExperimentRun("run-1", experiment=experiment).get_time_series_data_frame()
        assert list(series["loss"]) == [1.0, 0.5]
    assert rows["run-2"]["param.lr"] == 0.1
    runs = aiplatform.ExperimentRun.list(experiment=experiment)
    assert sorted(r.name for r in runs) == ["run-1", "run-2"]
    assert experiment in [e.name for e in aiplatform.Experiment.list()]
    refused = [r for r in emu.requests if (r["status"] or 0) >= 400 and r["method"] != "GET"]
    assert refused == []  # only the SDK's look-ups before a create may miss
