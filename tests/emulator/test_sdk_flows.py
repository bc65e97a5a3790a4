"""python-aiplatform's own system-test flows (tests/system/aiplatform in googleapis/python-aiplatform:
test_model_upload, test_model_version_management, test_experiments, test_metadata), driven with the real SDK
over REST against the emulator and gcp-storage-emulator: the calls those tests make and what they assert,
in this project's words (issue 45 part 2).

Left out, as the emulator serves none of it: endpoints and deployment (`model.deploy`, `endpoint.predict`),
pipeline jobs, `log_model` (sklearn). Changed: `staging_bucket` is given to `init` (the bucket the SDK makes
by itself fails its ownership check on the storage emulator), so the tests do not assert its generated name;
resource names carry the project number, as Vertex's do. Slow: the high-level SDK's import and many calls."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, page_blocks
from tests.helpers import MakeEmulator
from vtrain.emulator import Emulator, sleep_runner

pytestmark = pytest.mark.slow

PROJECT = "test-project"
LOCATION = "us-central1"
TF_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


class Sdk:
    def __init__(self, aiplatform: Any, emu: Emulator, gcs: Any, tmp_path: Path) -> None:
        from google.auth.credentials import AnonymousCredentials

        self.aiplatform, self.emu, self.gcs, self.tmp_path = aiplatform, emu, gcs, tmp_path
        self.init = dict(project=PROJECT, location=LOCATION, api_transport="rest", api_endpoint=emu.url,
                         credentials=AnonymousCredentials(), staging_bucket="gs://stage-bkt")  # fmt: skip
        aiplatform.init(**self.init)

    def xgboost_file(self) -> str:
        """A model file as the system tests download one (model.bst): the emulator never loads it."""
        path = self.tmp_path / "my_model.xgb"
        path.write_bytes(b"xgboost booster")
        return str(path)

    def refused(self) -> list[dict[str, Any]]:
        """Every request the emulator refused, but the SDK's look-ups before a create (a GET's 404)."""
        return [r for r in self.emu.requests if (r["status"] or 0) >= 400 and not (r["method"] == "GET"
                                                                                   and r["status"] == 404)]


@pytest.fixture
def sdk(make_emulator: MakeEmulator, bucket: Any, tmp_path: Path) -> Iterator[Sdk]:
    from google.cloud import aiplatform

    yield Sdk(aiplatform, make_emulator(sleep_runner(0.01), pending_seconds=0.01), bucket, tmp_path)


@pytest.fixture
def throwaway_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The emulator guide's throwaway service-account key, made by the page's own code, as GOOGLE_APPLICATION_
    CREDENTIALS: what google.auth.default() finds when the SDK asks it (see the guide)."""
    [script] = [b for b in page_blocks(REPO / "docs" / "guides" / "emulator.md", "python") if "emulator_key.py" in b]
    monkeypatch.chdir(tmp_path)
    exec(compile(script, "emulator_key.py", "exec"), {})
    key = tmp_path / "emulator-key.json"
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    return key


def test_model_upload_with_default_arguments_then_update(sdk: Sdk) -> None:
    """test_model_upload: upload_xgboost_model_file with its defaults, then Model.update."""
    aiplatform = sdk.aiplatform
    model = aiplatform.Model.upload_xgboost_model_file(model_file_path=sdk.xgboost_file())
    assert (model.version_id, model.version_aliases) == ("1", ["default"])
    staged = model.uri.removeprefix("gs://stage-bkt/")
    assert f"{staged}/model.bst" in sdk.gcs.object_names("stage-bkt")  # the SDK staged it; the emulator read it
    model = model.update(display_name="new_name", description="new_description", labels={"my_label": "updated"})
    assert (model.display_name, model.description, model.labels) == ("new_name", "new_description",
                                                                      {"my_label": "updated"})
    again = aiplatform.Model(model.resource_name)
    assert (again.display_name, again.description, again.labels) == ("new_name", "new_description",
                                                                      {"my_label": "updated"})
    # Model.upload with its default arguments: a SavedModel directory and a prebuilt TensorFlow image.
    sdk.gcs.client().bucket("stage-bkt").blob("tf/model/saved_model.pb").upload_from_string(b"saved model")
    tf = aiplatform.Model.upload(display_name="tf", artifact_uri="gs://stage-bkt/tf/model",
                                 serving_container_image_uri=TF_IMAGE)
    assert (tf.version_aliases, tf.uri, tf.container_spec.image_uri) == (["default"], "gs://stage-bkt/tf/model",
                                                                         TF_IMAGE)
    uploads = [r["body"] for r in sdk.emu.requests if r["path"].endswith("/models:upload")]
    assert [u["model"]["versionAliases"] for u in uploads] == [["default"], ["default"]]  # what the SDK sends
    assert {m.display_name for m in aiplatform.Model.list()} == {"new_name", "tf"}
    assert sdk.refused() == []


