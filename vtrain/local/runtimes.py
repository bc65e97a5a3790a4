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
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtrain.errors import UsageError
from vtrain.local.stacks import Stack, stack_for

if TYPE_CHECKING:
    from vtrain.local.envcache import TrainerEnv
    from vtrain.local.prebuilt import PackageImage

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


# --------------------------------------------------------------------------- making it ready (I/O)


def local_gpus(env: Mapping[str, str]) -> list[str]:
    """GPU ids this machine offers: CUDA_VISIBLE_DEVICES when set, else what nvidia-smi lists."""
    if "CUDA_VISIBLE_DEVICES" in env:
        return [g for g in env["CUDA_VISIBLE_DEVICES"].split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def env_notices(trainer_env: TrainerEnv, notice: Callable[[str], None]) -> None:
    notice(f"environment {trainer_env.venv} ({'cached' if trainer_env.cached else 'installed'} "
           f"in {trainer_env.seconds:.1f} s)")
    for text in trainer_env.notices:
        notice(text)


def python_runtime(sdists: list[Path], cache: Path, choice: Choice,
                   notice: Callable[[str], None]) -> tuple[TrainerEnv | None, dict[str, PackageImage]]:
    """What a Python package job's replicas run on, made ready: an environment with the sdists (over the image's
    stack or this machine's packages), or under --runtime image the prebuilt image, pulled and unpacked, in whose
    containers each replica installs them itself."""
    if choice.runtime != IMAGE or choice.image is None:
        return install_trainer(sdists, cache, choice, notice), {}
    from vtrain.local.prebuilt import prebuilt_images
    notice(f"runtime: {choice.runtime}: {choice.why}")
    return None, prebuilt_images([choice.image], sdists, cache, gpu_here=bool(local_gpus(os.environ)), notice=notice)


def choose_runtime(job: Mapping[str, Any], runtime: str = "auto") -> Choice:
    """:func:`vtrain.local.runtimes.choose` for this machine (whether it has a GPU)."""
    return choose(job, runtime, gpu=bool(local_gpus(os.environ)))


def install_trainer(sdists: list[Path], cache: Path, choice: Choice, notice: Callable[[str], None]) -> TrainerEnv:
    """The sdists installed into their cached environment, over the runtime `choice` names: the image's stack
    (built once, :func:`vtrain.local.stacks.prepare_stack`) or this machine's packages. Says which."""
    from vtrain.local import envcache
    notice(f"runtime: {choice.runtime}: {choice.why}")
    if choice.runtime != STACK or choice.stack is None:
        trainer_env = envcache.prepare_env(sdists, cache)
        env_notices(trainer_env, notice)
        return trainer_env
    from vtrain.local.stacks import prepare_stack, stack_base

    built, lease = prepare_stack(choice.stack, cache, notice)
    try:
        trainer_env = envcache.prepare_env(sdists, cache, base=stack_base(built, lease))
    except BaseException:
        lease.release()
        raise
    if built.cached:
        notice(f"the image's stack {built.venv} (cached)")
    env_notices(trainer_env, notice)
    for text in built.notices:
        notice(text)
    return trainer_env


__all__ = ["CONTAINER", "HOST", "IMAGE", "RUNTIMES", "RUNTIME_ENV", "STACK", "Choice", "choose", "executor_images",
           "requested", "choose_runtime", "env_notices", "local_gpus", "install_trainer", "python_runtime"]
