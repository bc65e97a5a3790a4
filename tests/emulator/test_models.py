"""The emulator's ModelService through aiplatform_v1's own ModelServiceClient (REST), each answer checked
against the Discovery document; and vtrain's registration of a job's model (vtrain.cloud.model_registry)
against it: idempotent, never for a job that did not succeed."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.emulator.discovery import check, check_answer, method
from tests.helpers import planned, write_job
from vtrain.cli import cli
from vtrain.cloud.model_registry import model_of_job, register_model
from vtrain.cloud.vertex import VertexBackend
from vtrain.cloud.vertex.retry import RetryPolicy
from vtrain.emulator import Emulator, RunContext, RunResult
from vtrain.errors import BackendError
from vtrain.jobfile.load import load_config

PROJECT = "test-project"
PARENT = f"projects/{PROJECT}/locations/us-central1"
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
FAST = RetryPolicy(attempts=3, initial=0.01, maximum=0.02)


def runner(job: Any, ctx: RunContext) -> RunResult:
    """Jobs named 'fails' fail, the others succeed at once."""
    return RunResult("JOB_STATE_FAILED", "boom") if job.display_name == "fails" else RunResult()


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(runner=runner, pending_seconds=0.01, cancel_seconds=0.01) as emulator:
        yield emulator


@pytest.fixture
def client(emu: Emulator) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import ModelServiceClient

    return ModelServiceClient(transport="rest", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": emu.url})


def _raw(emu: Emulator, verb: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{emu.url}/{path}", data=data, method=verb,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def _model(**extra: Any) -> dict[str, Any]:
    return {"displayName": "m", "artifactUri": "gs://bkt/out/model/", "containerSpec": {"imageUri": IMAGE}, **extra}


def test_upload_is_an_operation_polled_until_done(emu: Emulator, client: Any) -> None:
    from google.cloud.aiplatform_v1 import Model

    operation = client.upload_model(parent=PARENT, model=Model(display_name="m", artifact_uri="gs://bkt/out/model/",
                                                                 container_spec={"image_uri": IMAGE}))
    assert operation.operation.done is False  # not done at create: the client must poll
    result = operation.result(timeout=30)
    assert result.model_version_id == "1"
    model = client.get_model(name=result.model)
    assert (model.artifact_uri, list(model.version_aliases), model.version_id) == ("gs://bkt/out/model/",
                                                                                   ["default"], "1")
    polls = [r for r in emu.requests if "/operations/" in r["path"]]
    assert polls and all(r["method"] == "GET" for r in polls)


def test_versions_aliases_and_list_filters(emu: Emulator, client: Any) -> None:
    first = client.upload_model(request={"parent": PARENT, "model": {
        "display_name": "m", "artifact_uri": "gs://bkt/a/model/", "container_spec": {"image_uri": IMAGE},
        "labels": {"run": "a"}, "version_aliases": ["candidate"]}}).result(timeout=30)
    second = client.upload_model(request={"parent": PARENT, "parent_model": first.model, "model": {
        "display_name": "m", "artifact_uri": "gs://bkt/b/model/", "container_spec": {"image_uri": IMAGE},
        "labels": {"run": "b"}, "version_aliases": ["candidate"]}}).result(timeout=30)
    assert (second.model, second.model_version_id) == (first.model, "2")
    # The alias moves to the newest version; `default` stays with the first.
    assert client.get_model(name=f"{first.model}@candidate").version_id == "2"
    assert list(client.get_model(name=f"{first.model}@1").version_aliases) == ["default"]
    assert client.get_model(name=first.model).artifact_uri == "gs://bkt/a/model/"
    versions = list(client.list_model_versions(request={"name": first.model, "filter": 'labels.run="b"'}))
    assert [v.version_id for v in versions] == ["2"]
    merged = client.merge_version_aliases(name=f"{first.model}@1", version_aliases=["golden"])
    assert sorted(merged.version_aliases) == ["default", "golden"]
    # models.list: the default versions; filters as the Discovery document lists them.
    assert [m.version_id for m in client.list_models(request={"parent": PARENT, "filter": 'display_name="m"'})] == ["1"]
    assert list(client.list_models(request={"parent": PARENT, "filter": 'displayName="other"'})) == []
    model_id = first.model.rsplit("/", 1)[1]
    assert len(list(client.list_models(request={"parent": PARENT, "filter": f"model={model_id}"}))) == 1
    assert len(list(client.list_models(request={"parent": PARENT, "filter": "labels:run"}))) == 1


def test_list_page_size_is_100_by_default_and_at_most(emu: Emulator) -> None:
    for i in range(101):
        op = _raw(emu, "POST", f"v1/{PARENT}/models:upload", {"model": _model(displayName=f"m{i}")})
        _raw(emu, "GET", f"v1/{op['name']}")
    assert len(_raw(emu, "GET", f"v1/{PARENT}/models")["models"]) == 100
    page = _raw(emu, "GET", f"v1/{PARENT}/models?pageSize=500")
    assert len(page["models"]) == 100 and page["nextPageToken"]
    rest = _raw(emu, "GET", f"v1/{PARENT}/models?pageSize=500&pageToken={page['nextPageToken']}")
    assert len(rest["models"]) == 1 and "nextPageToken" not in rest


def test_the_default_alias_is_taken_as_vertex_takes_it(emu: Emulator, client: Any) -> None:
    """The SDK's Model.upload sends `default` (is_default_version=True, its default): the first version has it
    anyway, a later version that lists it takes it, one that does not leaves it where it is."""
    first = client.upload_model(request={"parent": PARENT, "model": {**_proto(), "version_aliases": [
        "system-test-model", "testing", "default"]}}).result(timeout=30)
    assert list(client.get_model(name=first.model).version_aliases) == ["system-test-model", "testing", "default"]
    second = client.upload_model(request={"parent": PARENT, "parent_model": first.model,
                                          "model": _proto()}).result(timeout=30)  # is_default_version=False
    assert (second.model_version_id, list(client.get_model(name=f"{first.model}@2").version_aliases)) == ("2", [])
    assert client.get_model(name=first.model).version_id == "1"
    third = client.upload_model(request={"parent": PARENT, "parent_model": first.model,
                                         "model": {**_proto(), "version_aliases": ["default"]}}).result(timeout=30)
    assert client.get_model(name=first.model).version_id == third.model_version_id == "3"
    assert "default" not in client.get_model(name=f"{first.model}@1").version_aliases
    plain = client.upload_model(parent=PARENT, model=_proto()).result(timeout=30)  # none sent: still the default
    assert list(client.get_model(name=plain.model).version_aliases) == ["default"]


def _proto(**extra: Any) -> dict[str, Any]:
    return {"display_name": "m", "artifact_uri": "gs://bkt/out/model/", "container_spec": {"image_uri": IMAGE},
            **extra}


#: UploadModel requests Vertex refuses, each with the field the refusal names: issue 46 class 12's instances
#: (bad label keys, 100 labels, no image, an http:// artifact dir, a duplicated alias) and their neighbours.
REFUSED = [
    ({"labels": {"Team": "x"}}, "model.labels.Team", "Label keys must start with a lowercase letter"),
    ({"labels": {"9lives": "x"}}, "model.labels.9lives", "Label keys must start with a lowercase letter"),
    ({"labels": {"team": "Big Team"}}, "model.labels.team", "Label values hold at most 63"),
    ({"labels": {"k": "v" * 64}}, "model.labels.k", "Label values hold at most 63"),
    ({"labels": {f"k{i}": "v" for i in range(100)}}, "model.labels", "At most 64 labels are allowed, got 100."),
    ({"labels": {f"k{i}": "v" for i in range(65)}}, "model.labels", "At most 64 labels are allowed, got 65."),
    ({"container_spec": {}}, "model.container_spec.image_uri", "image_uri is required."),
    ({"container_spec": {"image_uri": "us-docker.pkg.dev/p/r/i:1 x"}}, "model.container_spec.image_uri",
     "image_uri 'us-docker.pkg.dev/p/r/i:1 x': it has whitespace or a control character in it"),
    ({"container_spec": {"image_uri": "http://gcr.io/p/i:1"}}, "model.container_spec.image_uri",
     "an image reference has no scheme"),
    ({"container_spec": {"image_uri": "gcr.io/P/Image:1"}}, "model.container_spec.image_uri",
     "it has upper-case letters"),
    ({"container_spec": {"image_uri": "gcr.io/p/" + "a" * 100_000}}, "model.container_spec.image_uri",
     "it is 100,009 characters; an image reference is at most 456"),
    ({"artifact_uri": "http://bkt/out/model/"}, "model.artifact_uri",
     "artifact_uri must be a Cloud Storage directory gs://BUCKET/PATH, got 'http://bkt/out/model/'."),
    ({"artifact_uri": "/tmp/model"}, "model.artifact_uri", "must be a Cloud Storage directory"),
    ({"artifact_uri": "gs://B/model"}, "model.artifact_uri", "must be a Cloud Storage directory"),
    ({"artifact_uri": "gs://bkt/a\nb"}, "model.artifact_uri", "got 'gs://bkt/a\\nb'"),
    ({"version_aliases": ["candidate", "candidate"]}, "model.version_aliases",
     "The version alias 'candidate' is listed twice."),
    ({"version_aliases": ["default", "default"]}, "model.version_aliases", "'default' is listed twice"),
    ({"version_aliases": ["Candidate"]}, "model.version_aliases", "Invalid version alias 'Candidate'"),
    ({"version_aliases": ["v_1"]}, "model.version_aliases", "Invalid version alias 'v_1'"),
    ({"version_aliases": ["-candidate"]}, "model.version_aliases", "Invalid version alias '-candidate'"),
    ({"display_name": ""}, "model.display_name", "display_name is required."),
    ({"display_name": "m" * 129}, "model.display_name", "display_name is longer than 128 characters."),
]  # fmt: skip


@pytest.mark.parametrize(("change", "field", "said"), REFUSED)
def test_an_upload_vertex_refuses_is_a_400_naming_its_field(emu: Emulator, client: Any, change: dict[str, Any],
                                                             field: str, said: str) -> None:  # fmt: skip
    from google.api_core.exceptions import BadRequest

    with pytest.raises(BadRequest) as err:
        client.upload_model(parent=PARENT, model=_proto(**change))
    answer = err.value.response.json()["error"]
    assert (answer["code"], answer["status"]) == (400, "INVALID_ARGUMENT")
    assert answer["message"].startswith(f"{field}: ") and said in answer["message"], answer["message"]
    [details] = answer["details"]
    assert details["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert details["fieldViolations"][0]["field"] == field
    assert len(answer["message"]) < 2000  # a 100,000-character value is not echoed whole
    assert emu.models() == []


def test_the_refusals_name_every_problem_and_the_same_label_rules_hold_for_jobs(emu: Emulator, client: Any) -> None:
    from google.api_core.exceptions import BadRequest
    from google.cloud.aiplatform_v1 import CustomJob

    with pytest.raises(BadRequest) as err:
        client.upload_model(parent=PARENT, model=_proto(labels={"Team": "x"}, container_spec={},
                                                        version_aliases=["a1", "a1"]))
    fields = [v["field"] for v in err.value.response.json()["error"]["details"][0]["fieldViolations"]]
    assert fields == ["model.labels.Team", "model.container_spec.image_uri", "model.version_aliases"]
    jobs = emu.client()
    pool = {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": IMAGE}}
    with pytest.raises(BadRequest) as job_err:
        jobs.create_custom_job(parent=PARENT, custom_job=CustomJob(display_name="j", labels={"Team": "x"},
                                                                   job_spec={"worker_pool_specs": [pool]}))
    assert job_err.value.response.json()["error"]["details"][0]["fieldViolations"][0] == {
        "field": "labels.Team", "description": err.value.response.json()["error"]["details"][0][
            "fieldViolations"][0]["description"]}  # one label check, two resources
    made = client.upload_model(parent=PARENT, model=_proto(labels={"équipe": "données"}))  # "International
    assert made.result(timeout=30).model_version_id == "1"  # characters are allowed" (Model.labels)


def test_other_refusals(emu: Emulator) -> None:
    import urllib.error

    for body, code, why in (
            ({}, 400, "model is required"), ({"model": _model(), "parentModel": f"{PARENT}/models/404"}, 404,
                                             "not found"),
            ({"model": _model(), "modelId": "9model"}, 400, "invalid model_id '9model'")):
        with pytest.raises(urllib.error.HTTPError) as err:
            _raw(emu, "POST", f"v1/{PARENT}/models:upload", body)
        assert err.value.code == code and why in err.value.read().decode().lower()
    with pytest.raises(urllib.error.HTTPError) as err:
        _raw(emu, "GET", f"v1/{PARENT}/models?filter=state%3D1")
    assert err.value.code == 400


def test_update_changes_the_model_or_a_version_as_the_mask_says(emu: Emulator, client: Any) -> None:
    from google.api_core.exceptions import BadRequest
    from google.cloud.aiplatform_v1 import Model
    from google.protobuf.field_mask_pb2 import FieldMask

    first = client.upload_model(parent=PARENT, model=_proto(labels={"run": "a"})).result(timeout=30)
    client.upload_model(request={"parent": PARENT, "parent_model": first.model, "model": _proto(
        labels={"run": "b"}, version_description="second")}).result(timeout=30)
    model = client.get_model(name=first.model)
    model.display_name, model.description, model.labels = "new_name", "new_description", {"my_label": "updated"}
    done = client.update_model(model=model, update_mask=FieldMask(paths=["display_name", "description", "labels"]))
    assert (done.display_name, done.description, done.version_id) == ("new_name", "new_description", "1")
    assert dict(done.labels) == {"run": "a", "my_label": "updated"}  # the model's labels merged into the version's
    two = client.get_model(name=f"{first.model}@2")
    assert (two.display_name, two.version_description, dict(two.labels)) == ("new_name", "second",
                                                                             {"run": "b", "my_label": "updated"})
    version = Model(name=f"{first.model}@2", version_description="better", labels={"run": "c"})
    client.update_model(model=version, update_mask=FieldMask(paths=["version_description", "labels"]))
    two = client.get_model(name=f"{first.model}@2")
    assert (two.version_description, dict(two.labels)) == ("better", {"run": "c", "my_label": "updated"})
    assert client.get_model(name=first.model).version_description == ""
    for mask, name, said in ((["artifact_uri"], first.model, "it is not a field UpdateModel changes"),
                             (["display_name"], f"{first.model}@2", "one request cannot update both the model and "
                                                                    "the version fields"),
                             ([], first.model, "update_mask is required")):
        with pytest.raises(BadRequest, match=said):
            client.update_model(model=Model(name=name, display_name="x"), update_mask=FieldMask(paths=mask))
    with pytest.raises(BadRequest, match="Label keys must start with a lowercase letter"):
        client.update_model(model=Model(name=first.model, labels={"Bad": "x"}), update_mask=FieldMask(paths=["labels"]))


def test_delete_version_refuses_the_default_and_the_only_version(emu: Emulator, client: Any) -> None:
    from google.api_core.exceptions import BadRequest, NotFound

    first = client.upload_model(parent=PARENT, model=_proto()).result(timeout=30)
    with pytest.raises(BadRequest, match="is the only version of .*deleting the only version in the Model is not "
                                         "allowed: delete the Model instead") as only:
        client.delete_model_version(name=f"{first.model}@1").result(timeout=30)
    assert only.value.response.json()["error"]["status"] == "FAILED_PRECONDITION"
    client.upload_model(request={"parent": PARENT, "parent_model": first.model, "model": _proto()}).result(timeout=30)
    with pytest.raises(BadRequest, match="Version 1 is the default version of .*, which cannot be deleted: make "
                                         r"another version the default first \(mergeVersionAliases"):
        client.delete_model_version(name=f"{first.model}@default").result(timeout=30)
    client.delete_model_version(name=f"{first.model}@2").result(timeout=30)
    assert [v.version_id for v in client.list_model_versions(name=first.model)] == ["1"]
    with pytest.raises(NotFound):
        client.delete_model_version(name=f"{first.model}@2")
    third = client.upload_model(request={"parent": PARENT, "parent_model": first.model,
                                         "model": _proto(version_aliases=["default"])}).result(timeout=30)
    client.delete_model_version(name=f"{first.model}@1").result(timeout=30)  # no longer the default: it goes
    assert [v.version_id for v in client.list_model_versions(name=first.model)] == [third.model_version_id]
    client.delete_model(name=first.model).result(timeout=30)
    assert list(client.list_models(parent=PARENT)) == []
    with pytest.raises(NotFound):
        client.get_model(name=first.model)


def test_every_answer_is_true_to_the_discovery_document(emu: Emulator) -> None:
    models = ("projects", "locations", "models")
    op = _raw(emu, "POST", f"v1/{PARENT}/models:upload", {"model": _model(labels={"a": "b"}, description="d")})
    assert op["done"] is False
    answers = [("upload", "POST", f"v1/{PARENT}/models:upload", op, "GoogleLongrunningOperation")]
    done = _raw(emu, "GET", f"v1/{op['name']}")
    assert done["done"] is True
    answers.append(("get", "GET", f"v1/{op['name']}", done, "GoogleLongrunningOperation"))
    name = done["response"]["model"]
    check(done["response"], "GoogleCloudAiplatformV1UploadModelResponse", "upload's response")
    again = _raw(emu, "POST", f"v1/{PARENT}/models:upload", {"model": _model(), "parentModel": name})
    _raw(emu, "GET", f"v1/{again['name']}")
    answers += [
        ("get", "GET", f"v1/{name}", _raw(emu, "GET", f"v1/{name}"), "GoogleCloudAiplatformV1Model"),
        ("get", "GET", f"v1/{name}@2", _raw(emu, "GET", f"v1/{name}@2"), "GoogleCloudAiplatformV1Model"),
        ("list", "GET", f"v1/{PARENT}/models", _raw(emu, "GET", f"v1/{PARENT}/models"),
         "GoogleCloudAiplatformV1ListModelsResponse"),
        ("listVersions", "GET", f"v1/{name}:listVersions", _raw(emu, "GET", f"v1/{name}:listVersions"),
         "GoogleCloudAiplatformV1ListModelVersionsResponse"),
        ("mergeVersionAliases", "POST", f"v1/{name}@2:mergeVersionAliases",
         _raw(emu, "POST", f"v1/{name}@2:mergeVersionAliases", {"versionAliases": ["golden"]}),
         "GoogleCloudAiplatformV1Model"),
        ("patch", "PATCH", f"v1/{name}", _raw(emu, "PATCH", f"v1/{name}?updateMask=displayName,labels",
                                               {"displayName": "n", "labels": {"k": "v"}}),
         "GoogleCloudAiplatformV1Model"),
        ("patch", "PATCH", f"v1/{name}@2", _raw(emu, "PATCH", f"v1/{name}@2?updateMask=version_description",
                                                 {"versionDescription": "d"}), "GoogleCloudAiplatformV1Model"),
    ]
    deleted = _raw(emu, "DELETE", f"v1/{name}@2:deleteVersion")
    answers.append(("deleteVersion", "DELETE", f"v1/{name}@2:deleteVersion", deleted, "GoogleLongrunningOperation"))
    answers.append(("get", "GET", f"v1/{deleted['name']}", _raw(emu, "GET", f"v1/{deleted['name']}"),
                    "GoogleLongrunningOperation"))
    answers.append(("delete", "DELETE", f"v1/{name}", _raw(emu, "DELETE", f"v1/{name}"), "GoogleLongrunningOperation"))
    assert deleted["done"] is True and deleted["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}
    for verb_name, verb, path, answer, ref in answers:
        resources = (*models, "operations") if "/operations/" in path else models
        declared = method(verb, f"/{path}")
        assert declared["id"] == ".".join(("aiplatform", *resources, verb_name)), (declared["id"], path)
        assert declared["response"]["$ref"] == ref
        check_answer(verb, f"/{path}", answer)
    with pytest.raises(AssertionError, match="is not a string"):  # the checker does check
        check({"displayName": 1}, "GoogleCloudAiplatformV1Model", "model")


# ---- the model directory ---------------------------------------------------------------------------

@pytest.mark.parametrize(("image", "files", "refused"), [
    (IMAGE, [], "exactly one of: [saved_model.pb, saved_model.pbtxt]"),  # issue 46 class 12: no SavedModel
    (IMAGE, ["variables/variables.index", "keras_metadata.pb"], "exactly one of: [saved_model.pb, saved_model.pbtxt]"),
    (IMAGE, ["saved_model.pb", "saved_model.pbtxt"], "exactly one of"),
    (IMAGE, ["saved_model.pb", "variables/variables.index"], None),
    (IMAGE, ["saved_model.pbtxt"], None),
    ("us-docker.pkg.dev/vertex-ai/prediction/xgboost-cpu.1-7:latest", ["model.bst"], None),
    ("europe-docker.pkg.dev/vertex-ai/prediction/xgboost-cpu.1-7:latest", ["model.json"],
     "exactly one of: [model.bst, model.joblib, model.pkl]"),
    ("us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-3:latest", ["model.joblib", "model.pkl"], "exactly one"),
    ("us-docker.pkg.dev/vertex-ai/prediction/pytorch-cpu.2-1:latest", ["model.pt"], "exactly one of: [model.mar]"),
    ("us-docker.pkg.dev/my-project/serving/mine:1", [], None),  # a custom image loads what it wants
])  # fmt: skip
def test_the_model_dir_holds_what_its_prebuilt_image_loads(emu: Emulator, client: Any, gcs: Any, image: str,
                                                            files: list[str], refused: str | None) -> None:  # fmt: skip
    from google.api_core.exceptions import BadRequest

    gcs.create_bucket("bkt")
    for name in files:
        gcs.client().bucket("bkt").blob(f"out/model/{name}").upload_from_string(b"x")
    gcs.client().bucket("bkt").blob("out/saved_model.pb").upload_from_string(b"x")  # beside the dir, not in it
    model = _proto(container_spec={"image_uri": image})
    if refused is None:
        assert client.upload_model(parent=PARENT, model=model).result(timeout=30).model_version_id == "1"
        return
    with pytest.raises(BadRequest) as err:
        client.upload_model(parent=PARENT, model=model)
    answer = err.value.response.json()["error"]
    assert answer["message"] == f"Model directory gs://bkt/out/model/ is expected to contain {refused}" or \
        refused in answer["message"], answer
    assert answer["details"][0]["fieldViolations"][0]["field"] == "model.artifact_uri" and emu.models() == []


def test_a_model_dir_the_emulator_wrote_for_a_job_is_read_where_it_is(make_emulator: Any, gcs: Any,
                                                                      tmp_path: Path) -> None:  # fmt: skip
    """--run-jobs writes a gs:// base output dir on this machine: the upload of its model/ is checked there."""
    from google.api_core.exceptions import BadRequest
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import CustomJob, ModelServiceClient

    def export(job: Any, ctx: RunContext) -> RunResult:
        out = tmp_path / ctx.job_id
        if job.display_name == "exports":
            (out / "model").mkdir(parents=True)
            (out / "model" / "saved_model.pb").write_bytes(b"x")
        ctx.outputs_at(out)
        return RunResult()

    emu = make_emulator(export, pending_seconds=0.01)
    client = ModelServiceClient(transport="rest", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": emu.url})
    pool = {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": IMAGE}}
    for name, base in (("exports", "gs://bkt/a"), ("forgets", "gs://bkt/b")):
        made = emu.client().create_custom_job(parent=PARENT, custom_job=CustomJob(display_name=name, job_spec={
            "worker_pool_specs": [pool], "base_output_directory": {"output_uri_prefix": base}}))
        for _ in range(500):
            if emu.client().get_custom_job(name=made.name).state.name == "JOB_STATE_SUCCEEDED":
                break
            time.sleep(0.01)
    ok = client.upload_model(parent=PARENT, model=_proto(artifact_uri="gs://bkt/a/model/")).result(timeout=30)
    assert ok.model_version_id == "1"  # on the GCS emulator the dir is empty: read where the job wrote it
    with pytest.raises(BadRequest, match="Model directory gs://bkt/b/model/ is expected to contain exactly one of"):
        client.upload_model(parent=PARENT, model=_proto(artifact_uri="gs://bkt/b/model/"))
    with pytest.raises(BadRequest, match="gs://bkt/a/../b/model/ is expected"):  # no way out of the job's folder
        client.upload_model(parent=PARENT, model=_proto(artifact_uri="gs://bkt/a/../b/model/"))


# ---- vtrain's registration -------------------------------------------------------------------------

JOB = """
    name: {name}
    project: test-project
    region: us-central1
    base_output_dir: gs://bkt/out
    trainer: {{package_uris: [gs://bkt/t.tar.gz], module: trainer.task, image: tf-cpu.2-15}}
    cluster: {{chief: {{machine_type: n1-standard-4}}}}
    model: {{display_name: churn, version_aliases: [candidate]{extra}}}
    """


def _backend(emu: Emulator) -> VertexBackend:
    return VertexBackend.from_endpoint(PROJECT, "us-central1", emu.url, retry=FAST)


def _run(backend: VertexBackend, config: Any, digest: str = "0123456789abcdef") -> Any:
    from vtrain.request.build import build_request
    from vtrain.request.custom_job import to_proto

    body = build_request(*planned(config)).body
    body["labels"] = {**body.get("labels", {}), "vtrain-config-hash": digest}
    job = backend.create(to_proto(body))
    job.wait(timeout=60, poll=0.02)
    return job


def test_register_is_idempotent_and_new_versions_only_when_asked(emu: Emulator, client: Any, tmp_path: Any) -> None:
    backend = _backend(emu)
    config = load_config(write_job(tmp_path, JOB.format(name="train", extra="")))
    job = _run(backend, config)
    made = register_model(backend, config, job)
    assert made.uploaded and made.version_id == "1"
    again = register_model(backend, config, job)  # a retry finds the version it made
    assert (again.uploaded, again.name) == (False, made.name) and job.job_id in again.why
    second = _run(backend, config)  # an identical run: nothing new
    same = register_model(backend, config, second)
    assert (same.uploaded, same.name) == (False, made.name) and "vtrain-config-hash" in same.why
    changed = _run(backend, config, digest="fedcba9876543210")  # other code: a new version of the same model
    assert register_model(backend, config, changed).name == f"{made.model}@2"
    each = load_config(write_job(tmp_path, JOB.format(name="train", extra=", new_version_each_run: true"), "e.yaml"))
    third = _run(backend, each)
    assert register_model(backend, each, third).name == f"{made.model}@3"
    versions = list(client.list_model_versions(name=made.model))
    assert [v.artifact_uri for v in versions] == ["gs://bkt/out/model/"] * 3
    assert versions[0].labels["vtrain-job-id"] == job.job_id and versions[2].labels["vtrain-job-id"] == third.job_id
    assert model_of_job(backend, third.job_id).name == f"{made.model}@3"  # type: ignore[union-attr]
    assert model_of_job(backend, "123") is None


def test_a_job_file_that_lists_default_makes_each_new_version_the_default(emu: Emulator, client: Any,
                                                                          tmp_path: Any) -> None:  # fmt: skip
    backend = _backend(emu)
    text = JOB.format(name="train", extra=", new_version_each_run: true").replace("[candidate]", "[candidate, default]")
    config = load_config(write_job(tmp_path, text))
    first = register_model(backend, config, _run(backend, config))
    second = register_model(backend, config, _run(backend, config))
    assert (first.version_id, second.version_id, second.model) == ("1", "2", first.model)
    served = client.get_model(name=first.model)  # models/ID: the default version, now the newest
    assert (served.version_id, list(served.version_aliases)) == ("2", ["candidate", "default"])
    assert list(client.get_model(name=f"{first.model}@1").version_aliases) == []
    plain = load_config(write_job(tmp_path, JOB.format(name="train", extra=", new_version_each_run: true"), "p.yaml"))
    assert register_model(backend, plain, _run(backend, plain)).version_id == "3"
    assert client.get_model(name=first.model).version_id == "2"  # without `default` the default stays


def test_a_failed_job_is_never_uploaded(emu: Emulator, client: Any, tmp_path: Any) -> None:
    backend = _backend(emu)
    config = load_config(write_job(tmp_path, JOB.format(name="fails", extra="")))
    job = _run(backend, config)
    with pytest.raises(BackendError, match=r"is JOB_STATE_FAILED: only a job that SUCCEEDED has a model to upload"):
        register_model(backend, config, job)
    assert list(client.list_models(parent=PARENT)) == []


def test_model_upload_command_and_status(emu: Emulator, tmp_path: Any) -> None:
    backend = _backend(emu)
    path = write_job(tmp_path, JOB.format(name="train", extra=""))
    job = _run(backend, load_config(path))
    args = ["--api-endpoint", emu.url]
    result = CliRunner().invoke(cli, ["model", "upload", job.job_id, "-f", str(path), *args])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"model registered: projects/{emu.project_number()}/locations/us-central1/models/")
    again = CliRunner().invoke(cli, ["model", "upload", job.job_id, "-f", str(path), *args])
    assert again.exit_code == 0 and "model not uploaded again:" in again.stdout
    status = CliRunner().invoke(cli, ["status", job.job_id, "--project", PROJECT, "--region", "us-central1", *args])
    assert status.exit_code == 0
    assert "model          projects/" in status.stdout and "@1\n" in status.stdout
    failed = _run(backend, load_config(write_job(tmp_path, JOB.format(name="fails", extra=""), "f.yaml")))
    refused = CliRunner().invoke(cli, ["model", "upload", failed.job_id, "-f", str(path), *args])
    assert refused.exit_code == 1 and "only a job that SUCCEEDED has a model to upload; nothing was uploaded" in \
        refused.stderr


def test_submit_wait_registers_after_success_and_never_after_a_failure(emu: Emulator, client: Any,
                                                                      tmp_path: Any) -> None:  # fmt: skip
    args = ["--wait", "--poll", "0.02", "--no-preflight", "--plain", "--api-endpoint", emu.url]
    failing = write_job(tmp_path, JOB.format(name="fails", extra=""), "fails.yaml")
    result = CliRunner().invoke(cli, ["submit", str(failing), *args])
    assert result.exit_code == 10, result.output
    assert "model: not uploaded: the job ended JOB_STATE_FAILED, not SUCCEEDED\n" in result.stderr
    assert list(client.list_models(parent=PARENT)) == []
    ok = write_job(tmp_path, JOB.format(name="train", extra=""), "ok.yaml")
    result = CliRunner().invoke(cli, ["submit", str(ok), *args])
    assert result.exit_code == 0, result.output
    assert "\nmodel registered: projects/" in result.stdout
    [model] = client.list_models(parent=PARENT)
    assert model.artifact_uri == "gs://bkt/out/model/" and model.display_name == "churn"
    again = CliRunner().invoke(cli, ["submit", str(ok), *args])
    assert again.exit_code == 0 and "\nmodel not uploaded again: " in again.stdout
    assert [v.version_id for v in client.list_model_versions(name=model.name)] == ["1"]
    recovering = CliRunner().invoke(cli, ["submit", str(ok), "--recover", "1", *args])  # the succeeding attempt's
    assert recovering.exit_code == 0, recovering.output
    assert "\nmodel not uploaded again: " in recovering.stdout
    renamed = write_job(tmp_path, JOB.format(name="train", extra=", new_version_each_run: true"), "new.yaml")
    recovering = CliRunner().invoke(cli, ["submit", str(renamed), "--recover", "1", *args])
    assert recovering.exit_code == 0 and "\nmodel registered: " in recovering.stdout, recovering.output
    assert [v.version_id for v in client.list_model_versions(name=model.name)] == ["1", "2"]
    failed = CliRunner().invoke(cli, ["submit", str(failing), "--recover", "1", *args])
    assert failed.exit_code == 10, failed.output
    assert "model: not uploaded: the job ended JOB_STATE_FAILED, not SUCCEEDED\n" in failed.stderr


def test_the_sdk_submit_with_wait_registers_as_the_cli_does(emu: Emulator, client: Any, tmp_path: Any) -> None:
    """Issue 47, SDK parity: vtrain.submit(..., wait=True) registers the model of a job that SUCCEEDED (and
    never of one that FAILED), and vtrain.dry_run shows the upload it would make, with no credentials."""
    import vtrain

    where = {"project": PROJECT, "region": "us-central1", "api_endpoint": emu.url, "preflight": False}
    failing = write_job(tmp_path, JOB.format(name="fails", extra=""), "fails.yaml")
    failed = vtrain.submit(failing, wait=True, poll=0.02, **where)
    assert (failed.state, failed.registered) == ("JOB_STATE_FAILED", None)
    assert list(client.list_models(parent=PARENT)) == []
    ok = write_job(tmp_path, JOB.format(name="train", extra=""), "ok.yaml")
    planned_upload = vtrain.dry_run(ok, project=PROJECT, region="us-central1")["modelUpload"]
    assert planned_upload["body"]["model"]["displayName"] == "churn"
    job = vtrain.submit(ok, wait=True, poll=0.02, **where)
    assert job.state == "JOB_STATE_SUCCEEDED" and job.registered is not None and job.registered.uploaded
    [model] = client.list_models(parent=PARENT)
    assert job.registered.name == f"{model.name}@1" and model.display_name == "churn"
    unwaited = vtrain.submit(ok, **where)  # without wait: the handle at once, nothing registered
    assert unwaited.registered is None and not unwaited.done


def test_an_upload_whose_answer_is_lost_is_not_made_twice(tmp_path: Any) -> None:
    """The upload is done and its answer dropped: the retry looks first and finds the version it made."""
    holder: list[Emulator] = []

    def drop_the_upload_answer(line: str) -> None:  # after the lookup by display name, the upload's answer is lost
        if line.startswith("GET /v1/projects/test-project/locations/us-central1/models?") and len(holder) == 1:
            holder.append(holder[0])
            holder[0].fail_next(1, mode="reset-after")

    with Emulator(runner=runner, pending_seconds=0.01, access_log=drop_the_upload_answer) as emulator:
        holder.append(emulator)
        backend = _backend(emulator)
        config = load_config(write_job(tmp_path, JOB.format(name="train", extra="")))
        job = _run(backend, config)
        made = register_model(backend, config, job)
        assert len(holder) == 2  # the fault was injected
        uploads = [r for r in emulator.requests if r["path"].endswith("/models:upload")]
        assert len(uploads) == 1 and made.version_id == "1"
        versions = _raw(emulator, "GET", f"v1/{made.model}:listVersions")["models"]
        assert [v["labels"]["vtrain-job-id"] for v in versions] == [job.job_id]


def test_refusals_of_the_commands(emu: Emulator, tmp_path: Any) -> None:
    args = ["--api-endpoint", emu.url]
    backend = _backend(emu)
    path = write_job(tmp_path, JOB.format(name="train", extra=""))
    job = _run(backend, load_config(path))
    plain = write_job(tmp_path, JOB.format(name="train", extra="").split("    model:")[0], "plain.yaml")
    no_block = CliRunner().invoke(cli, ["model", "upload", job.job_id, "-f", str(plain), *args])
    assert no_block.exit_code == 2
    assert "model: the job file has no model: block; add one to say how to register the job's model" in \
        no_block.stderr
    gcloud = CliRunner().invoke(cli, ["render", str(path), "--model", "-o", "gcloud"])
    assert gcloud.exit_code == 2 and "--model renders the UploadModel request as json or yaml" in gcloud.stderr
    # status with no aiplatform.models.list: the job's state still, and one line on stderr
    emu.deny_permissions("aiplatform.models.list")
    status = CliRunner().invoke(cli, ["status", job.job_id, "--project", PROJECT, "--region", "us-central1", *args])
    assert status.exit_code == 0 and "state" in status.stdout and "model " not in status.stdout
    assert status.stderr.startswith("model: not looked up: ") and "aiplatform.models.list" in status.stderr
    emu.deny_permissions()
    upload = CliRunner().invoke(cli, ["model", "upload", job.job_id, "-f", str(path), *args])
    assert upload.exit_code == 0, upload.output


def test_a_job_with_no_base_output_dir_has_no_model_to_upload(emu: Emulator, tmp_path: Any) -> None:
    backend = _backend(emu)
    config = load_config(write_job(tmp_path, JOB.format(name="train", extra="")))
    from dataclasses import replace

    job = _run(backend, replace(config, base_output_dir=None))
    with pytest.raises(BackendError, match="has no base output directory, so Vertex set no AIP_MODEL_DIR"):
        register_model(backend, replace(config, base_output_dir=None), job)
