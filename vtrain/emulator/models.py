"""Vertex AI Model Registry in the emulator: the ModelService, v1 REST, as `ModelServiceClient`
(transport="rest") and the SDK's `aiplatform.Model` / `ModelRegistry` call it:

    POST   /v1/projects/P/locations/L/models:upload                 → Operation, not done: polled until done
    GET    /v1/projects/P/locations/L/models/ID/operations/OP       an Operation (an upload's is done on a later GET;
                                                                    aiplatform_v1's REST client asks at /ui/...)
    GET    /v1/projects/P/locations/L/models                        list: default versions (filter, pageSize, pageToken)
    GET    /v1/projects/P/locations/L/models/ID[@VERSION|@ALIAS]    get: the default version, or the one named
    PATCH  /v1/projects/P/locations/L/models/ID[@VERSION]           update (updateMask): the model's display_name,
                                                                    description, labels; a version's
                                                                    version_description, labels
    DELETE /v1/projects/P/locations/L/models/ID                     delete the model, every version → done Operation
    DELETE /v1/projects/P/locations/L/models/ID@V:deleteVersion     delete a version (never the default, nor the only
                                                                    one) → done Operation
    GET    /v1/projects/P/locations/L/models/ID:listVersions        every version (filter on labels)
    POST   /v1/projects/P/locations/L/models/ID:mergeVersionAliases add (or `-alias`: remove) aliases of a version

As on Vertex, an upload is a long-running operation: the answer to the upload is `done: false`, and the
model exists from the next ModelService request on (the operation's GET then reports it done), so every
client polls at least once, and one that lost the upload's answer finds the model when it looks.
`parentModel` makes a new version of that model (versionId 2, 3, ...). The first version always has the
alias `default`; a later one takes it when its upload lists `default` (the SDK's `is_default_version=True`,
its default), else it stays where it was; an alias names one version of a model at a time. Labels: a
model's own (PATCH without a version) and each version's, merged in every answer ("Both the model labels
and the version labels are merged when a model is returned", UpdateModelRequest). List filters, as the
Discovery document says: `model`, `display_name` (`displayName`), `labels.K`, `labels:K` (listVersions:
labels only); page size 100 by default and at most (larger is cut to 100).

Uploads are checked as Vertex checks them, by the checks customJobs.create uses where the field is the same
(:func:`vtrain.emulator.validation.check_model_upload`: display name, labels, the image reference, aliases,
artifactUri), and the model directory holds what its prebuilt prediction image loads (:mod:`.artifacts`).
Bodies parse strictly into aiplatform.v1.UploadModelRequest; output-only Model fields are dropped.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from google.cloud.aiplatform_v1.types import MergeVersionAliasesRequest, Model, UploadModelRequest
from google.protobuf import json_format

from vtrain.emulator import artifacts
from vtrain.emulator.errors import ApiError, failed_precondition, invalid_argument, not_found
from vtrain.emulator.filters import _TERM_RE, Predicate, _unquote, compile_filter
from vtrain.emulator.filters import _term as job_term
from vtrain.emulator.projects import authorize, canonical, project_number
from vtrain.emulator.store import _rfc3339
from vtrain.emulator.validation import (
    ALIAS_RE,
    check_model_upload,
    check_parent,
    display_name_problems,
    label_problems,
    parse_strict,
)
from vtrain.emulator.wire import PAGE_SIZE, empty_body, page_params

_BASE = r"^/v1/projects/([^/]+)/locations/([^/]+)/models"
_UPLOAD = re.compile(_BASE + r":upload$")
_COLLECTION = re.compile(_BASE + r"$")
_MODEL = re.compile(_BASE + r"/([^/:@]+)(?:@([^/:]+))?(:listVersions|:mergeVersionAliases|:deleteVersion)?$")
#: The REST client polls an operation at /ui/{name} (its first http rule for GetOperation), /v1/{name} too.
_OPERATION = re.compile(r"^/(?:v1|ui)/projects/([^/]+)/locations/([^/]+)/models/([^/:@]+)/operations/([^/:]+)$")
#: ListModels / ListModelVersions page size: the default and the most one page holds.
#: Output-only Model fields a client may echo back; dropped on upload (AIP-203).
_OUTPUT_ONLY = ("name", "version_id", "version_create_time", "version_update_time", "create_time", "update_time",
                "etag", "supported_deployment_resources_types", "supported_input_storage_formats",
                "supported_output_storage_formats", "deployed_models", "training_pipeline", "model_source_info",
                "supported_export_formats", "original_model_info", "metadata_artifact")
DEFAULT_ALIAS = "default"
#: What UpdateModel changes (UpdateModelRequest.model: "Supported model fields: display_name, description;
#: supported version-specific fields: version_description. Labels are supported in both scenarios").
MODEL_FIELDS = frozenset({"display_name", "description", "labels"})
VERSION_FIELDS = frozenset({"version_description", "labels"})


def handles(path: str) -> bool:
    return bool(_UPLOAD.match(path) or _COLLECTION.match(path) or _MODEL.match(path) or _OPERATION.match(path))


class ModelRegistry:
    """Models by resource name (project number); each a list of versions, the dicts the API answers, and the
    model's own labels (merged into every version's answer)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.models: dict[str, list[dict[str, Any]]] = {}
        self.model_labels: dict[str, dict[str, str]] = {}
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
            version_id = str(max((int(v["versionId"]) for v in versions), default=0) + 1)
            aliases = list(version.get("versionAliases", []))
            if not versions and DEFAULT_ALIAS not in aliases:  # the first version is the default one
                aliases.append(DEFAULT_ALIAS)
            for other in versions:  # an alias names one version at a time: the newest takes it
                other["versionAliases"] = [a for a in other.get("versionAliases", []) if a not in aliases]
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

    def _find(self, model_name: str, ref: str | None) -> dict[str, Any]:
        """The stored version `ref` (an ID or an alias; None: the default one). Hold the lock."""
        versions = self.models.get(model_name)
        if not versions:
            raise not_found(f"Model {model_name} is not found.")
        wanted = ref or DEFAULT_ALIAS
        for v in versions:
            if v["versionId"] == wanted or wanted in v.get("versionAliases", []):
                return v
        raise not_found(f"Model {model_name}@{ref} is not found.")

    def version(self, model_name: str, ref: str | None) -> dict[str, Any]:
        with self._lock:
            return self._answer(self._find(model_name, ref))

    def defaults(self, parent: str) -> list[dict[str, Any]]:
        with self._lock:
            return [self._answer(next(v for v in vs if DEFAULT_ALIAS in v.get("versionAliases", [])))
                    for name, vs in sorted(self.models.items()) if name.startswith(parent + "/models/") and vs]

    def versions(self, model_name: str) -> list[dict[str, Any]]:
        with self._lock:
            if model_name not in self.models:
                raise not_found(f"Model {model_name} is not found.")
            return [self._answer(v) for v in self.models[model_name]]

    def merge_aliases(self, model_name: str, ref: str | None, aliases: list[str]) -> dict[str, Any]:
        with self._lock:
            version = self._find(model_name, ref)
            for alias in aliases:
                if alias.startswith("-"):
                    if alias[1:] == DEFAULT_ALIAS:
                        raise invalid_argument("The default alias cannot be removed from a version.")
                    version["versionAliases"] = [a for a in version["versionAliases"] if a != alias[1:]]
                elif alias not in version["versionAliases"]:
                    for other in self.models[model_name]:
                        other["versionAliases"] = [a for a in other.get("versionAliases", []) if a != alias]
                    version["versionAliases"].append(alias)
            version["versionUpdateTime"] = _rfc3339()
            return self._answer(version)

    def update(self, model_name: str, ref: str | None, value: dict[str, Any], fields: frozenset[str],
               of_version: bool) -> dict[str, Any]:  # fmt: skip
        """UpdateModel of the model's `fields` (`of_version` False) or of version `ref`'s; the answer is the
        version (the default one for a model update) as a GET answers it after."""
        now = _rfc3339()
        with self._lock:
            target = self._find(model_name, ref)
            if of_version:
                if "version_description" in fields:
                    _set(target, "versionDescription", value.get("versionDescription"))
                if "labels" in fields:
                    _set(target, "labels", dict(value.get("labels", {})))
                target["versionUpdateTime"] = now
            else:
                for version in self.models[model_name]:  # the model's fields: every version shows them
                    for field, key in (("display_name", "displayName"), ("description", "description")):
                        if field in fields:
                            _set(version, key, value.get(key))
                    version["updateTime"] = now
                if "labels" in fields:
                    self.model_labels[model_name] = dict(value.get("labels", {}))
            head, _, count = str(target["etag"]).partition("-")
            target["etag"] = f"{head}-{int(count) + 1 if count.isdigit() else 1}"  # v2, v2-1, v2-2, ...
            return self._answer(target)

    def delete_version(self, model_name: str, ref: str) -> None:
        """DeleteModelVersion, refused as Vertex refuses it: the only version of a model ("Deleting the only
        version in the Model is not allowed. Use DeleteModel"), and the default version (another version must
        be made the default first)."""
        with self._lock:
            target = self._find(model_name, ref)
            versions = self.models[model_name]
            if len(versions) == 1:
                raise failed_precondition(f"Version {target['versionId']} is the only version of {model_name}, and "
                                          "deleting the only version in the Model is not allowed: delete the Model "
                                          "instead.")
            if DEFAULT_ALIAS in target.get("versionAliases", []):
                raise failed_precondition(f"Version {target['versionId']} is the default version of {model_name}, "
                                          "which cannot be deleted: make another version the default first "
                                          "(mergeVersionAliases with 'default').")
            versions.remove(target)

    def delete(self, model_name: str) -> None:
        with self._lock:
            if not self.models.get(model_name):
                raise not_found(f"Model {model_name} is not found.")
            del self.models[model_name]
            self.model_labels.pop(model_name, None)

    def finished(self, model_name: str) -> dict[str, Any]:
        """The done Operation of a delete (kept, so that operations.get answers it too)."""
        now = _rfc3339()
        op_name = f"{model_name}/operations/{self.new_id()}"
        op = {"name": op_name, "done": True,
              "metadata": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
                           "genericMetadata": {"createTime": now, "updateTime": now}},
              "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}
        with self._lock:
            self.operations[op_name] = op
        return op

    def _answer(self, version: dict[str, Any]) -> dict[str, Any]:
        """A version as the API answers it: a copy, with the model's labels merged into the version's."""
        out = {k: (list(v) if isinstance(v, list) else v) for k, v in version.items()}
        labels = {**version.get("labels", {}), **self.model_labels.get(version["name"], {})}
        if labels:
            out["labels"] = labels
        return out


