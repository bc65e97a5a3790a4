"""Rendering: JSON/YAML bodies, the gcloud config file, and secret redaction."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml
from google.cloud.aiplatform_v1 import CustomJob, CustomJobSpec

from vtrain.request.render import REDACTED, is_secret_name, redact, render

BODY = {
    "displayName": "demo",
    "jobSpec": {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "pythonPackageSpec": {
                    "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
                    "packageUris": ["gs://my-bucket/t.tar.gz"],
                    "pythonModule": "trainer.task",
                    "env": [
                        {"name": "API_TOKEN", "value": "s3cr3t"},
                        {"name": "db_password", "value": "hunter2"},
                        {"name": "AWS_SECRET_ACCESS_KEY", "value": "x"},
                        {"name": "BATCH", "value": "64"},
                    ],
                },
            }
        ]
    },
    "labels": {"team": "ml", "env": "dev"},
}


def test_secret_names() -> None:
    assert all(map(is_secret_name, ["API_TOKEN", "db_password", "MY_SECRET", "SSH_KEY", "GCP_CREDENTIALS"]))
    assert not any(map(is_secret_name, ["BATCH", "EPOCHS", "MODEL_DIR"]))


def test_redact_hides_only_secret_values_and_does_not_mutate() -> None:
    out = redact(BODY)
    env = out["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["env"]
    assert [e["value"] for e in env] == [REDACTED, REDACTED, REDACTED, "64"]
    assert BODY["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["env"][0]["value"] == "s3cr3t"


def test_json_is_redacted_by_default_and_shown_on_request() -> None:
    assert "s3cr3t" not in render(BODY, "json")
    assert json.loads(render(BODY, "json", show_secrets=True)) == BODY
    assert CustomJob.from_json(render(BODY, "json", show_secrets=True)).display_name == "demo"


def test_yaml_is_the_same_body() -> None:
    assert yaml.safe_load(render(BODY, "yaml", show_secrets=True)) == BODY


def test_gcloud_config_is_a_custom_job_spec_with_the_command() -> None:
    text = render(BODY, "gcloud", project="my-proj", region="europe-west4")
    lines = text.splitlines()
    command = lines[1].removeprefix("#   ")
    assert shlex.split(command) == [
        "gcloud", "ai", "custom-jobs", "create", "--project=my-proj", "--region=europe-west4",
        "--display-name=demo", "--labels=team=ml,env=dev", "--config=job.yaml",
    ]  # fmt: skip
    spec = yaml.safe_load(text)
    assert set(spec) == {"workerPoolSpecs"}
    CustomJobSpec.from_json(json.dumps(spec))  # gcloud's --config file is a CustomJobSpec


@pytest.mark.parametrize("name", ["a\nb: c", "x\r\ny", "p\u2028q"])
def test_gcloud_header_stays_a_comment_whatever_the_name(name: str) -> None:
    text = render({**BODY, "displayName": name}, "gcloud", region="europe-west4")
    assert set(yaml.safe_load(text)) == {"workerPoolSpecs"}


def test_render_accepts_a_proto() -> None:
    job = CustomJob.from_json(json.dumps(BODY))
    assert json.loads(render(job, "json", show_secrets=True)) == BODY
