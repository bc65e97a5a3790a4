"""The Vertex resources a job links to, found or made before the job is created: its TensorBoard
instance and its Experiment. Idempotent: a second submit finds what the first made.

- TensorBoard (`tensorboard:` a display name, or `create` for the one named ``vtrain``): listed by
  display name in the job's region (TensorboardService `tensorboards.list`, filter
  ``display_name="..."``), created when none is there (`tensorboards.create`, a long-running
  operation, awaited). A full resource name is used as it is. Vertex uploads the job's
  AIP_TENSORBOARD_LOG_DIR to it, which it does as the job's service account.
- Experiment (`experiment: NAME`): a Vertex ML Metadata context
  ``projects/P/locations/L/metadataStores/default/contexts/NAME`` with schema ``system.Experiment``
  (what `aiplatform.init(experiment=...)` makes: metadata ``experiment_deleted: false`` and, with a
  TensorBoard, ``backing_tensorboard_resource``). The project's ``default`` metadata store is
  created first when it does not exist yet, as the SDK does.

Both clients are aiplatform_v1's own, on the REST transport, with the backend's endpoint and
credentials, so the emulator answers them in tests; every call runs under the backend's retry
policy, and a refusal is one line naming the permission (`roles/aiplatform.user` has them all).
An attempt retried after an ambiguous failure looks the resource up again before creating it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vtrain.cloud.vertex.client import VertexBackend

#: The display name `tensorboard: create` finds or makes: one instance per project and region,
#: shared by every job (each job is its own TensorBoard experiment in it).
DEFAULT_TENSORBOARD = "vtrain"
CREATE = "create"
TENSORBOARD_NAME = re.compile(r"^projects/([^/]+)/locations/([^/]+)/tensorboards/([^/]+)$")
EXPERIMENT_SCHEMA = ("system.Experiment", "0.0.1")
OPERATION_TIMEOUT = 300.0
TENSORBOARD_WEB = "https://{region}.tensorboard.googleusercontent.com/experiment/{path}+experiments+{job_id}"
TENSORBOARD_CONSOLE = ("https://console.cloud.google.com/vertex-ai/experiments/tensorboard-instances/regions/{region}/"
                       "{id}?project={project}")  # fmt: skip
EXPERIMENT_CONSOLE = ("https://console.cloud.google.com/vertex-ai/experiments/locations/{region}/experiments/{name}/"
                      "runs?project={project}")  # fmt: skip


@dataclass(frozen=True)
class Resolved:
    name: str  # the full resource name the job links to
    created: bool
    display_name: str = ""


def tensorboard_display_name(value: str) -> str | None:
    """The display name to find or make for a `tensorboard:` value; None for a full resource name."""
    if TENSORBOARD_NAME.match(value):
        return None
    return DEFAULT_TENSORBOARD if value == CREATE else value


def experiment_resource(project: str, region: str, name: str) -> str:
    """The context of `experiment: NAME`; a full name (the job file may give one) is itself."""
    if "/" in name:
        return name
    return f"projects/{project}/locations/{region}/metadataStores/default/contexts/{name}"


def bare_experiment(experiment: str | None) -> str | None:
    """The name submit finds or makes, or None when the job file gives the full name (sent as written)."""
    return experiment if experiment and "/" not in experiment else None


def _client(backend: VertexBackend, kind: str) -> Any:
    from google.cloud import aiplatform_v1

    cls = getattr(aiplatform_v1, kind)
    return cls(transport="rest", credentials=backend.credentials, client_options={"api_endpoint": backend.api_endpoint})


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lookup(backend: VertexBackend, client: Any, display_name: str) -> str | None:
    query = {"parent": backend.parent, "filter": f"display_name={_quote(display_name)}"}
    pager = client.list_tensorboards(request=query, timeout=backend.timeout)
    boards = sorted(pager, key=lambda b: (b.create_time, b.name))
    return str(boards[0].name) if boards else None


def find_tensorboard(backend: VertexBackend, display_name: str, client: Any = None) -> str | None:
    """The oldest instance with this display name in the backend's region, or None."""
    client = client or _client(backend, "TensorboardServiceClient")
    return backend._call(lambda: _lookup(backend, client, display_name),
                         action=f"look up the TensorBoard '{display_name}'", resource=backend.parent,
                         permission="aiplatform.tensorboards.list")  # fmt: skip


