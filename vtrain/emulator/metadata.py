"""TensorBoards and Vertex ML Metadata (Experiments) in the emulator, v1 REST, as `TensorboardServiceClient`,
`MetadataServiceClient` (transport="rest") and the high-level SDK's Experiments (`aiplatform.init(experiment=)`,
`start_run`, `log_params`, `log_metrics`, `log_time_series_metrics`, `end_run`, `get_experiment_df`) call them.
Under /v1/projects/P/locations/L:

    tensorboards[/T]                                   create (→ Operation, done), list, get, patch, delete
    tensorboards/T:batchRead                           time series data (tensorboard_data.py)
    tensorboards/T/experiments[/E]                     create (?tensorboardExperimentId), list, get, patch, delete
    tensorboards/T/experiments/E:write | :batchCreate  run data; time series of several runs
    tensorboards/T/experiments/E/runs[/R]              create (?tensorboardRunId), list, get, patch, delete
    tensorboards/T/experiments/E/runs:batchCreate      runs
    tensorboards/T/experiments/E/runs/R:write          time series data
    .../runs/R/timeSeries[/S]                          create, list, get, patch, delete; S:read
    metadataStores[/S]                                 create (?metadataStoreId → Operation, done), list, get
    metadataStores/S/{contexts,artifacts,executions}[/ID]  create (?contextId...), list, get, patch, delete
    metadataStores/S/contexts/C:addContextChildren | :removeContextChildren | :addContextArtifactsAndExecutions
    metadataStores/S/executions/X:addExecutionEvents | :queryExecutionInputsAndOutputs (its artifacts and events)
    ANY/operations/OP                                  a create's or delete's Operation

Bodies are parsed strictly into the resource's `aiplatform.v1` type and its output-only fields (as the
Discovery document marks them: names, times, `runCount`, `satisfiesPzs`, a store's `state`, a context's
`parentContexts`...) are dropped, never kept or echoed; answers name the project by number, as Vertex does.
Like Vertex, a new project has no metadata store: the client creates `default` first. Lists take the
filters metadata_filters.py reads, `orderBy`, `readMask` (TensorBoard collections) and pages of 100 by
default and at most. Every call is authorized like the JobService's (`deny_projects`, `--projects` and
denied permissions answer IAM's 403).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from google.cloud.aiplatform_v1 import types
from google.protobuf import json_format

from vtrain.emulator.errors import ApiError, invalid_argument, not_found
from vtrain.emulator.masks import masked, read_mask
from vtrain.emulator.metadata_filters import compile_metadata_filter, order_key, ordered
from vtrain.emulator.projects import authorize, project_number
from vtrain.emulator.store import _rfc3339
from vtrain.emulator.validation import check_parent
from vtrain.emulator.wire import PAGE_SIZE, json_body, page_params
from vtrain.emulator.wire import parse_message as _parse_message

_PATH = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/((?:tensorboards|metadataStores)(?:/[^/]+)*)$")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
OPERATION_METADATA = "type.googleapis.com/google.cloud.aiplatform.v1.{}OperationMetadata"
#: A list page, by default and at most ("The maximum value is 100", ListContextsRequest.page_size).
_COMMON_OUTPUT = frozenset({"name", "createTime", "updateTime"})


@dataclass(frozen=True)
class Kind:
    """One collection: its REST type, the create's id parameter, its IAM noun and the list's filter terms."""

    message: Any
    id_param: str | None
    noun: str
    output_only: frozenset[str] = _COMMON_OUTPUT
    operation: str | None = None  # the create answers a done Operation with this verb's metadata
    filters: frozenset[str] = frozenset()
    masks: bool = False  # the list takes readMask

    @property
    def kind(self) -> str:
        return str(self.message.__name__)


_TB_FILTERS = frozenset({"labels"})
KINDS: dict[tuple[str, ...], Kind] = {
    ("tensorboards",): Kind(types.Tensorboard, None, "tensorboards", _COMMON_OUTPUT | {
        "blobStoragePathPrefix", "runCount", "satisfiesPzs", "satisfiesPzi"}, "CreateTensorboard",
        frozenset({"is_default"}), True),  # fmt: skip
    ("tensorboards", "experiments"): Kind(types.TensorboardExperiment, "tensorboardExperimentId",
                                          "tensorboardExperiments", masks=True),
    ("tensorboards", "experiments", "runs"): Kind(types.TensorboardRun, "tensorboardRunId", "tensorboardRuns",
                                                  masks=True),
    ("tensorboards", "experiments", "runs", "timeSeries"): Kind(
        types.TensorboardTimeSeries, "tensorboardTimeSeriesId", "tensorboardTimeSeries",
        _COMMON_OUTPUT | {"metadata"}, masks=True),
    ("metadataStores",): Kind(types.MetadataStore, "metadataStoreId", "metadataStores",
                              _COMMON_OUTPUT | {"state"}, "CreateMetadataStore"),
    ("metadataStores", "contexts"): Kind(types.Context, "contextId", "contexts", _COMMON_OUTPUT | {"parentContexts"},
                                         filters=frozenset({"parent_contexts", "child_contexts", "metadata"})),
    ("metadataStores", "artifacts"): Kind(types.Artifact, "artifactId", "artifacts",
                                          filters=frozenset({"in_context", "uri", "state", "metadata"})),
    ("metadataStores", "executions"): Kind(types.Execution, "executionId", "executions",
                                           filters=frozenset({"in_context", "state", "metadata"})),
}


class MetadataResources:
    """Every TensorBoard and metadata resource by name (with the project number), in creation order, and
    the relations between them: context children, context members, execution events, time series points."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.items: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.members: dict[str, set[str]] = {}  # artifact/execution name → contexts it is in
        self.events: dict[str, list[dict[str, Any]]] = {}  # execution name → its events
        self.points: dict[str, list[dict[str, Any]]] = {}  # time series name → its values (tensorboard_data)
        self._next = 1000

    def new_id(self) -> str:
        with self.lock:
            self._next += 1
            return str(7_000_000_000_000_000_000 + self._next)

    def of(self, collection: str) -> dict[str, dict[str, Any]]:
        """The resources of one collection (`tensorboards`, `contexts`, ...), by name."""
        with self.lock:
            return {n: v for n, v in self.items.items() if n.rsplit("/", 2)[-2] == collection}

    @property
    def tensorboards(self) -> dict[str, dict[str, Any]]:
        return self.of("tensorboards")

    @property
    def contexts(self) -> dict[str, dict[str, Any]]:
        return self.of("contexts")

    def related(self, relation: str, name: str) -> set[str]:
        """For filters: the contexts `name` is in ("in_context"), or the children of context `name`."""
        with self.lock:
            if relation == "in_context":
                return set(self.members.get(name, ()))
            return {n for n, v in self.of("contexts").items() if name in v.get("parentContexts", ())}


