"""`model:` → the UploadModel request (`POST v1/projects/P/locations/R/models:upload`) that registers a
succeeding job's AIP_MODEL_DIR in Model Registry. Pure, like the CustomJob builder: `render --model` and
`submit --dry-run` print it, :mod:`vtrain.cloud.model_registry` sends it.

The model dir is where Vertex points AIP_MODEL_DIR: `model/` under the job's base output directory. The
serving image is the `model.serving_image` alias as a regional prebuilt prediction URI (or the URI given),
left out: tf2-cpu at the training image's TensorFlow version (the rules refuse a version with none).
Labels: the user's, plus vtrain-config-hash (the job's) and vtrain-job-id (added once the job exists),
by which a retry or a second run finds the version already made.
"""

from __future__ import annotations

from typing import Any

from vtrain.jobfile import serving
from vtrain.jobfile.config import JobConfig, ModelConfig
from vtrain.jobfile.rules.model import MODEL_HASH_LABEL, MODEL_JOB_LABEL, training_tf_version


def model_dir(base_output_dir: str) -> str:
    """AIP_MODEL_DIR of a job with this base output directory."""
    return base_output_dir.rstrip("/") + "/model/"


def serving_image_uri(config: JobConfig) -> str:
    model = config.model
    assert model is not None
    image = model.serving_image
    if image is None:
        return serving.prediction_image_uri("cpu", training_tf_version(config) or "", config.region)
    alias = serving.SERVING_ALIAS_RE.match(image)
    return serving.prediction_image_uri(alias["family"], alias["version"], config.region) if alias else image


def parent_model(model: ModelConfig, project: str, region: str) -> str | None:
    """`model.parent` as a full resource name (a bare ID is in the job's project and region)."""
    if model.parent is None:
        return None
    return model.parent if "/" in model.parent else f"projects/{project}/locations/{region}/models/{model.parent}"


def upload_url(endpoint: str, project: str, region: str) -> str:
    return f"{endpoint}/v1/projects/{project}/locations/{region}/models:upload"


def build_upload(config: JobConfig, *, project: str, config_hash: str, base_output_dir: str | None = None,
                 job_id: str | None = None, parent: str | None = None) -> dict[str, Any]:
    """The UploadModelRequest body (REST JSON, without `parent`, which is in the URL). `base_output_dir`: the
    job's own (a job read back), else the file's; `parent`: the model to add a version to, when one was
    found (else `model.parent`)."""
    model = config.model
    if model is None:
        raise ValueError("the job file has no model: block")
    base = base_output_dir or config.base_output_dir or ""
    container: dict[str, Any] = {"imageUri": serving_image_uri(config)}
    if model.predict_route:
        container["predictRoute"] = model.predict_route
    if model.health_route:
        container["healthRoute"] = model.health_route
    labels = {**model.labels, MODEL_HASH_LABEL: config_hash}
    if job_id:
        labels[MODEL_JOB_LABEL] = job_id
    body: dict[str, Any] = {}
    parent = parent or parent_model(model, project, config.region)
    if parent:
        body["parentModel"] = parent
    spec: dict[str, Any] = {"displayName": model.display_name}
    if model.description:
        spec["description"] = model.description
    if model.version_aliases:
        spec["versionAliases"] = list(model.version_aliases)
    spec.update(artifactUri=model_dir(base), containerSpec=container, labels=labels)
    body["model"] = spec
    if config.service_account:
        body["serviceAccount"] = config.service_account
    return body


__all__ = ["build_upload", "model_dir", "parent_model", "serving_image_uri", "upload_url"]
