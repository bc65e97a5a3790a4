"""vtrain: one YAML file to a distributed TensorFlow job on Vertex AI.

The public SDK. Names are resolved lazily so `import vtrain` stays cheap:
google-cloud-aiplatform is imported only by :func:`build_job` and the backends,
TensorFlow only by :mod:`vtrain.runtime` inside a trainer.

    config = vtrain.load_config("vtrain.yaml")
    job = vtrain.build_job(config, vtrain.plan_artifacts(config))   # google.cloud.aiplatform_v1.CustomJob
    print(vtrain.render(job, "gcloud"))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vtrain.constants import VERSION as __version__

if TYPE_CHECKING:  # what a type checker reads; at run time each name is imported on first use (below)
    from vtrain.cloud.dryrun import dry_run as dry_run
    from vtrain.cloud.submit import submit as submit
    from vtrain.errors import BackendError as BackendError
    from vtrain.errors import ConfigError as ConfigError
    from vtrain.errors import JobFailed as JobFailed
    from vtrain.errors import PackagingError as PackagingError
    from vtrain.errors import VtrainError as VtrainError
    from vtrain.home.replay import replay as replay
    from vtrain.home.run import run_local as run_local
    from vtrain.jobfile.artifacts import Artifacts as Artifacts
    from vtrain.jobfile.artifacts import plan_artifacts as plan_artifacts
    from vtrain.jobfile.config import JobConfig as JobConfig
    from vtrain.jobfile.load import load_config as load_config
    from vtrain.local.options import RunOptions as RunOptions
    from vtrain.local.study_run import run_local_tuning as run_local_tuning
    from vtrain.request.build import Request as Request
    from vtrain.request.build import build_request as build_request
    from vtrain.request.custom_job import build_job as build_job
    from vtrain.request.custom_job import build_job_dict as build_job_dict
    from vtrain.request.render import render as render

_LAZY: dict[str, str] = {
    "load_config": "vtrain.jobfile.load",
    "JobConfig": "vtrain.jobfile.config",
    "build_job": "vtrain.request.custom_job",
    "build_job_dict": "vtrain.request.custom_job",
    "build_request": "vtrain.request.build",
    "Request": "vtrain.request.build",
    "render": "vtrain.request.render",
    "plan_artifacts": "vtrain.jobfile.artifacts",
    "Artifacts": "vtrain.jobfile.artifacts",
    "dry_run": "vtrain.cloud.dryrun",
    "submit": "vtrain.cloud.submit",
    "run_local": "vtrain.home.run",
    "replay": "vtrain.home.replay",
    "run_local_tuning": "vtrain.local.study_run",
    "RunOptions": "vtrain.local.options",
    "VtrainError": "vtrain.errors",
    "ConfigError": "vtrain.errors",
    "PackagingError": "vtrain.errors",
    "BackendError": "vtrain.errors",
    "JobFailed": "vtrain.errors",
}

#: Written out (not computed from _LAZY) so that type checkers read it; a test holds the two equal.
__all__ = [
    "Artifacts",
    "BackendError",
    "ConfigError",
    "JobConfig",
    "JobFailed",
    "PackagingError",
    "Request",
    "RunOptions",
    "VtrainError",
    "build_job",
    "build_job_dict",
    "build_request",
    "dry_run",
    "load_config",
    "plan_artifacts",
    "render",
    "replay",
    "run_local",
    "run_local_tuning",
    "submit",
    "__version__",
]

if not TYPE_CHECKING:  # hidden from checkers, so that `vtrain.misspelt` is an error there, not Any

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'vtrain' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