def _set(version: dict[str, Any], key: str, value: Any) -> None:
    """Set a field of a stored version; an empty value clears it (proto3 JSON leaves empty fields out)."""
    if value:
        version[key] = value
    else:
        version.pop(key, None)


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
        return _upload(server, reg, parent, body)
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
    if verb is None and command == "PATCH":
        authorize(server, project, name, "aiplatform.models.update")
        return _update(reg, name, ref, body, query)
    if verb is None and command == "DELETE" and ref is None:
        authorize(server, project, name, "aiplatform.models.delete")
        empty_body(body, "DeleteModelRequest")
        reg.delete(name)
        return reg.finished(name)
    if verb == ":deleteVersion" and command == "DELETE":
        authorize(server, project, name, "aiplatform.models.delete")
        empty_body(body, "DeleteModelVersionRequest")
        if ref is None:
            raise invalid_argument(f"The name must name a version: {name}@VERSION_ID.", [("name", "no version")])
        reg.delete_version(name, ref)
        return reg.finished(name)
    if verb == ":listVersions" and command == "GET" and ref is None:
        authorize(server, project, name, "aiplatform.models.list")
        match = compile_filter(query.get("filter", ""), _versions_term)
        return _page([v for v in reg.versions(name) if match(v)], query, "models")
    if verb == ":mergeVersionAliases" and command == "POST":
        authorize(server, project, name, "aiplatform.models.update")
        request = parse_strict(body, MergeVersionAliasesRequest.pb()(), "merge_version_aliases_request", ())
        aliases = list(request.version_aliases)
        if not aliases or not all(ALIAS_RE.match(a.removeprefix("-")) for a in aliases):
            raise invalid_argument("version_aliases must be non-empty, each matching [a-z][a-zA-Z0-9-]{0,126}[a-z0-9] "
                                   "(a leading '-' removes one).")
        return reg.merge_aliases(name, ref, aliases)
    raise not_found(f"Method {command} not found for {path}.")


