"""Acceptance of issue 31, both flows at once: the keras template with a TensorBoard, `experiment`,
`experiment_run: r1` and a `model:` block, submitted with --wait to the emulator running real processes
(--run-jobs), ends with the run in `get_experiment_df()` (the trainer's params, its final loss), the loss
per epoch as the run's time series (`get_time_series_data_frame()`), and one model in Model Registry
whose artifactUri is the job's model dir, with its name, labels, serving image, aliases and its link in
`vtrain status`; a second identical submit makes no second model version. Everything is read back with the
high-level SDK over REST. (One job for both flows: each submit runs the trainer as a real TensorFlow process.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.emulator.test_emulated_run import PROJECT, emu, run  # noqa: F401 - emu is a fixture
from tests.helpers import write_job
from vtrain.emulator import Emulator

KERAS = REPO / "trainer_templates" / "keras"
MODEL_RE = r"^model (?:registered|not uploaded again): (projects/\d+/locations/us-central1/models/\d+)@(\d+)"

SA = f"trainer@{PROJECT}.iam.gserviceaccount.com"


@pytest.mark.slow
def test_a_keras_job_ends_in_experiments_with_its_series_and_in_model_registry(tmp_path: Path,
                                                                               emu: Emulator) -> None:  # noqa: F811
    pytest.importorskip("pandas", reason="get_experiment_df needs pandas (dev extra)")
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    job = write_job(tmp_path, f"""
        name: keras-after
        region: us-central1
        staging_bucket: gs://stage-bkt/s
        base_output_dir: gs://stage-bkt/out
        service_account: {SA}
        tensorboard: create
        experiment: churn
        experiment_run: r1
        trainer:
          package: {KERAS}
          module: trainer.task
          image: tf-cpu.2-17
          args: [--epochs=3, --steps-per-epoch=2, --batch-size=8, --learning-rate=0.01]
        cluster:
          chief: {{machine_type: n1-standard-4}}
        model: {{display_name: churn-classifier, serving_image: tf2-cpu.2-15, version_aliases: [candidate]}}
        """)
    code, out, err = run("submit", str(job), "--wait", "--poll", "0.05", "--api-endpoint", emu.url)
    assert code == 0, err
    assert "experiment run 'r1' created" in err and "tensorboard 'vtrain' created" in err, err
    first = re.search(MODEL_RE, out, re.M)
    assert first is not None and out[first.start():].startswith("model registered: "), out
    job_id = re.search(r"customJobs/(\d+)", out).group(1)  # type: ignore[union-attr]
    saved = tmp_path / "runs" / job_id / "model" / "saved_model.pb"
    assert saved.is_file()  # the trainer really exported a SavedModel where AIP_MODEL_DIR pointed
    log = run("logs", job_id, "--api-endpoint", emu.url)[1]
    assert "could not log" not in log, log

    aiplatform.init(project=PROJECT, location="us-central1", api_transport="rest", api_endpoint=emu.url,
                    credentials=AnonymousCredentials())  # fmt: skip
    (row,) = aiplatform.get_experiment_df("churn").to_dict("records")
    assert (row["run_name"], row["param.epochs"], row["param.batch-size"], row["param.learning-rate"]) == (
        "r1", 3, 8, 0.01), log
    series = aiplatform.ExperimentRun("r1", experiment="churn").get_time_series_data_frame()
    points = series.sort_values("step")[["step", "loss"]].to_dict("records")
    assert [p["step"] for p in points] == [1, 2, 3]  # one point per epoch, as metric_reporter reported it
    assert row["metric.loss"] == points[-1]["loss"] == row["time_series_metric.loss"] > 0

    code, again, err = run("submit", str(job), "--wait", "--poll", "0.05", "--api-endpoint", emu.url)
    assert code == 0, err
    assert "experiment run 'r1' found" in err, err
    second = re.search(MODEL_RE, again, re.M)
    assert second is not None and again[second.start():].startswith("model not uploaded again: "), again
    assert second.groups() == first.groups()
    models = aiplatform.Model.list()
    assert [m.resource_name for m in models] == [first.group(1)]
    model = models[0]
    assert model.uri == "gs://stage-bkt/out/model/"  # the job's AIP_MODEL_DIR (base_output_dir/model/)
    assert model.display_name == "churn-classifier" and model.labels["vtrain-job-id"] == job_id
    assert model.container_spec.image_uri == "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
    versions = aiplatform.ModelRegistry(model.resource_name).list_versions()
    assert [v.version_id for v in versions] == ["1"] and sorted(versions[0].version_aliases) == ["candidate",
                                                                                               "default"]
    code, status, _ = run("status", job_id, "--api-endpoint", emu.url)
    assert code == 0 and re.search(rf"^model +{first.group(1)}@1$", status, re.M), status
