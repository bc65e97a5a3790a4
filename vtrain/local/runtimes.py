"""Which runtime a Python package job's replicas rehearse on here: the one place that decides it.

Three values (``--runtime``, ``RunOptions.runtime``, ``VTRAIN_RUNTIME``):

- ``stack``, the default for a prebuilt TensorFlow image: the image's TensorFlow and Python on this
  machine (:mod:`vtrain.local.stacks`), built once per image and shared;
- ``image``: Vertex's own prebuilt image, pulled and run in a container (runc/crun), the trainer
  installed inside by pip as the image does (:mod:`vtrain.local.prebuilt`);
- ``host``: this machine's Python and TensorFlow (what `vtrain local` did before: fastest, and wrong
  where the versions differ).

``auto`` (the default) is ``stack`` for an image vtrain has a stack for, else ``host``. `vtrain local`,
the emulator's ``--run-jobs``, tuning trials and ``vtrain doctor`` all ask :func:`choose`. Container
jobs (``trainer.build``, ``trainer.container``) run their own image (``--containers``), not this.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vtrain.errors import UsageError
from vtrain.local.stacks import Stack, stack_for

RUNTIMES = ("auto", "stack", "image", "host")
RUNTIME_ENV = "VTRAIN_RUNTIME"
STACK, IMAGE, HOST, CONTAINER = "stack", "image", "host", "container"


@dataclass(frozen=True)
class Choice:
    """The runtime a job's Python package pools run on, and why (what `vtrain doctor` prints)."""

    runtime: str  # stack | image | host | container (the job runs container images: not this choice's)
    why: str
    image: str | None = None  # the pools' executorImageUri
    stack: Stack | None = None


def requested(value: str | None, env: Mapping[str, str] | None = None) -> str:
    """The runtime asked for: `value` (a flag, RunOptions.runtime) unless it is auto, then VTRAIN_RUNTIME, then auto."""
    env = os.environ if env is None else env
    if value and value != "auto":
        return value
    said = env.get(RUNTIME_ENV, "").strip().lower()
    if said and said not in RUNTIMES:
        raise UsageError(f"{RUNTIME_ENV}={said!r}: one of {', '.join(RUNTIMES)}")
    return said or "auto"


def executor_images(job: Mapping[str, Any]) -> list[str]:
    """The executorImageUri of each Python package pool of a CustomJob body, each once, in pool order."""
    out: list[str] = []
    for pool in job.get("jobSpec", {}).get("workerPoolSpecs", []) or []:
        uri = str(((pool or {}).get("pythonPackageSpec") or {}).get("executorImageUri", "")).strip()
        if uri and uri not in out:
            out.append(uri)
    return out


def choose(job: Mapping[str, Any], value: str | None = "auto", *, gpu: bool = False,
           env: Mapping[str, str] | None = None) -> Choice:
    """The runtime of a CustomJob body's Python package pools (its REST form, as `render` prints it).

    `value` as asked (auto, stack, image, host; auto reads VTRAIN_RUNTIME); `gpu`: this machine has a GPU
    (a GPU image's stack is then TensorFlow's GPU build). A runtime that cannot serve this job is a UsageError."""
    flag = value if value and value != "auto" else None
    value = requested(value, env)
    source = f"--runtime {value}" if flag else f"{RUNTIME_ENV}={value}"
    if value not in RUNTIMES:
        raise UsageError(f"--runtime {value}: one of {', '.join(RUNTIMES)}")
    images = executor_images(job)
    if not images:
        if value in (STACK, IMAGE):
            raise UsageError(f"{source} applies to Python package pools; this job's pools run container "
                             "images (--containers says how)")
        return Choice(CONTAINER, "the job's pools run container images: each replica runs its image "
                                 "(--containers auto|always|never)")
    image = images[0]
    more = f" (its other pools' images: {', '.join(images[1:])}: every pool runs on the first's)" \
        if len(images) > 1 else ""
    stack = stack_for(image, gpu=gpu)
    if value == HOST:
        return Choice(HOST, f"{source}: this machine's Python and TensorFlow, not the image's" + more, image)
    if value == IMAGE:
        return Choice(IMAGE, f"{source}: each replica runs in {image} itself (pulled, run with runc/crun; "
                             "the trainer installed inside by pip)" + more, image, stack)
    if stack is None:
        if value == STACK:
            raise UsageError(f"{source}: vtrain has no stack for {image} (it knows the prebuilt TensorFlow "
                             "training images tf-cpu/tf-gpu/tf-tpu 2-12 to 2-17); use --runtime image or host")
        return Choice(HOST, f"{image} is not a prebuilt TensorFlow image vtrain has a stack for: this machine's "
                            "Python and TensorFlow" + more, image)
    said = source if value == STACK else "the default for a prebuilt image"
    build = "TensorFlow's GPU build" if stack.gpu else "TensorFlow's CPU build"
    return Choice(STACK, f"{said}: the image's stack, {stack.label}, {build}, on this machine" + more,
                  image, stack)


__all__ = ["CONTAINER", "HOST", "IMAGE", "RUNTIMES", "RUNTIME_ENV", "STACK", "Choice", "choose", "executor_images",
           "requested"]