def handles(path: str) -> bool:
    return bool(_PATH.match(path))


def route(server: Any, command: str, path: str, query: dict[str, str], body: bytes,
          multi: dict[str, list[str]] | None = None) -> dict[str, Any]:  # fmt: skip
    res: MetadataResources = server.metadata
    m = _PATH.match(path)
    if m is None:
        raise not_found(f"The requested URL {path} was not found on this server.")
    project, location, rest = m.groups()
    check_parent(project, location)
    parts = rest.split("/")
    verb = None
    if ":" in parts[-1]:
        parts[-1], verb = parts[-1].split(":", 1)
    base = f"projects/{project_number(project)}/locations/{location}"
    if len(parts) >= 2 and parts[-2] == "operations" and verb is None and command == "GET":
        name = f"{base}/{'/'.join(parts)}"
        authorize(server, project, name, "aiplatform.operations.get")
        op = res.operations.get(name)
        if op is None:
            raise not_found(f"Operation {name} is not found.")
        return op
    collections = tuple(parts[0::2])
    kind = KINDS.get(collections)
    if kind is None or not all(parts[1::2]):
        raise not_found(f"The requested URL {path} was not found on this server.")
    name = f"{base}/{'/'.join(parts)}"
    if len(parts) % 2:  # a collection: create, list or a collection verb (runs:batchCreate)
        parent = name.rsplit("/", 1)[0]
        if verb is not None:
            return _custom(server, res, project, kind, name, verb, command, body, multi or {})
        if command == "POST":
            authorize(server, project, parent, f"aiplatform.{kind.noun}.create")
            return _create(res, kind, parent, parts[-1], query.get(kind.id_param or "", ""), _parse(body, kind))
        if command == "GET":
            authorize(server, project, parent, f"aiplatform.{kind.noun}.list")
            return _list(res, kind, name, query)
        raise not_found(f"Method {command} not found for {path}.")
    if verb is not None:
        return _custom(server, res, project, kind, name, verb, command, body, multi or {})
    action = {"GET": "get", "PATCH": "update", "DELETE": "delete"}.get(command)
    if action is None:
        raise not_found(f"Method {command} not found for {path}.")
    authorize(server, project, name, f"aiplatform.{kind.noun}.{action}")
    with res.lock:
        current = res.items.get(name)
        if current is None:
            raise not_found(f"{kind.kind} {name} is not found.")
        if action == "get":
            return current
        if action == "update":
            return _update(res, kind, name, current, _parse(body, kind), query.get("updateMask", ""))
        for other in [n for n in res.items if n.startswith(name + "/")] + [name]:
            del res.items[other]
        return _operation(res, name, "DeleteOperation", "google.protobuf.Empty", {}, generic=True)


