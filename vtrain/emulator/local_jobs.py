"""`vtrain emulator --run-jobs`: every CustomJob the emulator accepts really runs, through `vtrain local`.

The emulator hands the runner the job exactly as the client sent it. Its REST form
(``json_format.MessageToDict``) is the body ``submit`` built, so it goes straight to
:func:`vtrain.local.run_job`. That means one process per replica on 127.0.0.1,
with the environment Vertex sets and ``CLOUD_ML_JOB_ID`` set to the emulator's job ID.
So ``vtrain submit --wait`` against the emulator ends the way the trainer really ends,
and a CI pipeline can test submit → wait → logs without a cloud project.

- Packages: each Python pool's ``packageUris``, fetched from Cloud Storage (the GCS emulator
  when STORAGE_EMULATOR_HOST is set; bounded and checked, :mod:`vtrain.local.downloads`), ``file://`` or plain
  paths. They are installed once into the cached environment that ``vtrain local`` uses (VTRAIN_CACHE_DIR, else
  ~/.cache/vtrain): :mod:`vtrain.local.bodies`, which `vtrain local REQUEST` shares.
- Outputs: the job's baseOutputDirectory when it is on this machine (a path or file://).
  Otherwise ``$TMPDIR/vtrain-emulator/<job id>``, which stays after the job ends and is named
  in the job's log.
- Logs: each replica line becomes a log entry for its task (``workerpool1-0``), so
  ``vtrain logs`` prints it as ``[worker-0] …``. The launcher's own notices carry no task and
  print as ``[vertex] …``.
- Steps: each replica logs its steps as on Vertex (VTRAIN_STEP_LOG=1 unless the job's env says
  otherwise, :mod:`vtrain.runtime.steplog`), so ``submit --wait`` and ``status --watch`` show them.
- Restarts and faults: a failed replica is restarted as Vertex AI restarts it (the runner's
  `restart_policy`, "vertex" by default), and the faults named in the job's labels are injected
  (``vtrain-fault: worker-1_kill_30s``, see :func:`vtrain.local.faults.specs_from_labels`);
  a malformed fault label fails the job before it starts.
- Cancel: every replica's process group gets SIGTERM, then SIGKILL after `kill_grace`. When the
  emulator stops, they get SIGKILL at once, so no process outlives it. A cancel that arrives
  while packages are still installing takes effect once the install ends.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtrain.emulator.endings import replica_failure
from vtrain.emulator.runner import CANCELLED, FAILED, SUCCEEDED, RunContext, RunResult
from vtrain.errors import FaultSpecError, VtrainError
from vtrain.local.bodies import install_packages, package_uris, pull_images, with_step_log
from vtrain.local.options import RunOptions, run_options

if TYPE_CHECKING:
    from vtrain.local.job import LocalJob


def follow(handle: Any, ctx: RunContext, notice: Callable[[str], None], *, poll: float, parts: str, noun: str,
           on_end: Callable[[], None] | None = None) -> RunResult:
    """Wait for a local job or study to end, stopping it when the emulator cancels; its RunResult.

    Whatever happens, no process is left behind; `on_end` runs last either way."""
    try:
        while not handle.done:
            if ctx.cancelled.wait(poll):
                notice(f"cancelled: stopping every {parts}")
                handle.cancel(force=ctx.stopping.is_set())
                handle.wait()
                return RunResult(CANCELLED)
        state = handle.wait()
    finally:
        if not handle.done:  # an unexpected error above: still leave no process behind
            handle.cancel(force=True)
            handle.wait()
        if on_end is not None:
            on_end()
    if state == SUCCEEDED:
        return RunResult(SUCCEEDED)
    if state == CANCELLED:
        return RunResult(CANCELLED)
    error = handle.error or f"the {noun} ended {state}"
    replica = replica_failure(error) if noun == "job" else None  # worded as Vertex words it (endings.py)
    return RunResult(FAILED, replica[1], replica[0]) if replica else RunResult(FAILED, error)


def task_of(pool: int, index: int) -> str:
    """Vertex's task name for a replica, as its log entries carry it."""
    return f"workerpool{pool}-{index}"


#: The run options of the emulator's jobs unless a runner is given others: a 3 s kill grace, and
#: nothing kept (each job's output dir stays; the replicas' working dirs go).
EMULATED = RunOptions(keep=False, kill_grace=3.0)


