"""The Experiment Run a job logs to (`experiment_run:`), found or made at submit before the job, as
`aiplatform.start_run(RUN)` makes it (google/cloud/aiplatform/metadata/experiment_run_resource.py):

- a Vertex ML Metadata context ``EXPERIMENT-RUN`` of schema ``system.ExperimentRun`` 0.0.1, display
  name the run's name, metadata ``{_params: {}, _metrics: {}, _state: RUNNING}``;
- a child of the experiment's context (`addContextChildren`), so `get_experiment_df()` and
  `ExperimentRun.list` show it;
- with a TensorBoard linked, backed by a TensorBoard run as the SDK backs one: the TensorBoard
  experiment named after the Experiment (label ``vertex_tensorboard_experiment_source:
  vertex_experiment``), in it the run named after the run, and the artifact ``CONTEXT-ID-tb-run``
  (schema ``google.VertexTensorboardRun``, metadata ``resourceName``) in the run's context, which is how
  the SDK finds the run's time series.

Idempotent: each step looks first (a second submit, or a retry after a lost answer, finds it all).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from vtrain.cloud.vertex.resources import (
    Linked,
    Resolved,
    _client,
    bare_experiment,
    ensure_experiment,
    ensure_tensorboard,
    tensorboard_display_name,
)
from vtrain.request.experiment import EXPERIMENT_RUN_SCHEMA, RunNames

if TYPE_CHECKING:
    from vtrain.cloud.vertex.client import VertexBackend

TB_RUN_SUFFIX = "-tb-run"
TB_RUN_SCHEMA = ("google.VertexTensorboardRun", "0.0.1")
TB_EXPERIMENT_LABELS = {"vertex_tensorboard_experiment_source": "vertex_experiment"}


def ensure_experiment_run(backend: VertexBackend, names: RunNames, experiment: str,
                          tensorboard: str | None = None) -> Resolved:  # fmt: skip
    """Find or make the run's context, make it a child of `experiment` (the context's name as found or
    made), and back it by a TensorBoard run when `tensorboard` (a full instance name) is linked."""
    from google.api_core.exceptions import AlreadyExists, NotFound
    from google.cloud.aiplatform_v1.types import Context

    client = _client(backend, "MetadataServiceClient")

    def find() -> Any:
        try:
            return client.get_context(name=names.context, timeout=backend.timeout)
        except NotFound:
            return None

    found = backend._call(find, action=f"look up the experiment run '{names.run}'", resource=names.context,
                          permission="aiplatform.contexts.get")  # fmt: skip
    created = found is None
    if found is None:
        context = Context(display_name=names.run, schema_title=EXPERIMENT_RUN_SCHEMA[0],
                          schema_version=EXPERIMENT_RUN_SCHEMA[1],
                          metadata={"_params": {}, "_metrics": {}, "_state": "RUNNING"})  # fmt: skip

        def create() -> Any:
            try:
                return client.create_context(parent=names.store, context=context, context_id=names.context_id,
                                             timeout=backend.timeout)  # fmt: skip
            except AlreadyExists:  # made meanwhile, or by an attempt whose answer was lost
                return client.get_context(name=names.context, timeout=backend.timeout)

        found = backend._call(create, action=f"create the experiment run '{names.run}'", resource=names.store,
                              permission="aiplatform.contexts.create")  # fmt: skip
    name = str(found.name)
    experiment_id = experiment.rsplit("/", 1)[-1]
    if not any(p.rsplit("/", 1)[-1] == experiment_id for p in found.parent_contexts):

        def adopt() -> None:
            client.add_context_children(context=experiment, child_contexts=[name], timeout=backend.timeout)

        backend._call(adopt, action=f"add the run '{names.run}' to the experiment", resource=experiment,
                      permission="aiplatform.contexts.addContextChildren")  # fmt: skip
    if tensorboard:
        _back_by_tensorboard(backend, client, names, name, tensorboard)
    return Resolved(name, created, names.run, "experiment run")


def _back_by_tensorboard(backend: VertexBackend, meta: Any, names: RunNames, run_context: str,
                         tensorboard: str) -> None:  # fmt: skip
    from google.api_core.exceptions import AlreadyExists, NotFound
    from google.cloud.aiplatform_v1.types import Artifact, TensorboardExperiment, TensorboardRun

    boards = _client(backend, "TensorboardServiceClient")
    experiment_id = names.experiment.rsplit("/", 1)[-1]
    tb_experiment = f"{tensorboard}/experiments/{experiment_id}"
    tb_run = f"{tb_experiment}/runs/{names.run}"

    def ensure(get: Any, create: Any) -> None:
        try:
            get()
        except NotFound:
            with contextlib.suppress(AlreadyExists):  # made meanwhile
                create()

    backend._call(lambda: ensure(
        lambda: boards.get_tensorboard_experiment(name=tb_experiment, timeout=backend.timeout),
        lambda: boards.create_tensorboard_experiment(
            parent=tensorboard, tensorboard_experiment_id=experiment_id, timeout=backend.timeout,
            tensorboard_experiment=TensorboardExperiment(display_name=experiment_id, labels=TB_EXPERIMENT_LABELS))),
        action=f"create the TensorBoard experiment '{experiment_id}'", resource=tensorboard,
        permission="aiplatform.tensorboardExperiments.create")  # fmt: skip
    backend._call(lambda: ensure(
        lambda: boards.get_tensorboard_run(name=tb_run, timeout=backend.timeout),
        lambda: boards.create_tensorboard_run(parent=tb_experiment, tensorboard_run_id=names.run,
                                              tensorboard_run=TensorboardRun(display_name=names.run),
                                              timeout=backend.timeout)),
        action=f"create the TensorBoard run '{names.run}'", resource=tb_experiment,
        permission="aiplatform.tensorboardRuns.create")  # fmt: skip
    artifact_id = names.context_id + TB_RUN_SUFFIX
    artifact_name = f"{names.store}/artifacts/{artifact_id}"
    region = names.store.split("/")[3]
    artifact = Artifact(uri=f"https://{region}-aiplatform.googleapis.com/v1/{tb_run}",
                        schema_title=TB_RUN_SCHEMA[0], schema_version=TB_RUN_SCHEMA[1], state=Artifact.State.LIVE,
                        metadata={"resourceName": tb_run, "vertex_experiment_tracking": True})  # fmt: skip

    def link() -> None:
        try:
            made = meta.get_artifact(name=artifact_name, timeout=backend.timeout)
        except NotFound:
            try:
                made = meta.create_artifact(parent=names.store, artifact=artifact, artifact_id=artifact_id,
                                            timeout=backend.timeout)  # fmt: skip
            except AlreadyExists:
                made = meta.get_artifact(name=artifact_name, timeout=backend.timeout)
        meta.add_context_artifacts_and_executions(context=run_context, artifacts=[made.name],
                                                  timeout=backend.timeout)  # fmt: skip

    backend._call(link, action=f"link the run '{names.run}' to its TensorBoard run", resource=names.store,
                  permission="aiplatform.artifacts.create")  # fmt: skip


# ---- the submit step: everything a job links to, the run last ----------------------------------------
def link_resources(backend: VertexBackend, tensorboard: str | None, experiment: str | None,
                   run: RunNames | None = None) -> Linked:  # fmt: skip
    """Find or make the job's TensorBoard (when named by display name), Experiment and Experiment Run."""
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
    if run is not None:
        made.append(ensure_experiment_run(backend, run, context or run.experiment, board))
    return Linked(board, context, tuple(made))


__all__ = ["ensure_experiment_run", "link_resources"]
