"""vtrain: one YAML file to a distributed TensorFlow job on Vertex AI.

The public SDK. Names are resolved lazily so `import vtrain` stays cheap:
google-cloud-aiplatform is imported only by :func:`build_job` and the backends,
TensorFlow only by :mod:`vtrain.runtime` inside a trainer.

    config = vtrain.load_config("vtrain.yaml")
    job = vtrain.build_job(config)          # google.cloud.aiplatform_v1.CustomJob
    print(vtrain.render(job, "gcloud"))
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "load_config": "vtrain.jobfile.load",
    "JobConfig": "vtrain.jobfile.model",
    "build_job": "vtrain.request.custom_job",
    "build_job_dict": "vtrain.request.custom_job",
    "build_request": "vtrain.request.build",
    "Request": "vtrain.request.build",
    "render": "vtrain.request.render",
    "submit": "vtrain.cloud.submit",
    "run_local": "vtrain.local.runner",
    "run_local_tuning": "vtrain.local.study_run",
    "RunOptions": "vtrain.local.options",
    "VtrainError": "vtrain.errors",
    "ConfigError": "vtrain.errors",
    "PackagingError": "vtrain.errors",
    "BackendError": "vtrain.errors",
    "JobFailed": "vtrain.errors",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vtrain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
