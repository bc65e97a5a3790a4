"""The Vertex ML Metadata contexts a job logs to, composed offline as the SDK composes them.

`experiment: NAME` is the context ``projects/P/locations/R/metadataStores/default/contexts/NAME``
(what `aiplatform.init(experiment=NAME)` makes); `experiment_run: RUN` next to it is the run's own
name, its context ID ``NAME-RUN`` (the SDK's `_format_experiment_run_resource_id`: the experiment's
name, a dash, the run's; at most 121 characters, 128 less the SDK's ``-tb-run`` suffix). A full
context name in the job file is used as written. A bare name needs the project: without one (a
render with no project anywhere) the field is left out and submit fills it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vtrain.constants import RUN_ID_MAX

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig

DEFAULT_STORE = "default"
EXPERIMENT_RUN_SCHEMA = ("system.ExperimentRun", "0.0.1")


@dataclass(frozen=True)
class RunNames:
    """An experiment run's names: its experiment's context, its own, its display name (the run's name)."""

    experiment: str
    context: str
    run: str

    @property
    def context_id(self) -> str:
        return self.context.rsplit("/", 1)[-1]

    @property
    def store(self) -> str:
        return self.context.rsplit("/contexts/", 1)[0]


def experiment_context(config: JobConfig) -> str | None:
    """The experiment's full context name, or None (no experiment, or a bare name and no project)."""
    name = config.experiment
    if not name:
        return None
    if "/" in name:
        return name
    if not config.project:
        return None
    return f"projects/{config.project}/locations/{config.region}/metadataStores/{DEFAULT_STORE}/contexts/{name}"


def run_context(config: JobConfig) -> str | None:
    """The run's full context name: as written, or the experiment's context, a dash, the run's name."""
    run = config.experiment_run
    if not run or "/" in run:
        return run or None
    experiment = experiment_context(config)
    return f"{experiment}-{run}" if experiment else None


def run_names(config: JobConfig) -> RunNames | None:
    """The run a job logs to, when its names are known (project resolved)."""
    experiment, context = experiment_context(config), run_context(config)
    if not (experiment and context):
        return None
    experiment_id = experiment.rsplit("/", 1)[-1]
    own = context.rsplit("/", 1)[-1]
    run = config.experiment_run if config.experiment_run and "/" not in config.experiment_run else (
        own[len(experiment_id) + 1 :] if own.startswith(experiment_id + "-") else own)  # fmt: skip
    return RunNames(experiment, context, run)


__all__ = ["EXPERIMENT_RUN_SCHEMA", "RUN_ID_MAX", "RunNames", "experiment_context", "run_context", "run_names"]
