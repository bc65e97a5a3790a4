"""Vertex AI Pipelines (KFP): a vtrain job file as one step of a pipeline, in two ways.

- :func:`training_op`: a task of Google's ``CustomTrainingJobOp`` whose spec is `vtrain render`'s.
- :func:`launcher_op`: a component that runs `vtrain submit --wait` on the job file, so preflight,
  ``--recover``, TensorBoard and Experiment creation, model registration and progress lines are kept.

Needs the ``pipelines`` extra (kfp, and google-cloud-pipeline-components for :func:`training_op`); nothing
else in vtrain imports this package. See docs/guides/pipelines.md.
"""

from __future__ import annotations

from vtrain.pipelines.launcher import launcher_op
from vtrain.pipelines.training import training_op

__all__ = ["launcher_op", "training_op"]
