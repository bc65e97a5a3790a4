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
import sys
import types
from typing import Any

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "load_config": "vtrain.jobfile",
    "JobConfig": "vtrain.config",
    "build_job": "vtrain.spec",
    "build_job_dict": "vtrain.spec",
    "render": "vtrain.render",
    "submit": "vtrain.submit",
    "run_local": "vtrain.backends.local.runner",
    "run_local_tuning": "vtrain.tuning.run",
    "VtrainError": "vtrain.errors",
    "ConfigError": "vtrain.errors",
    "PackagingError": "vtrain.errors",
    "BackendError": "vtrain.errors",
    "JobFailed": "vtrain.errors",
}

__all__ = sorted(_LAZY) + ["__version__"]


class _Package(types.ModuleType):
    """`vtrain.render` and `vtrain.submit` are SDK functions living in modules of the same name.
    Importing such a module makes Python set `vtrain.<module>` to it, which would hide the
    function; this keeps the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == value.__name__:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vtrain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