def _create(res: MetadataResources, kind: Kind, parent: str, collection: str, wanted: str,
            value: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    inner = parent.split("/locations/", 1)[1].split("/")[1:]  # below the region: the owning resource
    if inner and parent not in res.items:
        owner = KINDS[tuple(inner[0::2])].kind
        raise not_found(f"{owner} {parent} is not found.")
    if kind.kind == "Tensorboard" and not value.get("displayName"):
        raise invalid_argument("Tensorboard.display_name is required.", [("display_name", "required")])
    if wanted and not _ID.match(wanted):
        noun = kind.kind[0].lower() + kind.kind[1:]
        raise invalid_argument(f"Invalid {noun} ID '{wanted[:130]}': it must match [a-z0-9][a-z0-9-]{{0,127}}.")
    if kind.kind == "MetadataStore":
        wanted = wanted or "default"
    resource_id = wanted or res.new_id()
    name = f"{parent}/{collection}/{resource_id}"
    now = _rfc3339()
    value = {**value, "name": name, "createTime": now, "updateTime": now}
    if kind.kind in ("Tensorboard", "Context", "Artifact", "Execution", "TensorboardExperiment", "TensorboardRun",
                     "TensorboardTimeSeries"):  # fmt: skip
        value["etag"] = "1"
    if kind.kind == "Tensorboard":
        value["blobStoragePathPrefix"] = f"cloud-ai-platform-{resource_id[-8:]}/tensorboard-{resource_id}"
    if kind.kind == "Context":
        value.setdefault("displayName", resource_id)
    with res.lock:
        if name in res.items:
            raise ApiError(409, "ALREADY_EXISTS", f"{kind.kind} {name} already exists.")
        if value.get("isDefault"):
            _one_default(res, name)
        res.items[name] = value
    if kind.operation is not None:
        return _operation(res, name, kind.operation, f"google.cloud.aiplatform.v1.{kind.kind}", value)
    return value


def _one_default(res: MetadataResources, name: str) -> None:
    """A region has one default TensorBoard: making one default unmarks the others."""
    parent = name.rsplit("/", 2)[0]
    for other, board in res.of("tensorboards").items():
        if other != name and other.startswith(parent + "/") and board.get("isDefault"):
            res.items[other] = {k: v for k, v in board.items() if k != "isDefault"}


def _update(res: MetadataResources, kind: Kind, name: str, current: dict[str, Any], value: dict[str, Any],
            mask_text: str) -> dict[str, Any]:  # fmt: skip
    """PATCH: the fields the updateMask names (snake_case or camelCase), or every field the body sets."""
    if mask_text.strip():
        fields = {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), p.strip().split(".")[0])
                  for p in mask_text.split(",")}  # fmt: skip
        known = {f.json_name for f in kind.message.pb().DESCRIPTOR.fields}
        bad = sorted(fields - known)
        if bad:
            raise invalid_argument(f"Invalid update_mask path '{bad[0][:100]}' for {kind.kind}.")
    else:
        fields = set(value)
    updated = {k: v for k, v in current.items() if k not in fields or k in kind.output_only}
    updated.update({k: v for k, v in value.items() if k in fields})
    updated["updateTime"] = _rfc3339()
    if "etag" in current:
        updated["etag"] = str(int(current["etag"]) + 1) if str(current["etag"]).isdigit() else "1"
    if updated.get("isDefault"):
        _one_default(res, name)
    res.items[name] = updated
    if kind.kind == "Tensorboard":  # UpdateTensorboard is a long-running operation
        return _operation(res, name, "UpdateTensorboard", "google.cloud.aiplatform.v1.Tensorboard", updated)
    return updated


