"""Vertex AI Pipelines (KFP): a vtrain job file as one step of a pipeline, in two ways.

- :func:`training_op`: a task of Google's ``CustomTrainingJobOp`` whose spec is `vtrain render`'s.
- :func:`launcher_op`: a component that runs `vtrain submit --wait` on the job file, so preflight,
  ``--recover``, TensorBoard and Experiment creation, model registration and progress lines are kept.

- :func:`launcher_image`: builds and pushes the image :func:`launcher_op`'s step runs in on Vertex AI Pipelines
  (vtrain, its pipelines dependencies, the job file and what it names; :mod:`vtrain.pipelines.image`).

Needs the ``pipelines`` extra (kfp, and google-cloud-pipeline-components for :func:`training_op`). Each name is
imported when first used, so :mod:`vtrain.pipelines.image` (the launcher image's job: what it holds, judged by the
one secret policy) loads without kfp: `vtrain package --launcher` reads it, and no other command imports this
package. See docs/guides/pipelines.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vtrain.pipelines.image import launcher_image, planned_launcher_image
    from vtrain.pipelines.launcher import launcher_op
    from vtrain.pipelines.training import training_op

_HOMES = {"launcher_image": "image", "planned_launcher_image": "image", "launcher_op": "launcher",
          "training_op": "training"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'vtrain.pipelines' has no attribute {name!r}")
    return getattr(importlib.import_module(f"vtrain.pipelines.{_HOMES[name]}"), name)


__all__ = ["launcher_image", "launcher_op", "planned_launcher_image", "training_op"]
