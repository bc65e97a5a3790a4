"""The one door from a checked JobConfig to the request `submit` sends: :func:`build_request`.

Two decisions are made here and nowhere else: which request a job file makes (a CustomJob, or a
HyperparameterTuningJob when it has `tuning:`), and the region it is built for (regional image
URIs follow it). Callers resolve the region (flag, file, environment; :mod:`vtrain.cloud.target`)
and pass it in; they never `replace(config, region=…)` themselves. A saved or received body is
classified by :func:`kind_of_body`, with the same two names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from vtrain.request.custom_job import build_job_dict
from vtrain.request.tuning_job import TRIAL_SPEC, build_tuning_dict

if TYPE_CHECKING:
    from vtrain.jobfile.config import JobConfig
    from vtrain.request.custom_job import Planned

Kind = Literal["customJobs", "hyperparameterTuningJobs"]
CUSTOM_JOB: Kind = "customJobs"
TUNING_JOB: Kind = "hyperparameterTuningJobs"


def kind_of(config: JobConfig) -> Kind:
    """Which request this job file makes; the REST collection it is created in."""
    return TUNING_JOB if config.tuning is not None else CUSTOM_JOB


def kind_of_body(body: Mapping[str, Any]) -> Kind:
    """The same answer for a REST body (a saved render, a plan, a job read back)."""
    return TUNING_JOB if TRIAL_SPEC in body else CUSTOM_JOB


def trial_job_spec(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The CustomJobSpec every replica runs: the job's own, or each trial's."""
    spec: Mapping[str, Any] = body[TRIAL_SPEC] if kind_of_body(body) == TUNING_JOB else body["jobSpec"]
    return spec


@dataclass(frozen=True)
class Request:
    """What a job file asks Vertex AI for: the collection (`kind`), the REST body, and the config
    it was built from (with the region applied), so later steps read one consistent value."""

    kind: Kind
    body: dict[str, Any]
    config: JobConfig


def build_request(
    config: JobConfig, artifacts: Planned = None, *, region: str | None = None, project: str | None = None,
) -> Request:
    """The request for `config` in `region` (None: the file's own), for `project` (None: the file's own;
    it names the Experiments contexts of `experiment: NAME`). Pure: no I/O.

    `artifacts`: what the trainer's files name, planned for the same region
    (:func:`vtrain.jobfile.artifacts.plan_artifacts`), or the package URIs alone (given or staged). A job
    that ships its trainer folder needs them (ValueError without); prebuilt URIs and containers do not."""
    if region and region != config.region:
        config = replace(config, region=region)
    if project and project != config.project:
        config = replace(config, project=project)
    kind = kind_of(config)
    body = build_tuning_dict(config, artifacts) if kind == TUNING_JOB else build_job_dict(config, artifacts)
    return Request(kind, body, config)


__all__ = ["CUSTOM_JOB", "TUNING_JOB", "Kind", "Request", "build_request", "kind_of", "kind_of_body",
           "trial_job_spec"]