def ensure_tensorboard(backend: VertexBackend, display_name: str) -> Resolved:
    """Find the instance by display name, or create it (and wait for the operation)."""
    from google.cloud.aiplatform_v1.types import Tensorboard

    client = _client(backend, "TensorboardServiceClient")
    found = find_tensorboard(backend, display_name, client)
    if found is not None:
        return Resolved(found, False, display_name)
    made: list[bool] = []

    def create() -> str:
        if made:  # a retry after an ambiguous failure: the first attempt may have made it
            again = _lookup(backend, client, display_name)
            if again is not None:
                return again
        made.append(True)
        board = Tensorboard(display_name=display_name, description="Made by vtrain for its jobs' TensorBoard logs.",
                            labels={"vtrain-managed": "true"})  # fmt: skip
        operation = client.create_tensorboard(parent=backend.parent, tensorboard=board, timeout=backend.timeout)
        return str(operation.result(timeout=OPERATION_TIMEOUT).name)

    name = backend._call(create, action=f"create the TensorBoard '{display_name}'", resource=backend.parent,
                         permission="aiplatform.tensorboards.create")  # fmt: skip
    return Resolved(name, True, display_name)


def find_experiment(backend: VertexBackend, name: str, client: Any = None) -> str | None:
    """The experiment's context name if it exists (the number-named form Vertex answers with)."""
    from google.api_core.exceptions import NotFound

    client = client or _client(backend, "MetadataServiceClient")
    resource = experiment_resource(backend.project, backend.region, name)

    def get() -> str | None:
        try:
            return str(client.get_context(name=resource, timeout=backend.timeout).name)
        except NotFound:
            return None

    return backend._call(get, action=f"look up the experiment '{name}'", resource=resource,
                         permission="aiplatform.contexts.get")  # fmt: skip


def ensure_experiment(backend: VertexBackend, name: str, tensorboard: str | None = None) -> Resolved:
    """Find the experiment, or create it (and the project's default metadata store if it has none)."""
    from google.api_core.exceptions import AlreadyExists, NotFound
    from google.cloud.aiplatform_v1.types import Context, MetadataStore

    client = _client(backend, "MetadataServiceClient")
    found = find_experiment(backend, name, client)
    if found is not None:
        return Resolved(found, False, name)
    store = f"{backend.parent}/metadataStores/default"

    def ensure_store() -> None:
        try:
            client.get_metadata_store(name=store, timeout=backend.timeout)
        except NotFound:
            try:
                operation = client.create_metadata_store(parent=backend.parent, metadata_store=MetadataStore(),
                                                         metadata_store_id="default", timeout=backend.timeout)
                operation.result(timeout=OPERATION_TIMEOUT)
            except AlreadyExists:  # made meanwhile (another submit, or a retried attempt)
                pass

    backend._call(ensure_store, action="create the project's default metadata store", resource=store,
                  permission="aiplatform.metadataStores.create")  # fmt: skip
    metadata: dict[str, Any] = {"experiment_deleted": False}
    if tensorboard:
        metadata["backing_tensorboard_resource"] = tensorboard
    context = Context(display_name=name, schema_title=EXPERIMENT_SCHEMA[0], schema_version=EXPERIMENT_SCHEMA[1],
                      metadata=metadata)  # fmt: skip

    def create() -> str:
        try:
            made = client.create_context(parent=store, context=context, context_id=name, timeout=backend.timeout)
            return str(made.name)
        except AlreadyExists:  # idempotent: made meanwhile, or by an attempt whose answer was lost
            return str(client.get_context(name=f"{store}/contexts/{name}", timeout=backend.timeout).name)

    made = backend._call(create, action=f"create the experiment '{name}'", resource=store,
                         permission="aiplatform.contexts.create")  # fmt: skip
    return Resolved(made, True, name)


# ---- links --------------------------------------------------------------------------------------
def tensorboard_links(tensorboard: str, job_id: str, project: str) -> dict[str, str]:
    """The instance's console page and this job's TensorBoard web app (each job is an experiment in it)."""
    m = TENSORBOARD_NAME.match(tensorboard)
    if m is None:
        return {}
    region, board_id = m.group(2), m.group(3)
    return {
        "tensorboard": TENSORBOARD_WEB.format(region=region, path=tensorboard.replace("/", "+"), job_id=job_id),
        "tensorboard console": TENSORBOARD_CONSOLE.format(region=region, id=board_id, project=project),
    }


