"""Vertex AI Model Registry in the emulator: the ModelService, v1 REST, as `ModelServiceClient`
(transport="rest") and the SDK's `aiplatform.Model` call it:

    POST /v1/projects/P/locations/L/models:upload                   → Operation, not done: polled until done
    GET  /v1/projects/P/locations/L/models/ID/operations/OP         the upload's Operation (done on a later GET;
                                                                    aiplatform_v1's REST client asks at /ui/...)
    GET  /v1/projects/P/locations/L/models                          list: default versions (filter, pageSize, pageToken)
    GET  /v1/projects/P/locations/L/models/ID[@VERSION|@ALIAS]      get: the default version, or the one named
    GET  /v1/projects/P/locations/L/models/ID:listVersions          every version (filter on labels)
    POST /v1/projects/P/locations/L/models/ID:mergeVersionAliases   add (or `-alias`: remove) aliases of a version

As on Vertex, an upload is a long-running operation: the answer to the upload is `done: false`, and the
model exists from the next ModelService request on (the operation's GET then reports it done), so every
client polls at least once, and one that lost the upload's answer finds the model when it looks.
`parentModel` makes a new version of that model (versionId 2, 3, ...); the first version carries
the alias `default`, which stays with the default version; an alias names one version of a model at a
time. List filters, as the Discovery document says: `model`, `display_name` (`displayName`), `labels.K`,
`labels:K` (listVersions: labels only); page size 100 by default and at most (larger is cut to 100).
Bodies parse strictly into aiplatform.v1.UploadModelRequest; output-only Model fields are dropped.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from google.cloud.aiplatform_v1.types import MergeVersionAliasesRequest, UploadModelRequest
from google.protobuf import json_format

from vtrain.emulator.errors import ApiError, invalid_argument, not_found
from vtrain.emulator.filters import _TERM_RE, Predicate, _unquote, compile_filter
from vtrain.emulator.filters import _term as job_term
from vtrain.emulator.projects import authorize, project_number
from vtrain.emulator.store import _rfc3339
from vtrain.emulator.validation import check_parent, parse_strict
from vtrain.emulator.wire import PAGE_SIZE, page_params

_BASE = r"^/v1/projects/([^/]+)/locations/([^/]+)/models"
_UPLOAD = re.compile(_BASE + r":upload$")
_COLLECTION = re.compile(_BASE + r"$")
_MODEL = re.compile(_BASE + r"/([^/:@]+)(?:@([^/:]+))?(:listVersions|:mergeVersionAliases)?$")
#: The REST client polls an operation at /ui/{name} (its first http rule for GetOperation), /v1/{name} too.
_OPERATION = re.compile(r"^/(?:v1|ui)/projects/([^/]+)/locations/([^/]+)/models/([^/:@]+)/operations/([^/:]+)$")
_ALIAS = re.compile(r"^-?[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]$")
#: ListModels / ListModelVersions page size: the default and the most one page holds.
#: Output-only Model fields a client may echo back; dropped on upload (AIP-203).
_OUTPUT_ONLY = ("name", "version_id", "version_create_time", "version_update_time", "create_time", "update_time",
                "etag", "supported_deployment_resources_types", "supported_input_storage_formats",
                "supported_output_storage_formats", "deployed_models", "training_pipeline", "model_source_info",
                "supported_export_formats", "original_model_info", "metadata_artifact")
DEFAULT_ALIAS = "default"


def handles(path: str) -> bool:
    return bool(_UPLOAD.match(path) or _COLLECTION.match(path) or _MODEL.match(path) or _OPERATION.match(path))


class ModelRegistry:
    """Models by resource name (project number); each a list of versions, the dicts the API answers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.models: dict[str, list[dict[str, Any]]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, tuple[str, dict[str, Any], str | None]] = {}  # op name -> (model, version, parent)
        self._next = 1000

    def new_id(self) -> str:
        with self._lock:
            self._next += 1
            return str(5_000_000_000_000_000_000 + self._next)

    def start(self, model_name: str, version: dict[str, Any], parent: str | None) -> dict[str, Any]:
        now = _rfc3339()
        op_name = f"{model_name}/operations/{self.new_id()}"
        op = {"name": op_name, "done": False,
              "metadata": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelOperationMetadata",
                           "genericMetadata": {"createTime": now, "updateTime": now}}}
        with self._lock:
            self.operations[op_name] = op
            self._pending[op_name] = (model_name, version, parent)
        return op

    def settle(self) -> None:
        """Finish every upload still pending: the emulator's uploads take until the next request (a client
        that lost the upload's answer finds the model on its next look, as on Vertex)."""
        with self._lock:
            pending = list(self._pending)
        for op_name in pending:
            self.poll(op_name)

    def poll(self, op_name: str) -> dict[str, Any] | None:
        """The operation; a pending upload is finished by this GET (the model appears now)."""
        with self._lock:
            op = self.operations.get(op_name)
            pending = self._pending.pop(op_name, None)
            if op is None or pending is None:
                return op
            model_name, version, parent = pending
            versions = self.models.setdefault(model_name, [])
            now = _rfc3339()
            version_id = str(len(versions) + 1)
            aliases = [a for a in version.get("versionAliases", []) if a != DEFAULT_ALIAS]
            for other in versions:  # an alias names one version at a time: the newest takes it
                other["versionAliases"] = [a for a in other.get("versionAliases", []) if a not in aliases]
            if not versions:
                aliases.insert(0, DEFAULT_ALIAS)
            created = versions[0]["createTime"] if versions else now
            versions.append({**version, "name": model_name, "versionId": version_id, "versionAliases": aliases,
                             "createTime": created, "updateTime": now, "versionCreateTime": now,
                             "versionUpdateTime": now, "etag": f"v{version_id}",
                             "supportedDeploymentResourcesTypes": ["DEDICATED_RESOURCES"],
                             "modelSourceInfo": {"sourceType": "CUSTOM"}})
            op.update(done=True, metadata={**op["metadata"], "genericMetadata": {
                **op["metadata"]["genericMetadata"], "updateTime": now}},
                response={"@type": "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelResponse",
                          "model": model_name, "modelVersionId": version_id})
            return op

    def version(self, model_name: str, ref: str | None) -> dict[str, Any]:
        with self._lock:
            versions = self.models.get(model_name)
            if not versions:
                raise not_found(f"Model {model_name} is not found.")
            wanted = ref or DEFAULT_ALIAS
            for v in versions:
                if v["versionId"] == wanted or wanted in v.get("versionAliases", []):
                    return _answer(v)
        raise not_found(f"Model {model_name}@{ref} is not found.")

    def defaults(self, parent: str) -> list[dict[str, Any]]:
        with self._lock:
            return [_answer(next(v for v in vs if DEFAULT_ALIAS in v.get("versionAliases", [])))
                    for name, vs in sorted(self.models.items()) if name.startswith(parent + "/models/") and vs]

    def versions(self, model_name: str) -> list[dict[str, Any]]:
        with self._lock:
            if model_name not in self.models:
                raise not_found(f"Model {model_name} is not found.")
            return [_answer(v) for v in self.models[model_name]]

    def merge_aliases(self, model_name: str, ref: str | None, aliases: list[str]) -> dict[str, Any]:
        target = self.version(model_name, ref)
        with self._lock:
            versions = self.models[model_name]
            version = next(v for v in versions if v["versionId"] == target["versionId"])
            for alias in aliases:
                if alias.startswith("-"):
                    if alias[1:] == DEFAULT_ALIAS:
                        raise invalid_argument("The default alias cannot be removed from a version.")
                    version["versionAliases"] = [a for a in version["versionAliases"] if a != alias[1:]]
                elif alias not in version["versionAliases"]:
                    for other in versions:
                        other["versionAliases"] = [a for a in other.get("versionAliases", []) if a != alias]
                    version["versionAliases"].append(alias)
            version["versionUpdateTime"] = _rfc3339()
            return _answer(version)