def test_model_version_management(sdk: Sdk) -> None:
    """test_model_version_management: a model ID, aliases, a second version that is not the default, the
    versioning registry, aliases added and removed, a version deleted."""
    from google.api_core.exceptions import BadRequest
    from google.cloud.aiplatform.models import ModelRegistry

    aiplatform = sdk.aiplatform
    model_id = "my_model_id0123456789abcdef"
    version_aliases = ["system-test-model", "testing"]
    model = aiplatform.Model.upload_xgboost_model_file(model_file_path=sdk.xgboost_file(),
                                                       version_aliases=version_aliases, model_id=model_id,
                                                       version_description="My description")  # fmt: skip
    assert model.version_description == "My description"
    assert model.version_aliases == version_aliases == ["system-test-model", "testing", "default"]
    model2 = aiplatform.Model.upload_xgboost_model_file(model_file_path=sdk.xgboost_file(), parent_model=model_id,
                                                        is_default_version=False)  # fmt: skip
    assert (model2.version_id, model2.resource_name, model2.version_aliases) == ("2", model.resource_name, [])

    info = model2.versioning_registry.get_version_info("testing")
    listed = model2.versioning_registry.list_versions()
    assert len(listed) == 2 and info.version_id == listed[0].version_id == model.version_id
    assert info.version_aliases == listed[0].version_aliases == model.version_aliases
    assert info.version_description == listed[0].version_description == model.version_description
    assert info.model_display_name == listed[0].model_display_name == model.display_name
    assert info.version_update_time == listed[0].version_update_time == model.version_update_time
    clone = model2.versioning_registry.get_model()
    assert (clone.resource_name, clone.version_id, clone.name) == (model.resource_name, model.version_id,
                                                                   model.name)

    registry = ModelRegistry(model)
    registry.add_version_aliases(["new-alias"], "default")
    registry.remove_version_aliases(["testing"], "new-alias")
    assert "testing" not in registry.get_model("new-alias").version_aliases
    with pytest.raises(BadRequest, match="is the default version"):  # as Vertex: make another the default first
        registry.delete_version("1")
    registry.delete_version("2")
    assert "2" not in [v.version_id for v in registry.list_versions()]
    with pytest.raises(BadRequest, match="is the only version"):
        registry.delete_version("default")
    registry.update_version("1", version_description="better", labels={"stage": "prod"})
    one = registry.get_model("1")
    assert (one.version_description, one.labels) == ("better", {"stage": "prod"})