def _update(reg: ModelRegistry, name: str, ref: str | None, body: bytes, query: dict[str, str]) -> dict[str, Any]:
    """PATCH models/ID[@V]?updateMask=...: the body is the Model. Without a version it updates the model
    (display_name, description, labels), with one (or a mask with version_description, as the SDK's
    update_version sends it with the version's ID in the body) that version (version_description, labels);
    "One request cannot update both the model and the version fields"."""
    model = parse_strict(body, Model.pb()(), "model", ())
    mask = query.get("updateMask", query.get("update_mask", ""))
    fields = frozenset(re.sub(r"(?<!^)(?=[A-Z])", "_", p.strip()).lower() for p in mask.split(",") if p.strip())
    if not fields:
        raise invalid_argument("update_mask is required: the fields to update.", [("update_mask", "required")])
    if model.name and canonical(model.name.split("@", 1)[0]) != canonical(name):
        raise invalid_argument(f"The model's name {model.name[:300]} is not {name}.", [("model.name", "mismatch")])
    of_version = ref not in (None, "-") or "version_description" in fields
    allowed = VERSION_FIELDS if of_version else MODEL_FIELDS
    wrong = sorted(fields - allowed)
    if wrong:
        both = of_version and set(wrong) <= MODEL_FIELDS
        why = ("one request cannot update both the model and the version fields" if both else
               f"it is not a field UpdateModel changes ({', '.join(sorted(allowed))})")
        raise invalid_argument(f"Invalid update_mask path '{wrong[0][:100]}': {why}.", [("update_mask", why)])
    value = dict(json_format.MessageToDict(model))
    problems = (display_name_problems(model.display_name, "model.display_name") if "display_name" in fields else [])
    problems += label_problems(model.labels, "model.labels") if "labels" in fields else []
    if problems:
        raise invalid_argument(f"{problems[0][0]}: {problems[0][1]}", problems)
    version = ref if ref not in (None, "-") else (model.version_id or None) if of_version else None
    return reg.update(name, version, value, fields, of_version)