def job_links(job: Any) -> list[tuple[str, str]]:
    """Where to look at a job (a VertexJob) besides the console: its TensorBoard, its Experiment, and
    the interactive shells / dashboard Vertex serves (webAccessUris) with enable_web_access or
    enable_dashboard_access."""
    proto = job.proto
    try:
        spec = proto.job_spec
    except AttributeError:  # a HyperparameterTuningJob: its trials' spec
        spec = proto.trial_job_spec
    project = job.project
    rows = list(tensorboard_links(spec.tensorboard, job.job_id, project).items()) if spec.tensorboard else []
    experiment = experiment_link(spec.experiment, project) if spec.experiment else None
    if experiment:
        rows.append(("experiment", experiment))
    kind = "shell" if spec.enable_web_access else "dashboard"
    uris = getattr(proto, "web_access_uris", {})
    rows.extend((f"{kind} {node}", uri) for node, uri in sorted(uris.items()))
    if (spec.enable_web_access or spec.enable_dashboard_access) and not uris and not job.done:
        rows.append((kind, "once the replicas run (webAccessUris)"))
    return rows


def experiment_link(experiment: str, project: str) -> str | None:
    m = re.match(r"^projects/[^/]+/locations/([^/]+)/metadataStores/[^/]+/contexts/([^/]+)$", experiment)
    if m is None:
        return None
    return EXPERIMENT_CONSOLE.format(region=m.group(1), name=m.group(2), project=project)


# ---- the submit step ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Linked:
    """What a job links to, as resource names, and which of them were found or made just now."""

    tensorboard: str | None = None
    experiment: str | None = None
    resolved: tuple[Resolved, ...] = ()

    def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The create body with these names (the body's own spelling, a display name or `create`, is what
        the config hash covers; the job carries the resource names)."""
        if not (self.tensorboard or self.experiment):
            return body
        key = "trialJobSpec" if "trialJobSpec" in body else "jobSpec"
        spec = dict(body.get(key, {}))
        if self.tensorboard:
            spec["tensorboard"] = self.tensorboard
        if self.experiment:
            spec.setdefault("experiment", self.experiment)
        return {**body, key: spec}


def link_resources(backend: VertexBackend, tensorboard: str | None, experiment: str | None) -> Linked:
    """Find or make the job's TensorBoard (when named by display name) and Experiment."""
    made: list[Resolved] = []
    board = tensorboard
    if tensorboard:
        display = tensorboard_display_name(tensorboard)
        if display is not None:
            made.append(ensure_tensorboard(backend, display))
            board = made[-1].name
    context = None
    if bare_experiment(experiment):
        made.append(ensure_experiment(backend, str(experiment), board))
        context = made[-1].name
    return Linked(board, context, tuple(made))


def filled_at_submit(config: Any, region: str, spec: str = "jobSpec") -> dict[str, str]:
    """The request fields submit fills in from what it finds or makes (for `submit --dry-run`)."""
    out = {}
    display = tensorboard_display_name(config.tensorboard) if config.tensorboard else None
    if display is not None:
        out[f"{spec}.tensorboard"] = f"the TensorBoard named '{display}' in {region} (created if missing)"
    if bare_experiment(config.experiment):
        out[f"{spec}.experiment"] = f"the experiment '{config.experiment}' in {region} (created if missing)"
    return out


def find_linked(backend: VertexBackend, tensorboard: str | None, experiment: str | None) -> Linked:
    """What `link_resources` would link to, found only (nothing is made): for `vtrain diff` against a
    submitted job, which carries resource names where the job file may have a display name. What is
    not found stays as the file spells it (submit would make it, so it is a change)."""
    board = tensorboard
    display = tensorboard_display_name(tensorboard) if tensorboard else None
    if display is not None:
        board = find_tensorboard(backend, display) or tensorboard
    context = None
    bare = bare_experiment(experiment)
    if bare:
        context = find_experiment(backend, bare) or experiment_resource(backend.project, backend.region, bare)
    return Linked(board, context)