def _answer(version: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, list) else v) for k, v in version.items()}


def _model_term(m: re.Match[str]) -> Predicate:
    """ListModels' fields (Discovery: model, display_name, labels, base_model_name) over the API's dicts."""
    field, op = m["field"], m["op"]
    if field in ("model", "base_model_name", "baseModelName"):
        if op not in ("=", "!="):
            raise invalid_argument(f"Invalid filter: {field} supports = and !=, got '{m.group(0)}'.")
        value = _unquote(m["value"])
        key = "model" if field == "model" else "baseModelName"
        return lambda v: (_field(v, key) == value) == (op == "=")
    return _versions_term(m, allow_display=True)


def _versions_term(m: re.Match[str], allow_display: bool = False) -> Predicate:
    field = m["field"]
    if field == "displayName":
        field = "display_name"
    known = field == "labels" or field.startswith("labels.") or (allow_display and field == "display_name")
    if not known:
        raise invalid_argument(f"Invalid filter: unsupported field or operator in '{m.group(0)[:200]}'.")
    rewritten = _TERM_RE.match(f"{field}{m['op']}{m['value']}")
    assert rewritten is not None
    inner = job_term(rewritten)
    return lambda v: inner(_View(v))


class _View:
    """A model version as the job filter's terms read a job: display_name, labels."""

    def __init__(self, version: dict[str, Any]) -> None:
        self.display_name = version.get("displayName", "")
        self.labels = version.get("labels", {})


def _field(version: dict[str, Any], key: str) -> str:
    if key == "model":
        return str(version["name"].rsplit("/", 1)[-1])
    return str(version.get(key, ""))


def _page(items: list[dict[str, Any]], query: dict[str, str], key: str) -> dict[str, Any]:
    size, token = page_params(query, default=PAGE_SIZE, most=PAGE_SIZE)
    start = int(token) - 1 if token else 0
    page = items[start: start + size]
    answer: dict[str, Any] = {key: page} if page else {}
    if start + size < len(items):
        answer["nextPageToken"] = str(start + size + 1)
    return answer