def _upload(server: Any, reg: ModelRegistry, parent: str, body: bytes) -> dict[str, Any]:
    request = parse_strict(body, UploadModelRequest.pb()(), "upload_model_request", ())
    if not request.HasField("model"):
        raise invalid_argument("UploadModelRequest.model is required.", [("model", "required")])
    for field in _OUTPUT_ONLY:
        request.model.ClearField(field)
    check_model_upload(request)
    model = request.model
    version = dict(json_format.MessageToDict(model))
    if request.parent_model:
        parent_model = request.parent_model
        pm = re.match(r"^projects/([^/]+)/locations/([^/]+)/models/([^/@]+)$", parent_model)
        if pm is None:
            raise invalid_argument(f"Invalid parent_model '{parent_model[:300]}'.", [("parent_model", "invalid")])
        model_name = f"projects/{project_number(pm.group(1))}/locations/{pm.group(2)}/models/{pm.group(3)}"
        if not model_name.startswith(parent + "/"):
            raise invalid_argument(f"The parent model {parent_model} is not in {parent}.")
        if not reg.models.get(model_name):
            raise not_found(f"Model {parent_model} is not found.")
    elif request.model_id:
        model_name = f"{parent}/models/{request.model_id}"
        if reg.models.get(model_name):
            raise ApiError(409, "ALREADY_EXISTS", f"Model {model_name} already exists.")
    else:
        model_name = ""
    artifacts.check_model_dir(model.artifact_uri, model.container_spec.image_uri, server.store)
    return reg.start(model_name or f"{parent}/models/{reg.new_id()}", version,
                     model_name if request.parent_model else None)


__all__ = ["PAGE_SIZE", "ModelRegistry", "handles", "route"]