def test_experiments_with_a_tensorboard_runs_artifacts_and_executions(sdk: Sdk, throwaway_key: Path) -> None:
    """test_experiments: an experiment backed by a TensorBoard of its own, runs resumed by later `init`s that
    name the experiment only (the SDK then calls google.auth.default(): the guide's throwaway key answers it),
    params, metrics, time series, classification metrics, artifacts, an execution with its input and output
    artifacts (a Model Registry model among them), the data frame, and the deletes."""
    pytest.importorskip("pandas", reason="get_experiment_df needs pandas (dev extra)")
    from google.api_core.exceptions import NotFound
    from google.cloud.aiplatform.metadata.schema.google import artifact_schema
    from google.cloud.aiplatform.utils import rest_utils

    aiplatform = sdk.aiplatform
    name, run_name = "tmpvrtxsdk-e2e-experiment", "run-1"
    init = {k: v for k, v in sdk.init.items() if k != "staging_bucket"}
    running, complete = aiplatform.gapic.Execution.State.RUNNING, aiplatform.gapic.Execution.State.COMPLETE
    board = aiplatform.Tensorboard.create(project=PROJECT, location=LOCATION, display_name=name)
    aiplatform.init(experiment=name, experiment_tensorboard=board, **init)
    assert aiplatform.Experiment(experiment_name=name, project=PROJECT, location=LOCATION).name == name

    aiplatform.init(experiment=name, **init)  # google.auth.default(): the throwaway key
    assert aiplatform.start_run(run_name).name == run_name
    run = aiplatform.ExperimentRun(run_name=run_name, experiment=name, project=PROJECT, location=LOCATION)
    assert (run.name, run.state) == (run_name, running)
    assert any(e.name == name for e in aiplatform.Experiment.list(project=PROJECT, location=LOCATION))
    assert [e.name for e in aiplatform.Experiment.list(filter=f"display_name = {name}")] == [name]
    assert aiplatform.Experiment.list(filter="display_name = not_mathcing_filter_name") == []

    params, metrics = {"sdk-param-test-1": 0.1, "sdk-param-test-2": 0.2}, {"sdk-metric-test-1": 0.8,
                                                                           "sdk-metric-test-2": 100.0}
    aiplatform.init(experiment=name, **init)
    aiplatform.start_run(run_name, resume=True)
    aiplatform.log_params(params)
    aiplatform.log_metrics(metrics)
    run = aiplatform.ExperimentRun(run_name=run_name, experiment=name)
    assert (run.get_params(), run.get_metrics()) == (params, metrics)
    for i in range(5):
        aiplatform.log_time_series_metrics({"accuracy": i})
    series = run.get_time_series_data_frame()[["accuracy", "step"]].to_dict("list")
    assert series == {"step": [1, 2, 3, 4, 5], "accuracy": [0.0, 1.0, 2.0, 3.0, 4.0]}

    confusion = {"display_name": "my-classification-metrics", "labels": ["cat", "dog"], "matrix": [[9, 1], [1, 9]],
                 "fpr": [0.1, 0.5, 0.9], "tpr": [0.1, 0.7, 0.9], "threshold": [0.9, 0.5, 0.1]}
    made = aiplatform.log_classification_metrics(**confusion)
    assert isinstance(made, artifact_schema.ClassificationMetrics)
    read = run.get_classification_metrics()[0]
    metric_artifact = aiplatform.Artifact(read.pop("id"))
    assert read == confusion
    metric_artifact.delete()

    ds = aiplatform.Artifact.create(schema_title="system.Dataset", resource_id="ds-artifact", uri="gs://ds/uri",
                                    project=PROJECT, location=LOCATION)  # fmt: skip
    found = aiplatform.Artifact.get_with_uri(uri="gs://ds/uri", project=PROJECT, location=LOCATION)
    assert (found.uri, found.name) == ("gs://ds/uri", "ds-artifact")
    with aiplatform.start_execution(schema_title="system.ContainerExecution", resource_id="an-execution") as run_it:
        run_it.assign_input_artifacts([aiplatform.Artifact(artifact_name="ds-artifact")])
        model = aiplatform.Artifact.create(schema_title="system.Model")
        vertex_model = aiplatform.Model.upload_xgboost_model_file(display_name="model",
                                                                  model_file_path=sdk.xgboost_file())  # fmt: skip
        run_it.assign_output_artifacts([model, vertex_model])
    assert [a.name for a in run_it.get_input_artifacts()] == [ds.name]
    outputs = sorted(run_it.get_output_artifacts(), key=lambda a: a.schema_title, reverse=True)
    assert outputs[0].name == model.name  # system.Model, then google.VertexModel
    assert outputs[1].uri == rest_utils.make_gcp_resource_rest_url(resource=vertex_model)
    run = aiplatform.ExperimentRun(run_name=run_name, experiment=name)
    assert run.get_executions()[0].name == run_it.name
    artifacts = sorted(run.get_artifacts(), key=lambda a: a.schema_title, reverse=True)
    assert artifacts.pop().uri == rest_utils.make_gcp_resource_rest_url(resource=vertex_model)
    assert sorted(a.name for a in artifacts) == sorted([ds.name, model.name, f"{name}-{run_name}-tb-run"])

    aiplatform.init(experiment=name, **init)
    aiplatform.start_run(run_name, resume=True)
    aiplatform.end_run()
    assert aiplatform.ExperimentRun(run_name=run_name, experiment=name).state == complete
    with aiplatform.start_run("run-2") as second:
        second.log_params({"sdk-param-test-1": 0.2, "sdk-param-test-2": 0.4})
        second.log_metrics({"sdk-metric-test-1": 1.6, "sdk-metric-test-2": 200.0})
        assert second.state == running
    assert second.state == complete

    rows = {r["run_name"]: r for r in aiplatform.get_experiment_df().to_dict("records")}
    assert set(rows) == {run_name, "run-2"}
    one = rows[run_name]
    assert (one["experiment_name"], one["state"], one["run_type"]) == (name, "COMPLETE", "system.ExperimentRun")
    assert {k: one[f"param.{k}"] for k in params} == params and {k: one[f"metric.{k}"] for k in metrics} == metrics
    assert one["time_series_metric.accuracy"] == 4.0
    assert "time_series_metric.accuracy" not in aiplatform.get_experiment_df(include_time_series=False)

    aiplatform.ExperimentRun(run_name=run_name, experiment=name).delete(delete_backing_tensorboard_run=True)
    with pytest.raises(NotFound):
        aiplatform.ExperimentRun(run_name=run_name, experiment=name)
    aiplatform.start_run(run_name)  # the name can be used again
    aiplatform.end_run()
    experiment = aiplatform.Experiment(name, project=PROJECT, location=LOCATION)
    assert experiment.get_backing_tensorboard_resource().resource_name == board.resource_name
    experiment.delete(delete_backing_tensorboard_runs=True)
    with pytest.raises(NotFound):
        aiplatform.Experiment(experiment_name=name)
    assert sdk.refused() == []