def _list(res: MetadataResources, kind: Kind, collection: str, query: dict[str, str]) -> dict[str, Any]:
    size, token = page_params(query, default=PAGE_SIZE, most=PAGE_SIZE)
    match = compile_metadata_filter(query.get("filter", ""), kind.filters, res.related)
    order = order_key(query.get("orderBy", ""))
    mask = read_mask(query, kind.message.pb().DESCRIPTOR) if kind.masks else None
    with res.lock:
        chosen = [v for n, v in res.items.items() if n.rsplit("/", 1)[0] == collection and match(v)]
    chosen = ordered(chosen, order)
    start = int(token) if token else 0
    page = chosen[start : start + size]
    if mask is not None:
        page = [_masked(kind, item, mask) for item in page]
    key = {"Tensorboard": "tensorboards", "TensorboardTimeSeries": "tensorboardTimeSeries"}.get(kind.kind)
    key = key or collection.rsplit("/", 1)[-1].replace("experiments", "tensorboardExperiments").replace(
        "runs", "tensorboardRuns")
    answer: dict[str, Any] = {key: page} if page else {}
    if start + size < len(chosen):
        answer["nextPageToken"] = str(start + size)
    return answer


def _masked(kind: Kind, item: dict[str, Any], mask: Any) -> dict[str, Any]:
    message = json_format.ParseDict(item, kind.message.pb()(), ignore_unknown_fields=True)
    return dict(json_format.MessageToDict(masked(message, mask)))


def _custom(server: Any, res: MetadataResources, project: str, kind: Kind, name: str, verb: str, command: str,
            body: bytes, multi: dict[str, list[str]]) -> dict[str, Any]:  # fmt: skip
    from vtrain.emulator import tensorboard_data

    authorize(server, project, name, f"aiplatform.{kind.noun}.{verb}")
    handler = _VERBS.get((kind.kind, verb, command)) or tensorboard_data.VERBS.get((kind.kind, verb, command))
    if handler is None:
        raise not_found(f"Method {command} {verb} not found for {name}.")
    with res.lock:
        if not name.endswith(("/runs", "/contexts")) and name not in res.items:
            raise not_found(f"{kind.kind} {name} is not found.")
        return dict(handler(res, name, json_body(body, verb) if body else {}, multi))