class EmulatedRunner:
    """The runner the emulator loads for ``--run-jobs``. It is configurable for tests and embedders:
    `options` (:class:`~vtrain.local.options.RunOptions`, default :data:`EMULATED`; its fields may
    also be given as keywords, ``kill_grace=2``, over EMULATED) apply to every job, less the output
    dir (each job's, see the module) and the faults (the job's labels). An `options` given is the
    whole value: ``EMULATED.replace(...)`` keeps the emulator's defaults. `output_root` and `options.cache_dir`
    default to values read when each job starts."""

    def __init__(self, *, output_root: str | os.PathLike[str] | None = None, poll: float = 0.1,
                 options: RunOptions | None = None, **keywords: Any) -> None:
        self.options = run_options(options, keywords, "EmulatedRunner", base=EMULATED)
        self.output_root = output_root
        self.poll = poll

    def __call__(self, job: Any, ctx: RunContext) -> RunResult:
        from google.protobuf import json_format

        body = json_format.MessageToDict(getattr(job, "_pb", job))

        def notice(text: str) -> None:
            ctx.log(text, task="")

        try:
            handle = self._start(body, ctx, notice)
        except FaultSpecError as err:  # the job's own labels ask for a fault that cannot be
            notice(f"the job's fault labels cannot be used: {err}")
            return RunResult(FAILED, str(err), code=3)  # INVALID_ARGUMENT
        except VtrainError as err:
            notice(f"the job cannot run here: {err}")
            return RunResult(FAILED, str(err))
        if handle is None:
            return RunResult(CANCELLED)
        return follow(handle, ctx, notice, poll=self.poll, parts="replica", noun="job")

    def _start(self, body: dict[str, Any], ctx: RunContext, notice: Callable[[str], None]) -> LocalJob | None:
        """Fetch and install the packages, then start the replicas; None if cancelled meanwhile."""
        from vtrain.local.env import Replica
        from vtrain.local.faults import specs_from_labels
        from vtrain.local.runner import local_output_dir, run_job

        faults = specs_from_labels(dict(body.get("labels") or {}))  # before anything is installed
        trainer_env, prebuilt = install_packages(body, self.options.cache_dir, notice, self.options.runtime)
        images = {**pull_images(body, self.options.cache_dir, notice), **prebuilt}
        if ctx.cancelled.is_set():
            return None
        output_dir = local_output_dir(body)
        if output_dir is None:
            root = Path(self.output_root) if self.output_root is not None else default_output_root()
            output_dir = root / ctx.job_id
            base = (body["jobSpec"].get("baseOutputDirectory") or {}).get("outputUriPrefix")
            why = f"baseOutputDirectory {base} is not on this machine" if base else "the job has no baseOutputDirectory"
            notice(f"{why}: outputs go to {output_dir}")
            ctx.outputs_at(output_dir)  # Model Registry reads an upload of the job's model dir there

        def forward(replica: Replica, text: str, stream: str) -> None:
            ctx.log(text, task=task_of(replica.pool, replica.index), severity=severity_of(stream))

        options = self.options.replace(output_dir=output_dir, faults=faults)
        body = with_experiment_run(with_step_log(body), ctx.api_url)
        return run_job(body, trainer_env=trainer_env, options=options, job_id=ctx.job_id, notice=notice,
                       on_line=forward, images=images)


def with_experiment_run(body: dict[str, Any], api_url: str) -> dict[str, Any]:
    """The job with what Vertex gives the replicas of a job with an experiment run (AIP_EXPERIMENT_NAME,
    AIP_EXPERIMENT_RUN_NAME, as the SDK reads them), and this emulator's endpoint for the chief to log to
    (VTRAIN_EXPERIMENT_API_ENDPOINT). A job without both is unchanged."""
    import copy

    from vtrain.runtime.experiment_log import ENDPOINT_ENV, EXPERIMENT_ENV, RUN_ENV

    spec = body.get("jobSpec", {})
    if not (spec.get("experiment") and spec.get("experimentRun")):
        return body
    extra = {EXPERIMENT_ENV: spec["experiment"], RUN_ENV: spec["experimentRun"]}
    if api_url:
        extra[ENDPOINT_ENV] = api_url
    out = copy.deepcopy(body)
    for pool in out["jobSpec"].get("workerPoolSpecs", []):
        target = pool.get("pythonPackageSpec", pool.get("containerSpec"))
        if target is not None:
            own = {e.get("name") for e in target.get("env", [])}
            target.setdefault("env", []).extend({"name": k, "value": v} for k, v in extra.items() if k not in own)
    return out


def severity_of(stream: str) -> str:
    """Cloud Logging's severity for a replica's line, as Vertex writes it: stderr is ERROR, stdout INFO."""
    return "ERROR" if stream == "stderr" else "INFO"


def default_output_root() -> Path:
    return Path(tempfile.gettempdir()) / "vtrain-emulator"


#: What ``vtrain emulator --run-jobs`` loads (vtrain.emulator.runner.LOCAL_RUNNER).
emulator_runner = EmulatedRunner()

__all__ = ["EMULATED", "EmulatedRunner", "default_output_root", "emulator_runner", "follow", "install_packages",
           "package_uris", "pull_images", "task_of", "with_step_log"]
