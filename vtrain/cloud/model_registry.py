"""A succeeding job's model in Vertex AI Model Registry: :func:`register_model` sends the UploadModel
request of the job file's `model:` block (:mod:`vtrain.request.model_upload`) for a job that SUCCEEDED,
and waits for its long-running operation. `submit --wait` calls it after the job ends; `vtrain model
upload JOB_ID` for a job submitted without waiting.

Idempotent. Every version vtrain uploads carries the labels vtrain-job-id (the CustomJob's ID) and
vtrain-config-hash (the job's own label: same file, same trainer code). Before uploading it looks, in
the model it would add a version to (`model.parent`, else the oldest model with the display name):
a version with this job's ID is the one a retry already made; unless `new_version_each_run`, a version
with this config hash is the one an identical run made, and nothing is uploaded. A failed or cancelled
job's output is never uploaded. The client is aiplatform_v1's ModelServiceClient on the REST transport
(the backend's endpoint and credentials), imported on use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vtrain.cloud.vertex.registered import Registered
from vtrain.errors import BackendError, ConfigError, Problem
from vtrain.jobfile.rules.model import MODEL_HASH_LABEL, MODEL_JOB_LABEL
from vtrain.request.model_upload import build_upload, parent_model

if TYPE_CHECKING:
    from vtrain.cloud.vertex.client import VertexBackend, VertexJob
    from vtrain.jobfile.config import JobConfig

#: How long an upload's operation may take (Vertex copies nothing: it checks and registers the dir).
UPLOAD_TIMEOUT = 1800.0
#: Models whose versions `model_of_job` looks through when the job's version is not a default one.
LOOKUP_MODELS = 10


def model_client(backend: VertexBackend) -> Any:
    """aiplatform_v1's ModelServiceClient on the REST transport, with the backend's endpoint and credentials."""
    from google.cloud.aiplatform_v1 import ModelServiceClient

    return ModelServiceClient(transport="rest", credentials=backend.credentials,
                              client_options={"api_endpoint": backend.api_endpoint})


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _versions(backend: VertexBackend, client: Any, model: str, label: str, value: str) -> list[Any]:
    request = {"name": model, "filter": f"labels.{label}={_quote(value)}", "page_size": 100}
    return list(client.list_model_versions(request=request, timeout=backend.timeout))


def _target(backend: VertexBackend, client: Any, config: JobConfig) -> str | None:
    """The model a new version goes to: `model.parent`, else the oldest with the display name, else None."""
    assert config.model is not None
    named = parent_model(config.model, backend.project, backend.region)
    if named is not None:
        return named
    request = {"parent": backend.parent, "filter": f"display_name={_quote(config.model.display_name)}",
               "page_size": 100}
    found = sorted(client.list_models(request=request, timeout=backend.timeout), key=lambda m: (m.create_time, m.name))
    return str(found[0].name) if found else None


def _existing(backend: VertexBackend, client: Any, model: str | None, job_id: str, digest: str,
              new_each_run: bool) -> Registered | None:  # fmt: skip
    if model is None:
        return None
    mine = _versions(backend, client, model, MODEL_JOB_LABEL, job_id)
    if mine:
        return Registered(model, str(mine[0].version_id), False, f"uploaded for job {job_id} already")
    if digest and not new_each_run:
        same = _versions(backend, client, model, MODEL_HASH_LABEL, digest)
        if same:
            return Registered(model, str(same[-1].version_id), False,
                              f"a version with the same {MODEL_HASH_LABEL} {digest} exists "
                              "(model.new_version_each_run: true uploads one per run)")
    return None


def register_model(backend: VertexBackend, config: JobConfig, job: VertexJob) -> Registered:
    """Upload `job`'s AIP_MODEL_DIR as `config.model` says, or find the version already made."""
    if config.model is None:
        raise ConfigError([Problem("model", "the job file has no model: block; add one to register the job's model",
                                   str(config.source) if config.source else None)])
    state = job.refresh()
    if state != "JOB_STATE_SUCCEEDED":
        raise BackendError(f"job {job.name} is {state}: only a job that SUCCEEDED has a model to upload; nothing "
                           "was uploaded")
    proto = job.proto
    base = proto.job_spec.base_output_directory.output_uri_prefix or config.base_output_dir
    if not base:
        raise BackendError(f"job {job.name} has no base output directory, so Vertex set no AIP_MODEL_DIR: there is "
                           "no model to upload")
    digest = str(proto.labels.get(MODEL_HASH_LABEL, ""))  # the job's own label, of the same name
    client = model_client(backend)
    made: list[bool] = []

    def attempt() -> Registered:
        from google.cloud.aiplatform_v1 import UploadModelRequest

        target = _target(backend, client, config)
        found = _existing(backend, client, target, job.job_id, digest, config.model.new_version_each_run
                          if config.model else False)
        if found is not None:
            return found if not made else Registered(found.model, found.version_id, True)
        body = build_upload(config, project=backend.project, config_hash=digest, base_output_dir=base,
                            job_id=job.job_id, parent=target)
        request = UploadModelRequest.from_json(_json({"parent": backend.parent, **body}))
        made.append(True)
        operation = client.upload_model(request=request, timeout=backend.timeout)
        result = operation.result(timeout=UPLOAD_TIMEOUT)
        return Registered(str(result.model), str(result.model_version_id), True)

    parent = parent_model(config.model, backend.project, backend.region)  # a 404 is about it, when there is one
    return backend._call(attempt, action=f"register the model of job {job.name}",
                         resource=parent or backend.parent, permission="aiplatform.models.upload")


