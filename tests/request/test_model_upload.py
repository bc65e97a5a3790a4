"""`model:` → the UploadModel request: the example's golden body, parsed strictly as aiplatform_v1's
UploadModelRequest; the serving image from the alias or the training version; `render --model` and
`submit --dry-run` show it, and the job's own render is unchanged by the block."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.cloud.aiplatform_v1 import UploadModelRequest
from google.protobuf import json_format

from tests.conftest import REPO
from tests.helpers import write_job
from vtrain.cli import cli
from vtrain.jobfile.load import load_config
from vtrain.request.model_upload import build_upload, model_dir

EXAMPLE = REPO / "configs" / "model-registry.yaml"
GOLDEN = REPO / "tests" / "golden" / "model-registry.upload.json"
JOB = """
    name: train
    region: {region}
    base_output_dir: gs://bkt/out/
    trainer: {{package_uris: [gs://bkt/t.tar.gz], module: trainer.task, image: {image}}}
    cluster: {{chief: {{machine_type: n1-standard-4}}}}
    model: {model}
    """


def test_the_example_renders_its_golden_upload_request() -> None:
    config = load_config(EXAMPLE)
    body = {"parent": "projects/my-project/locations/us-central1",
            **build_upload(config, project="my-project", config_hash="0123456789abcdef", job_id="42")}
    text = json.dumps(body, indent=2) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")
    json_format.Parse(text, UploadModelRequest.pb()())  # strict: an unknown field fails
    assert body["model"]["artifactUri"] == "gs://my-vtrain-bucket/model-registry/model/"
    assert body["model"]["labels"] == {"team": "ml", "vtrain-config-hash": "0123456789abcdef", "vtrain-job-id": "42"}


def test_serving_image_parent_and_routes(tmp_path: Path) -> None:
    def upload(region: str, image: str, model: str) -> dict:
        config = load_config(write_job(tmp_path, JOB.format(region=region, image=image, model=model)))
        return build_upload(config, project="my-project", config_hash="h")

    left_out = upload("europe-west4", "tf.2-14", "{}")
    assert left_out["model"]["containerSpec"] == {
        "imageUri": "europe-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-14:latest"}
    assert left_out["model"]["displayName"] == "train" and "parentModel" not in left_out
    gpu = upload("asia-east1", "tf-cpu.2-17", "{serving_image: tf2-gpu.2-15, parent: '77', routes: {predict: /p, "
                                               "health: /h}}")
    assert gpu["model"]["containerSpec"] == {"imageUri": "asia-docker.pkg.dev/vertex-ai/prediction/tf2-gpu.2-15:latest",
                                             "predictRoute": "/p", "healthRoute": "/h"}
    assert gpu["parentModel"] == "projects/my-project/locations/asia-east1/models/77"
    custom = upload("us-central1", "tf-cpu.2-17", "{serving_image: 'us-docker.pkg.dev/p/r/serve:1'}")
    assert custom["model"]["containerSpec"]["imageUri"] == "us-docker.pkg.dev/p/r/serve:1"
    assert model_dir("gs://bkt/out/") == "gs://bkt/out/model/"


@pytest.mark.slow
def test_render_model_and_dry_run_show_the_request() -> None:
    plain = CliRunner().invoke(cli, ["render", str(EXAMPLE), "--project", "my-project"])
    assert plain.exit_code == 0
    # the job's own request is unchanged by `model:`; one line says where the upload request is
    assert "UploadModel" not in plain.stdout and "vtrain render --model" in plain.stderr
    golden = json.loads((REPO / "tests" / "golden" / "model-registry.json").read_text())
    assert json.loads(plain.stdout)["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == \
        golden["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
    rendered = CliRunner().invoke(cli, ["render", str(EXAMPLE), "--model", "--project", "my-project"])
    assert rendered.exit_code == 0, rendered.output
    body = json.loads(rendered.stdout)
    assert body["parent"] == "projects/my-project/locations/us-central1"
    assert body["model"]["artifactUri"] == "gs://my-vtrain-bucket/model-registry/model/"
    dry = CliRunner().invoke(cli, ["submit", str(EXAMPLE), "--dry-run", "-o", "json", "--project", "my-project"])
    assert dry.exit_code == 0, dry.output
    upload = json.loads(dry.stdout)["modelUpload"]
    assert upload["url"] == "https://us-central1-aiplatform.googleapis.com/v1/projects/my-project/locations/" \
                            "us-central1/models:upload"
    assert upload["body"]["model"]["labels"]["vtrain-config-hash"] == json.loads(dry.stdout)["configHash"]
    text = CliRunner().invoke(cli, ["submit", str(EXAMPLE), "--dry-run", "--project", "my-project"])
    assert "after the job SUCCEEDED (submit --wait, or `vtrain model upload JOB_ID`):\nPOST https://" in text.stdout


def test_render_model_without_a_model_block_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["render", str(REPO / "configs" / "quickstart.yaml"), "--model"])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("--model renders the `model:` block's upload, and this job file has none")