def route(server: Any, command: str, path: str, query: dict[str, str], body: bytes) -> dict[str, Any]:
    reg: ModelRegistry = server.models
    m = _UPLOAD.match(path) or _COLLECTION.match(path) or _MODEL.match(path) or _OPERATION.match(path)
    assert m is not None
    project, location = m.group(1), m.group(2)
    check_parent(project, location)
    parent = f"projects/{project_number(project)}/locations/{location}"
    if not _UPLOAD.match(path):
        reg.settle()  # an upload is done by the next request: the operation's GET, or any other
    if _UPLOAD.match(path):
        if command != "POST":
            raise not_found(f"Method {command} not found for {path}.")
        authorize(server, project, parent, "aiplatform.models.upload")
        return _upload(reg, parent, body)
    if _COLLECTION.match(path):
        if command != "GET":
            raise not_found(f"Method {command} not found for {path}.")
        authorize(server, project, parent, "aiplatform.models.list")
        match = compile_filter(query.get("filter", ""), _model_term)
        return _page([v for v in reg.defaults(parent) if match(v)], query, "models")
    op = _OPERATION.match(path)
    if op is not None:
        name = f"{parent}/models/{op.group(3)}/operations/{op.group(4)}"
        if command != "GET":
            raise not_found(f"Method {command} not found for {path}.")
        authorize(server, project, f"{parent}/models/{op.group(3)}", "aiplatform.operations.get")
        found = reg.poll(name)
        if found is None:
            raise not_found(f"Operation {name} is not found.")
        return found
    m = _MODEL.match(path)
    assert m is not None
    model_id, ref, verb = m.group(3), m.group(4), m.group(5)
    name = f"{parent}/models/{model_id}"
    if verb is None and command == "GET":
        authorize(server, project, name, "aiplatform.models.get")
        return reg.version(name, ref)
    if verb == ":listVersions" and command == "GET" and ref is None:
        authorize(server, project, name, "aiplatform.models.list")
        match = compile_filter(query.get("filter", ""), _versions_term)
        return _page([v for v in reg.versions(name) if match(v)], query, "models")
    if verb == ":mergeVersionAliases" and command == "POST":
        authorize(server, project, name, "aiplatform.models.update")
        request = parse_strict(body, MergeVersionAliasesRequest.pb()(), "merge_version_aliases_request", ())
        aliases = list(request.version_aliases)
        if not aliases or not all(_ALIAS.match(a) for a in aliases):
            raise invalid_argument("version_aliases must be non-empty, each matching [a-z][a-zA-Z0-9-]{0,126}[a-z0-9] "
                                   "(a leading '-' removes one).")
        return reg.merge_aliases(name, ref, aliases)
    raise not_found(f"Method {command} not found for {path}.")


def _upload(reg: ModelRegistry, parent: str, body: bytes) -> dict[str, Any]:
    request = parse_strict(body, UploadModelRequest.pb()(), "upload_model_request", ())
    if not request.HasField("model"):
        raise invalid_argument("UploadModelRequest.model is required.", [("model", "required")])
    for field in _OUTPUT_ONLY:
        request.model.ClearField(field)
    model = request.model
    if not model.display_name:
        raise invalid_argument("Model.display_name is required.", [("model.display_name", "required")])
    if len(model.display_name) > 128:
        raise invalid_argument("Model.display_name is longer than 128 characters.")
    for alias in model.version_aliases:
        if alias == DEFAULT_ALIAS or not _ALIAS.match(alias) or alias.startswith("-"):
            raise invalid_argument(f"Invalid version alias '{alias}'.", [("model.version_aliases", "invalid")])
    if not model.artifact_uri and not model.container_spec.image_uri:
        raise invalid_argument("Model.container_spec.image_uri is required.",
                               [("model.container_spec.image_uri", "required")])
    version = dict(json_format.MessageToDict(model))
    if request.parent_model:
        parent_model = request.parent_model
        pm = re.match(r"^projects/([^/]+)/locations/([^/]+)/models/([^/@]+)$", parent_model)
        if pm is None:
            raise invalid_argument(f"Invalid parent_model '{parent_model}'.", [("parent_model", "invalid")])
        model_name = f"projects/{project_number(pm.group(1))}/locations/{pm.group(2)}/models/{pm.group(3)}"
        if not model_name.startswith(parent + "/"):
            raise invalid_argument(f"The parent model {parent_model} is not in {parent}.")
        if not reg.models.get(model_name):
            raise not_found(f"Model {parent_model} is not found.")
        return reg.start(model_name, version, model_name)
    if request.model_id:
        if not re.match(r"^[a-z_][a-z0-9_-]{0,62}$", request.model_id):
            raise invalid_argument(f"Invalid model_id '{request.model_id}'.", [("model_id", "invalid")])
        model_name = f"{parent}/models/{request.model_id}"
        if reg.models.get(model_name):
            raise ApiError(409, "ALREADY_EXISTS", f"Model {model_name} already exists.")
    else:
        model_name = f"{parent}/models/{reg.new_id()}"
    return reg.start(model_name, version, None)


__all__ = ["PAGE_SIZE", "ModelRegistry", "handles", "route"]
