"""The chief logs its Experiment Run's params and final metrics with the real SDK (issue 31 item 1): a run
made as submit makes it, in the emulator, read back with `get_experiment_df()`; with a TensorBoard behind the
run, each reported metric's series too, read back with `get_time_series_data_frame()`; a logging error is one
line, never the training's failure; a trainer process without a run never imports the SDK."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from vtrain.emulator import Emulator
from vtrain.runtime import experiment_log
from vtrain.runtime.experiment_log import ENDPOINT_ENV, EXPERIMENT_ENV, RUN_ENV, params_of, run_of

CTX = "projects/test-project/locations/us-central1/metadataStores/default/contexts"


def test_names_and_params_are_read_as_vertex_and_the_sdk_give_them() -> None:
    env = {EXPERIMENT_ENV: f"{CTX}/churn", RUN_ENV: f"{CTX}/churn-r1"}
    assert run_of(env) == ("test-project", "us-central1", "churn", "r1")
    assert run_of({**env, RUN_ENV: "r1"}) == ("test-project", "us-central1", "churn", "r1")
    assert run_of({RUN_ENV: "r1"}) is None and run_of({EXPERIMENT_ENV: f"{CTX}/churn"}) is None
    assert params_of(["data.csv", "--lr=0.01", "--epochs", "3", "--opt=adam", "--fast", "--x"]) == {
        "lr": 0.01, "epochs": 3, "opt": "adam", "fast": True, "x": True}


@pytest.fixture()
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's reports so far forgotten (the module keeps them for the exit hook)."""
    for name in ("_metrics", "_reports", "_series", "_walls"):
        monkeypatch.setattr(experiment_log, name, {})


@pytest.mark.usefixtures("fresh")
def test_reports_become_points_at_their_step_or_their_number() -> None:
    experiment_log.record_metric("acc", 0.5)
    experiment_log.record_metric("acc", 0.75)
    for loss, step in ((0.9, 1), (0.5, 2), (0.4, 2)):
        experiment_log.record_metric("loss", loss, step, wall_time=100.0 + step)
    assert experiment_log._series == {1: {"acc": 0.5, "loss": 0.9}, 2: {"acc": 0.75, "loss": 0.4}}
    assert experiment_log._metrics == {"loss": 0.4, "acc": 0.75}
    assert experiment_log._walls == {1: 101.0, 2: 102.0}  # the latest report at the step


@pytest.mark.usefixtures("fresh")
def test_series_and_metrics_are_bounded_a_long_run_thinned_to_its_whole_shape() -> None:
    steps = experiment_log.MAX_STEPS * 5
    for step in range(1, steps + 1):
        experiment_log.record_metric("loss", 1.0 / step, step)
    kept = sorted(experiment_log._series)
    assert len(kept) <= experiment_log.MAX_STEPS and len(experiment_log._walls) == len(kept)
    assert kept[0] < steps / 10 and kept[-1] == steps  # the start and the last step are still there
    for i in range(experiment_log.MAX_METRICS + 5):
        experiment_log.record_metric(f"m{i}", 1.0, 1)
    assert len(experiment_log._metrics) == experiment_log.MAX_METRICS


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with Emulator(pending_seconds=0.01) as e:
        yield e


@pytest.mark.slow
def test_the_chief_logs_params_and_final_metrics_to_the_run(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(project="test-project", location="us-central1", api_transport="rest", api_endpoint=emu.url,
                    credentials=AnonymousCredentials())  # fmt: skip
    aiplatform.Experiment.create("churn")
    aiplatform.ExperimentRun.create("r1", experiment="churn")
    for name in ("_metrics", "_reports", "_series", "_walls"):
        monkeypatch.setattr(experiment_log, name, {})
    for loss in (0.9, 0.5, 0.25):
        experiment_log.record_metric("loss", loss)
    experiment_log.record_metric("accuracy", 0.75)
    env = {EXPERIMENT_ENV: f"{CTX}/churn", RUN_ENV: f"{CTX}/churn-r1", ENDPOINT_ENV: emu.url}
    assert experiment_log.flush(env, ["--lr=0.01", "--optimizer", "adam"])
    (row,) = aiplatform.get_experiment_df("churn").to_dict("records")
    assert (row["run_name"], row["param.lr"], row["param.optimizer"]) == ("r1", 0.01, "adam")
    assert (row["metric.loss"], row["metric.accuracy"]) == (0.25, 0.75)
    assert not any(r["path"].endswith(":write") for r in emu.requests)  # no TensorBoard behind it: no series


@pytest.mark.slow
@pytest.mark.usefixtures("fresh")
def test_with_a_tensorboard_behind_the_run_each_metric_is_a_series_by_step(emu: Emulator) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    init = dict(project="test-project", location="us-central1", api_transport="rest", api_endpoint=emu.url,
                credentials=AnonymousCredentials())  # fmt: skip
    aiplatform.init(experiment="churn-tb", **init)  # the default TensorBoard backs the experiment's runs
    aiplatform.start_run("r1")
    aiplatform.end_run()
    aiplatform.init(**init)
    for epoch, loss in enumerate((0.9, 0.5, 0.25), start=1):
        experiment_log.record_metric("loss", loss, epoch)
    experiment_log.record_metric("accuracy", 0.75, 3)
    env = {EXPERIMENT_ENV: f"{CTX}/churn-tb", RUN_ENV: f"{CTX}/churn-tb-r1", ENDPOINT_ENV: emu.url}
    assert experiment_log.flush(env, [])
    frame = aiplatform.ExperimentRun("r1", experiment="churn-tb").get_time_series_data_frame()
    rows = frame.sort_values("step").to_dict("records")
    assert [(r["step"], r["loss"]) for r in rows] == [(1, 0.9), (2, 0.5), (3, 0.25)]
    assert rows[-1]["accuracy"] == 0.75
    (row,) = aiplatform.get_experiment_df("churn-tb").to_dict("records")
    assert (row["metric.loss"], row["time_series_metric.loss"]) == (0.25, 0.25)


def test_a_logging_error_is_one_line_not_a_failure(emu: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    env = {EXPERIMENT_ENV: f"{CTX}/nope", RUN_ENV: f"{CTX}/nope-r\x1b[31m1", ENDPOINT_ENV: emu.url}
    assert experiment_log.flush(env, []) is False
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("vtrain.runtime: could not log to the experiment run 'r") and "\x1b" not in line


def test_a_trainer_without_a_run_never_imports_the_sdk(tmp_path: Any) -> None:
    code = ("import sys; from vtrain import runtime; runtime.report_metric('loss', 1.0); "
            "print('google.cloud.aiplatform' in sys.modules)")  # fmt: skip
    env = {"CLOUD_ML_HP_METRIC_FILE": str(tmp_path / "m"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