def _names(doc: dict[str, Any], key: str, res: MetadataResources, what: str) -> list[str]:
    names = doc.get(key, [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise invalid_argument(f"Invalid JSON payload received. '{key}' is a list of {what} names.")
    missing = [n for n in names if n not in res.items]
    if missing:
        raise not_found(f"{what} {missing[0][:300]} is not found.")
    return names


def _add_children(res: MetadataResources, name: str, doc: dict[str, Any], _: Any) -> dict[str, Any]:
    for child in _names(doc, "childContexts", res, "Context"):
        if child == name or child in _ancestors(res, name):
            raise invalid_argument(f"Adding {child} as a child of {name} would make a cycle.")
        parents = res.items[child].setdefault("parentContexts", [])
        if name not in parents:
            parents.append(name)
    return {}


def _ancestors(res: MetadataResources, name: str) -> set[str]:
    seen: set[str] = set()
    todo = list(res.items.get(name, {}).get("parentContexts", []))
    while todo:
        parent = todo.pop()
        if parent not in seen:
            seen.add(parent)
            todo.extend(res.items.get(parent, {}).get("parentContexts", []))
    return seen


def _remove_children(res: MetadataResources, name: str, doc: dict[str, Any], _: Any) -> dict[str, Any]:
    for child in _names(doc, "childContexts", res, "Context"):
        parents = res.items[child].get("parentContexts", [])
        res.items[child]["parentContexts"] = [p for p in parents if p != name]
        if not res.items[child]["parentContexts"]:
            del res.items[child]["parentContexts"]
    return {}


def _add_members(res: MetadataResources, name: str, doc: dict[str, Any], _: Any) -> dict[str, Any]:
    for member in _names(doc, "artifacts", res, "Artifact") + _names(doc, "executions", res, "Execution"):
        res.members.setdefault(member, set()).add(name)
    return {}


def _add_events(res: MetadataResources, name: str, doc: dict[str, Any], _: Any) -> dict[str, Any]:
    events = doc.get("events", [])
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise invalid_argument("Invalid JSON payload received. 'events' is a list of Event.")
    for event in events:
        parsed = _parse_message(event, types.Event, "Event")
        if parsed.get("artifact") not in res.items:
            raise not_found(f"Artifact {str(parsed.get('artifact'))[:300]} is not found.")
        res.events.setdefault(name, []).append({**parsed, "eventTime": _rfc3339()})
    return {}


def _inputs_and_outputs(res: MetadataResources, name: str, doc: dict[str, Any], _: Any) -> dict[str, Any]:
    """queryExecutionInputsAndOutputs: a LineageSubgraph of the execution, its events (each naming it) and the
    artifacts they name that still exist."""
    if doc:
        raise invalid_argument("Invalid JSON payload received. QueryExecutionInputsAndOutputs takes no body.")
    events = [{**e, "execution": name} for e in res.events.get(name, []) if e.get("artifact") in res.items]
    artifacts = [res.items[n] for n in dict.fromkeys(e["artifact"] for e in events)]
    answer: dict[str, Any] = {"executions": [res.items[name]]}
    if artifacts:
        answer["artifacts"] = artifacts
    if events:
        answer["events"] = events
    return answer


def _batch_create(res: MetadataResources, name: str, doc: dict[str, Any], what: str, body_key: str, id_key: str,
                  collection: str, parent_prefix: str) -> list[dict[str, Any]]:  # fmt: skip
    requests = doc.get("requests", [])
    if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
        raise invalid_argument("Invalid JSON payload received. 'requests' is a list.")
    kind = next(k for k in KINDS.values() if k.kind == what)
    made = []
    for request in requests:
        parent = str(request.get("parent") or parent_prefix)
        if not parent.startswith(parent_prefix):
            raise invalid_argument(f"{what} parent {parent[:300]} is not under {name}.")
        body = _parse_message(request.get(body_key, {}), kind.message, what)
        body = {k: v for k, v in body.items() if k not in kind.output_only}
        made.append(_create(res, kind, parent, collection, str(request.get(id_key, "")), body))
    return made


def batch_create_series(res: MetadataResources, name: str, doc: dict[str, Any], _: Any) -> dict[str, Any]:
    made = _batch_create(res, name, doc, "TensorboardTimeSeries", "tensorboardTimeSeries",
                         "tensorboardTimeSeriesId", "timeSeries", name + "/runs/")
    return {"tensorboardTimeSeries": made} if made else {}


def batch_create_runs(res: MetadataResources, name: str, doc: dict[str, Any], _: Any) -> dict[str, Any]:
    experiment = name.rsplit("/", 1)[0]
    made = _batch_create(res, experiment, doc, "TensorboardRun", "tensorboardRun", "tensorboardRunId", "runs",
                         experiment)
    return {"tensorboardRuns": made} if made else {}


_VERBS: dict[tuple[str, str, str], Any] = {
    ("Context", "addContextChildren", "POST"): _add_children,
    ("Context", "removeContextChildren", "POST"): _remove_children,
    ("Context", "addContextArtifactsAndExecutions", "POST"): _add_members,
    ("Execution", "addExecutionEvents", "POST"): _add_events,
    ("Execution", "queryExecutionInputsAndOutputs", "GET"): _inputs_and_outputs,
    ("TensorboardExperiment", "batchCreate", "POST"): batch_create_series,
    ("TensorboardRun", "batchCreate", "POST"): batch_create_runs,
}


def _parse(body: bytes, kind: Kind) -> dict[str, Any]:
    doc = json_body(body, kind.kind) if body else {}
    return {k: v for k, v in _parse_message(doc, kind.message, kind.kind).items() if k not in kind.output_only}


def _operation(res: MetadataResources, name: str, verb: str, response: str, value: dict[str, Any],
               generic: bool = False) -> dict[str, Any]:  # fmt: skip
    """A finished long-running operation, kept so operations.get answers it too."""
    now = _rfc3339()
    kind = "DeleteOperationMetadata" if generic else f"{verb}OperationMetadata"
    op_name = f"{name}/operations/{res.new_id()}"
    op: dict[str, Any] = {
        "name": op_name,
        "metadata": {"@type": f"type.googleapis.com/google.cloud.aiplatform.v1.{kind}",
                     "genericMetadata": {"createTime": now, "updateTime": now}},  # fmt: skip
        "done": True,
        "response": {"@type": f"type.googleapis.com/{response}", **value},
    }
    with res.lock:
        res.operations[op_name] = op
    return op


__all__ = ["KINDS", "PAGE_SIZE", "MetadataResources", "handles", "route"]
