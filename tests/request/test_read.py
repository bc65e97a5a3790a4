"""A CustomJob read back from a file someone else wrote (vtrain.request.read): every form render, gcloud and the
API write, checked against aiplatform_v1's proto, with the file and line of what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import planned
from vtrain.errors import UsageError
from vtrain.jobfile.load import load_config
from vtrain.request.build import build_request
from vtrain.request.read import CREATE_REQUEST, DRY_RUN, GCLOUD_CONFIG, REST_BODY, read_request, shape
from vtrain.request.render import render

REPO = Path(__file__).resolve().parents[2]
SPEC = {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                             "containerSpec": {"imageUri": "gcr.io/p/i", "args": ["--x"]}}]}  # fmt: skip


@pytest.mark.parametrize(("data", "form", "prefix"), [
    ({"displayName": "a", "jobSpec": SPEC}, REST_BODY, ()),
    (SPEC, GCLOUD_CONFIG, ()),
    ({"parent": "projects/p/locations/r", "customJob": {"displayName": "a", "jobSpec": SPEC}}, CREATE_REQUEST,
     ("customJob",)),
    ({"request": {"body": {"displayName": "a", "jobSpec": SPEC}}}, DRY_RUN, ("request", "body")),
    ({"name": "job", "trainer": {"module": "m"}}, None, None),  # a job file
    (["not", "a", "mapping"], None, None),
])  # fmt: skip
def test_where_a_request_sits(data: object, form: str | None, prefix: tuple[str, ...] | None) -> None:
    found = shape(data)
    assert (found.form if found else None) == form
    if found is not None:
        assert found.body["jobSpec"] == SPEC and found.prefix == prefix


def test_every_form_render_writes_reads_back_as_the_same_request(tmp_path: Path) -> None:
    config = load_config(REPO / "configs" / "multi-worker-gpu.yaml")
    body = build_request(*planned(config)).body
    for fmt, suffix in (("json", "json"), ("yaml", "yaml"), ("gcloud", "yaml")):
        path = tmp_path / f"request-{fmt}.{suffix}"
        path.write_text(render(body, fmt, show_secrets=True), encoding="utf-8")
        found = read_request(path)
        assert found.body["jobSpec"] == body["jobSpec"], fmt
        assert found.form == (GCLOUD_CONFIG if fmt == "gcloud" else REST_BODY)


def test_the_proto_s_own_field_names_are_read_in_the_api_s_spelling(tmp_path: Path) -> None:
    path = tmp_path / "snake.yaml"
    path.write_text(yaml.safe_dump({"worker_pool_specs": [{"machine_spec": {"machine_type": "n1-standard-4"},
                                                           "replica_count": 1, "container_spec": {"image_uri": "i"}}],
                                    "scheduling": {"timeout": "600s"}}))  # fmt: skip
    assert read_request(path).body["jobSpec"] == {
        "workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                             "containerSpec": {"imageUri": "i"}}], "scheduling": {"timeout": "600s"}}  # fmt: skip


@pytest.mark.parametrize(("text", "said"), [
    ('{"jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineTyp": "n1"}}]}}',
     "request.json:1: jobSpec.workerPoolSpecs[0].machineSpec.machineTyp: MachineSpec has no field 'machineTyp'; "
     "did you mean machineType?"),
    ('{"jobSpec": {"workerPoolSpecs": [{"replicaCount": "two"}]}}', "request.json:1: not a CustomJob the API would "
     "take: Failed to parse jobSpec field: Failed to parse workerPoolSpecs field: Failed to parse replicaCount"),
    ('{"jobSpec": {"workerPoolSpecs": []}}', "request.json:1: jobSpec.workerPoolSpecs: the job has no worker pool"),
    ('{"name": "job", "trainer": {"module": "m"}}', "request.json: holds no CustomJob: neither `jobSpec`"),
    ('{"trialJobSpec": {"workerPoolSpecs": []}, "maxTrialCount": 2}', "holds a HyperparameterTuningJob"),
    ('{"jobSpec": {"workerPoolSpecs": [}', "request.json:1:34: YAML syntax error"),
])  # fmt: skip
def test_a_request_the_api_would_refuse_is_named_with_its_line(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "request.json"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        read_request(path)
    assert said in str(err.value).replace(str(tmp_path) + "/", ""), str(err.value)
    assert err.value.exit_code == 2


def test_the_line_of_an_unknown_key_in_a_gcloud_config(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n  replicaCount: 1\n"
                    "  containerSpec: {imageUri: i}\nscheduling:\n  timeout: 600s\n  restartJobOnWorkerRestrat: true\n")
    with pytest.raises(UsageError, match=r"config.yaml:7: jobSpec.scheduling.restartJobOnWorkerRestrat: Scheduling "
                                         r"has no field 'restartJobOnWorkerRestrat'; did you mean "
                                         r"restartJobOnWorkerRestart\?"):
        read_request(path)


def test_what_cannot_be_read_is_refused_before_parsing(tmp_path: Path) -> None:
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(UsageError, match="is not UTF-8 text"):
        read_request(tmp_path / "bin.json")
    with pytest.raises(UsageError, match="cannot read the request .*not a regular file"):
        read_request(tmp_path)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"jobSpec": {"x": "y" * (2 << 20)}}))
    with pytest.raises(UsageError, match="larger than"):
        read_request(big)