def register_after(job: VertexJob, config: JobConfig, state: str, *, tuning: bool = False) -> Registered | None:
    """After `job` ended in `state`: its model registered as `config.model` says (:func:`register_model`) when it
    SUCCEEDED and the job file has a `model:` block, and kept as ``job.registered``; None otherwise. What
    ``vtrain.submit(..., wait=True)`` and `vtrain submit --wait` do once the job ends. A tuning study has no one
    model (validate refuses `model:` there)."""
    if config.model is None or tuning or state != "JOB_STATE_SUCCEEDED":
        return None
    job.registered = register_model(job._backend, config, job)
    return job.registered


def find_parent(backend: VertexBackend, config: JobConfig) -> tuple[str, Any]:
    """`model.parent` as a full name, and the model (its default version) or None when it does not exist (for
    preflight: the upload after the job is the first use of the parent). Other refusals are a BackendError."""
    from google.api_core.exceptions import NotFound

    assert config.model is not None
    name = parent_model(config.model, backend.project, backend.region)
    assert name is not None
    client = model_client(backend)

    def get() -> Any:
        try:
            return client.get_model(name=name, timeout=backend.timeout)
        except NotFound:
            return None

    return name, backend._call(get, action=f"read the parent model {name}", resource=name,
                               permission="aiplatform.models.get")


def upload_request(plan: Any) -> dict[str, Any]:
    """The UploadModel request a succeeding job of this plan (a cloud.submit.SubmitPlan) sends (`model:`),
    as far as it is known offline."""
    from vtrain.request.model_upload import upload_url

    target = plan.target
    body = build_upload(plan.config, project=target.project, config_hash=plan.config_hash)
    return {"method": "POST", "url": upload_url(target.endpoint, target.project, target.region), "body": body,
            "addedAtUpload": f"label {MODEL_JOB_LABEL} (the job's ID); parentModel, when a model named "
                             f"'{plan.config.model.display_name if plan.config.model else ''}' exists in the region"}


def _json(doc: dict[str, Any]) -> str:
    import json

    return json.dumps(doc)


def model_of_job(backend: VertexBackend, job_id: str) -> Registered | None:
    """The model version vtrain uploaded for this job, if any (for `vtrain status`): one models.list call
    when it is its model's default version, else a look through the versions of a few vtrain models."""
    client = model_client(backend)

    def look() -> Registered | None:
        request = {"parent": backend.parent, "filter": f"labels.{MODEL_JOB_LABEL}={_quote(job_id)}", "page_size": 1}
        for model in client.list_models(request=request, timeout=backend.timeout):
            return Registered(str(model.name), str(model.version_id), False)
        request = {"parent": backend.parent, "filter": f"labels:{MODEL_HASH_LABEL}", "page_size": LOOKUP_MODELS}
        page = client.list_models(request=request, timeout=backend.timeout)
        for model in list(page.models)[:LOOKUP_MODELS]:
            versions = _versions(backend, client, str(model.name), MODEL_JOB_LABEL, job_id)
            if versions:
                return Registered(str(model.name), str(versions[0].version_id), False)
        return None

    return backend._call(look, action=f"look up the model of job {job_id}",
                         resource=backend.parent, permission="aiplatform.models.list")


__all__ = ["Registered", "find_parent", "model_client", "model_of_job", "register_model", "upload_request"]
