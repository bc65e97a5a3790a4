"""The pluggable job runner: what "running" a CustomJob means inside the emulator.

A runner is any callable ``runner(job, ctx) -> RunResult``. The emulator calls it in its
own thread once the job leaves JOB_STATE_PENDING (the job is then JOB_STATE_RUNNING):

- ``job`` is an ``aiplatform_v1.CustomJob`` copy of the stored job, with ``name``
  (``projects/P/locations/L/customJobs/ID``), labels and the full ``job_spec`` exactly as the
  client sent them; mutating it changes nothing.
- ``ctx`` is a :class:`RunContext`: ``ctx.job_id``; ``ctx.cancelled``, a ``threading.Event``
  set when the job is cancelled (a runner must then stop its work promptly and return,
  whatever it returns the job ends JOB_STATE_CANCELLED; it is also set when the emulator
  stops, and ``ctx.stopping`` is set then only); ``ctx.log(message, task=...)``
  which appends a Cloud Logging entry served by the emulator's ``/v2/entries:list``
  (``task`` is the replica, ``workerpool0-0`` style, as Vertex labels its logs);
  ``ctx.sleep(seconds)`` which returns True early if the job was cancelled; ``ctx.outputs_at(folder)``,
  where the job's outputs went when its baseOutputDirectory is not on this machine.
- It returns ``RunResult(state, error)`` with ``state`` JOB_STATE_SUCCEEDED,
  JOB_STATE_FAILED or JOB_STATE_CANCELLED; ``error`` becomes ``CustomJob.error.message``
  for a failure (``code``, default 13, its ``error.code``). An exception raised by the runner
  fails the job with its message.

The default :func:`sleep_runner` waits and succeeds. ``vtrain emulator --run-jobs`` loads
:data:`LOCAL_RUNNER` (:mod:`vtrain.emulator.local_jobs`, which runs the job through
``vtrain local``); ``--runner MODULE:ATTR`` loads any other.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vtrain.errors import BackendError

SUCCEEDED = "JOB_STATE_SUCCEEDED"
FAILED = "JOB_STATE_FAILED"
CANCELLED = "JOB_STATE_CANCELLED"
FINAL_STATES = (SUCCEEDED, FAILED, CANCELLED)

LOCAL_RUNNER = "vtrain.emulator.local_jobs:emulator_runner"


@dataclass(frozen=True)
class RunResult:
    state: str = SUCCEEDED
    error: str | None = None
    code: int | None = None  # google.rpc.Code of CustomJob.error for a failure (None: 13 INTERNAL)


@dataclass
class RunContext:
    """What a runner may touch: the job's ID, its cancellation event and its log."""

    job_id: str
    cancelled: threading.Event = field(default_factory=threading.Event)
    stopping: threading.Event = field(default_factory=threading.Event)
    _sink: Callable[[str, str, str], None] = lambda message, task, severity: None
    #: The emulator's own endpoint (``http://127.0.0.1:PORT``): where a job's replicas reach its API (the
    #: chief logs its Experiment Run there); "" when the runner is used without a server.
    api_url: str = ""
    _outputs: Callable[[str], None] = lambda folder: None

    def outputs_at(self, folder: str | os.PathLike[str]) -> None:
        """Say where the job's outputs really are when its baseOutputDirectory is not on this machine: Model
        Registry then reads an upload's artifactUri under that base there (:mod:`vtrain.emulator.artifacts`)."""
        self._outputs(os.fspath(folder))

    def log(self, message: str, *, task: str = "workerpool0-0", severity: str = "INFO") -> None:
        self._sink(message, task, severity)

    def sleep(self, seconds: float) -> bool:
        """Sleep, waking early on cancellation; True means the job was cancelled."""
        return self.cancelled.wait(seconds)


JobRunner = Callable[[Any, RunContext], RunResult]


def sleep_runner(seconds: float = 2.0) -> JobRunner:
    """The default: pretend to train for `seconds`, log two lines, succeed."""

    def run(job: Any, ctx: RunContext) -> RunResult:
        ctx.log(f"emulated job {job.display_name} started")
        if ctx.sleep(seconds):
            ctx.log("emulated job cancelled")
            return RunResult(CANCELLED)
        ctx.log(f"emulated job {job.display_name} finished")
        return RunResult(SUCCEEDED)

    return run


class GatedRunner:
    """Holds every job RUNNING until the test calls :meth:`release`: no timing in tests.

    With ``honour_cancel=False`` (the default) a cancelled job stays JOB_STATE_CANCELLING
    until released, as a slow real job does; the emulator stopping always ends it.
    """

    def __init__(self, *, honour_cancel: bool = False) -> None:
        self.honour_cancel = honour_cancel
        self.started = threading.Event()
        self._gate = threading.Event()
        self._result = RunResult()

    def release(self, state: str = SUCCEEDED, error: str | None = None) -> None:
        self._result = RunResult(state, error)
        self._gate.set()

    def __call__(self, job: Any, ctx: RunContext) -> RunResult:
        self.started.set()
        while not self._gate.wait(0.01):
            if ctx.stopping.is_set() or (self.honour_cancel and ctx.cancelled.is_set()):
                return RunResult(CANCELLED)
        return self._result


def load_runner(spec: str) -> JobRunner:
    """`module:attr` → runner; a missing one is a one-line BackendError, not an ImportError."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise BackendError(f"runner '{spec}' must be MODULE:ATTRIBUTE")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise BackendError(f"runner '{spec}': cannot import {module_name} ({err})") from err
    runner = getattr(module, attr, None)
    if not callable(runner):
        raise BackendError(f"runner '{spec}': {module_name} has no callable {attr}")
    return runner  # type: ignore[no-any-return]
