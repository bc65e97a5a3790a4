"""TensorBoard instances and Vertex ML Metadata (Experiments) in the emulator, v1 REST, as
`TensorboardServiceClient` and `MetadataServiceClient` (transport="rest") call them:

    POST /v1/projects/P/locations/L/tensorboards                               create → Operation (done)
    GET  /v1/projects/P/locations/L/tensorboards                               list (filter, pageSize, pageToken)
    GET  /v1/projects/P/locations/L/tensorboards/ID                            get
    GET  /v1/projects/P/locations/L/tensorboards/ID/operations/OP              the create's Operation
    POST /v1/projects/P/locations/L/metadataStores?metadataStoreId=ID          create → Operation (done)
    GET  /v1/projects/P/locations/L/metadataStores/ID                          get
    POST /v1/projects/P/locations/L/metadataStores/S/contexts?contextId=ID     create → Context (409 if it exists)
    GET  /v1/projects/P/locations/L/metadataStores/S/contexts/ID               get

Bodies are parsed strictly into `aiplatform.v1.Tensorboard` / `Context` / `MetadataStore`; answers
name the project by number, as Vertex does. Like Vertex, a new project has no metadata store: the
client creates `default` first (the SDK's `ensure_default_metadata_store_exists`). Every call is
authorized like the JobService's (:func:`vtrain.emulator.projects.authorize`): `deny_projects`,
`--projects` and denied permissions answer IAM's 403. A list filter supports `display_name="X"`
(the one term vtrain sends); any other filter is a 400.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from google.cloud.aiplatform_v1.types import Context, MetadataStore, Tensorboard
from google.protobuf import json_format

from vtrain.emulator.errors import ApiError, invalid_argument, not_found
from vtrain.emulator.projects import authorize, project_number
from vtrain.emulator.store import _rfc3339
from vtrain.emulator.validation import check_parent
from vtrain.emulator.wire import json_body, page_params

_BOARDS = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/tensorboards(?:/([^/:]+))?(?:/operations/([^/:]+))?$")
_STORES = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/metadataStores(?:/([^/:]+))?$")
_CONTEXTS = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/metadataStores/([^/:]+)/contexts(?:/([^/:]+))?$")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
_DISPLAY_FILTER = re.compile(r'^\s*display_name\s*=\s*"((?:[^"\\]|\\.)*)"\s*$')
OPERATION_METADATA = "type.googleapis.com/google.cloud.aiplatform.v1.{}OperationMetadata"


def handles(path: str) -> bool:
    return bool(_BOARDS.match(path) or _STORES.match(path) or _CONTEXTS.match(path))


class MetadataResources:
    """TensorBoards, metadata stores and contexts, keyed by resource name (with the project number)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.tensorboards: dict[str, dict[str, Any]] = {}
        self.stores: dict[str, dict[str, Any]] = {}
        self.contexts: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self._next = 1000

    def new_id(self) -> str:
        with self._lock:
            self._next += 1
            return str(7_000_000_000_000_000_000 + self._next)

    def put(self, table: dict[str, dict[str, Any]], name: str, value: dict[str, Any], *, exists_ok: bool) -> bool:
        with self._lock:
            if name in table and not exists_ok:
                return False
            table[name] = value
            return True


def route(server: Any, command: str, path: str, query: dict[str, str], body: bytes) -> dict[str, Any]:
    res: MetadataResources = server.metadata
    m = _BOARDS.match(path) or _STORES.match(path) or _CONTEXTS.match(path)
    if m is not None:
        check_parent(m.group(1), m.group(2))
    m = _BOARDS.match(path)
    if m:
        return _tensorboards(server, res, command, m.groups(), query, body)
    m = _STORES.match(path)
    if m:
        project, location, store_id = m.groups()
        parent = f"projects/{project_number(project)}/locations/{location}"
        if store_id is None and command == "POST":
            authorize(server, project, parent, "aiplatform.metadataStores.create")
            store_id = query.get("metadataStoreId") or "default"
            given = _parse(body, MetadataStore, "MetadataStore")
            name = f"{parent}/metadataStores/{store_id}"
            now = _rfc3339()
            value = {**given, "name": name, "createTime": now, "updateTime": now}
            if not res.put(res.stores, name, value, exists_ok=False):
                raise ApiError(409, "ALREADY_EXISTS", f"MetadataStore {name} already exists.")
            return _done(res, name, "CreateMetadataStore", "MetadataStore", value)
        if store_id is not None and command == "GET":
            name = f"{parent}/metadataStores/{store_id}"
            authorize(server, project, name, "aiplatform.metadataStores.get")
            if name not in res.stores:
                raise not_found(f"MetadataStore {name} is not found.")
            return res.stores[name]
        raise not_found(f"Method {command} not found for {path}.")
    m = _CONTEXTS.match(path)
    if m is None:
        raise not_found(f"The requested URL {path} was not found on this server.")
    project, location, store_id, context_id = m.groups()
    store = f"projects/{project_number(project)}/locations/{location}/metadataStores/{store_id}"
    if context_id is None and command == "POST":
        authorize(server, project, store, "aiplatform.contexts.create")
        context = _parse(body, Context, "Context")
        if store not in res.stores:
            raise not_found(f"MetadataStore {store} is not found.")
        context_id = query.get("contextId") or res.new_id()
        if not _ID.match(context_id):
            raise invalid_argument(f"Invalid context ID '{context_id}': it must match [a-z0-9][a-z0-9-]{{0,127}}.")
        name = f"{store}/contexts/{context_id}"
        now = _rfc3339()
        value = {**context, "name": name, "etag": "1", "createTime": now, "updateTime": now}
        value.setdefault("displayName", context_id)
        if not res.put(res.contexts, name, value, exists_ok=False):
            raise ApiError(409, "ALREADY_EXISTS", f"Context {name} already exists.")
        return value
    if context_id is not None and command == "GET":
        name = f"{store}/contexts/{context_id}"
        authorize(server, project, name, "aiplatform.contexts.get")
        if name not in res.contexts:
            raise not_found(f"Context {name} is not found.")
        return res.contexts[name]
    raise not_found(f"Method {command} not found for {path}.")