def test_metadata_artifacts_from_the_schema_classes(sdk: Sdk) -> None:
    """test_metadata: artifacts made through the SDK's schema classes keep what they were given (this SDK's
    names: system.Artifact for the base class the system test instantiates, `vertex_dataset_name`)."""
    from google.cloud.aiplatform.metadata.schema.google import artifact_schema as google_types
    from google.cloud.aiplatform.metadata.schema.system import artifact_schema as system_types

    store = f"projects/{sdk.emu.project_number(PROJECT)}/locations/{LOCATION}/metadataStores/default/artifacts/"
    dataset_name = f"projects/{PROJECT}/locations/{LOCATION}/datasets/ds-artifact"
    for kind, title in ((system_types.Artifact, "system.Artifact"), (system_types.Dataset, "system.Dataset")):
        artifact = kind(display_name=f"{title}-artifact", uri=f"gs://b/{title}", metadata={"test_property": "v"},
                        description=f"{title} description").create()
        assert (artifact.display_name, artifact.schema_title, artifact.description, artifact.uri) == (
            f"{title}-artifact", title, f"{title} description", f"gs://b/{title}")
        assert json.dumps(artifact.metadata) == json.dumps({"test_property": "v"})
        assert artifact.resource_name.startswith(store)
    vertex = google_types.VertexDataset(vertex_dataset_name=dataset_name, display_name="ds-artifact",
                                        metadata={"test_property": "v"}, description="d").create()
    assert (vertex.schema_title, vertex.metadata) == ("google.VertexDataset", {"test_property": "v",
                                                                                "resourceName": dataset_name})
    assert vertex.uri.endswith(f"/v1/{dataset_name}") and vertex.resource_name.startswith(store)
    assert sdk.refused() == []


def test_a_tensorboard_without_credentials_needs_one_of_the_guides_two_ways(sdk: Sdk, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """What the emulator guide says: after an init that named a TensorBoard, an init that names only the
    experiment calls google.auth.default() (on a machine without credentials: refused); naming the board, or the
    throwaway key, gets past it."""
    import google.auth.exceptions

    aiplatform = sdk.aiplatform
    init = {k: v for k, v in sdk.init.items() if k != "staging_bucket"}
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))  # no gcloud ADC file
    monkeypatch.setenv("NO_GCE_CHECK", "true")  # nor a metadata server to ask
    board = aiplatform.Tensorboard.create(display_name="board")
    aiplatform.init(experiment="exp", experiment_tensorboard=board, **init)
    with pytest.raises(google.auth.exceptions.DefaultCredentialsError):
        aiplatform.init(experiment="exp", **init)
    aiplatform.init(experiment="exp", experiment_tensorboard=board, **init)  # the first way: name the board
    aiplatform.start_run("r1")
    aiplatform.log_time_series_metrics({"loss": 0.5}, step=1)
    aiplatform.end_run()
    monkeypatch.chdir(tmp_path)
    [script] = [b for b in page_blocks(REPO / "docs" / "guides" / "emulator.md", "python") if "emulator_key.py" in b]
    exec(compile(script, "emulator_key.py", "exec"), {})  # the second way: the throwaway key
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "emulator-key.json"))
    aiplatform.init(experiment="exp", **init)
    aiplatform.start_run("r2")
    aiplatform.end_run()
    assert sorted(r.name for r in aiplatform.ExperimentRun.list(experiment="exp")) == ["r1", "r2"]
    assert json.loads((tmp_path / "emulator-key.json").read_text())["type"] == "service_account"
    assert os.environ["GOOGLE_APPLICATION_CREDENTIALS"].endswith("emulator-key.json")