def _tensorboards(server: Any, res: MetadataResources, command: str, groups: tuple[Any, ...],
                  query: dict[str, str], body: bytes) -> dict[str, Any]:  # fmt: skip
    project, location, board_id, operation = groups
    parent = f"projects/{project_number(project)}/locations/{location}"
    if board_id is None:
        verb = {"POST": "create", "GET": "list"}.get(command)
        if verb is None:
            raise not_found(f"Method {command} not found for tensorboards.")
        authorize(server, project, parent, f"aiplatform.tensorboards.{verb}")
        if verb == "list":
            return _list(res, parent, query)
        board = _parse(body, Tensorboard, "Tensorboard")
        if not board.get("displayName"):
            raise invalid_argument("Tensorboard.display_name is required.", [("display_name", "required")])
        board_id = res.new_id()
        name = f"{parent}/tensorboards/{board_id}"
        now = _rfc3339()
        value = {**board, "name": name, "createTime": now, "updateTime": now, "etag": "1",
                 "blobStoragePathPrefix": f"cloud-ai-platform-{board_id[-8:]}/tensorboard-{board_id}"}  # fmt: skip
        res.put(res.tensorboards, name, value, exists_ok=True)
        return _done(res, name, "CreateTensorboard", "Tensorboard", value)
    name = f"{parent}/tensorboards/{board_id}"
    if command != "GET":
        raise not_found(f"Method {command} not found for {name}.")
    authorize(server, project, name, "aiplatform.tensorboards.get")
    if operation is not None:
        op = res.operations.get(f"{name}/operations/{operation}")
        if op is None:
            raise not_found(f"Operation {name}/operations/{operation} is not found.")
        return op
    if name not in res.tensorboards:
        raise not_found(f"Tensorboard {name} is not found.")
    return res.tensorboards[name]


def _list(res: MetadataResources, parent: str, query: dict[str, str]) -> dict[str, Any]:
    size, token = page_params(query)
    text = query.get("filter", "")
    wanted = None
    if text.strip():
        m = _DISPLAY_FILTER.match(text)
        if m is None:
            raise invalid_argument(f"Unsupported filter: {text}")
        wanted = m.group(1).replace('\\"', '"').replace("\\\\", "\\")
    boards = [b for n, b in sorted(res.tensorboards.items()) if n.startswith(parent + "/")
              and (wanted is None or b.get("displayName") == wanted)]  # fmt: skip
    start = int(token) if token else 0
    size = size or 50
    page = boards[start : start + size]
    answer: dict[str, Any] = {"tensorboards": page} if page else {}
    if start + size < len(boards):
        answer["nextPageToken"] = str(start + size)
    return answer


def _parse(body: bytes, message: Any, what: str) -> dict[str, Any]:
    doc = json_body(body, what) if body else {}
    try:
        parsed = json_format.ParseDict(doc, message.pb()())
    except json_format.ParseError as err:
        raise invalid_argument(f"Invalid JSON payload received. {err}") from None
    return dict(json_format.MessageToDict(parsed))


def _done(res: MetadataResources, name: str, verb: str, kind: str, value: dict[str, Any]) -> dict[str, Any]:
    """A finished long-running operation, kept so operations.get answers it too."""
    now = _rfc3339()
    op: dict[str, Any] = {
        "name": f"{name}/operations/{res.new_id()}",
        "metadata": {"@type": OPERATION_METADATA.format(verb),
                     "genericMetadata": {"createTime": now, "updateTime": now}},  # fmt: skip
        "done": True,
        "response": {"@type": f"type.googleapis.com/google.cloud.aiplatform.v1.{kind}", **value},
    }
    res.put(res.operations, op["name"], op, exists_ok=True)
    return op


__all__ = ["MetadataResources", "handles", "route"]
