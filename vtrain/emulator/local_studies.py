"""`vtrain emulator --run-jobs` for HyperparameterTuningJobs: the study runs through the local tuner.

The emulator hands over the tuning job as the client sent it; its REST form is the body
`submit` built, so it goes to :class:`~vtrain.local.studies.LocalTuningJob` as `vtrain local`
would run it: the packages in the trial spec installed once into the cached environment (as
for CustomJobs, :mod:`vtrain.emulator.local_jobs`), every trial a local job. Trials are
published to the job as Vertex reports them (state, parameters, final measurement), so
`get`, `vtrain status` and `submit --wait` see the real trials and the real best one. Each
replica line becomes a log entry for its task with the trial's ID as a label. Outputs: the
job's local baseOutputDirectory, else ``$TMPDIR/vtrain-emulator/<job id>``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vtrain.emulator.runner import CANCELLED, FAILED, RunContext, RunResult
from vtrain.errors import VtrainError
from vtrain.local.options import RunOptions, run_options


def trial_dicts(study: Any) -> list[dict[str, Any]]:
    """The study's trials as REST Trial dicts."""
    metric = study.tuning.metric.name
    out = []
    for t in list(study.trials):
        item: dict[str, Any] = {"id": t.id, "state": t.state,
                                "parameters": [{"parameterId": k, "value": v} for k, v in t.params.items()]}
        if t.reports:
            step, value = t.final_report  # the study's measurement_selection: last or best
            item["finalMeasurement"] = {"stepCount": str(step), "metrics": [{"metricId": metric, "value": value}]}
            item["measurements"] = [{"stepCount": str(s), "metrics": [{"metricId": metric, "value": v}]}
                                    for s, v in t.reports]
        if t.error and t.state == "INFEASIBLE":
            lines = t.error.splitlines()  # "chief-0 exited with code 1", then the replica's last lines
            # its last stderr line, else the last line of either pipe (their relative order is a race)
            last = getattr(t.job, "error_reason", "") or (
                lines[-1].strip().lstrip("|").strip() if len(lines) > 2 else "")
            item["infeasibleReason"] = (lines[0] + (f": {last}" if last else ""))[:500]
        out.append(item)
    return out


class TuningRunner:
    """The runner `--run-jobs` loads for tuning jobs; `options` (default: the emulator's jobs',
    :data:`vtrain.emulator.local_jobs.EMULATED`, or its fields as keywords) apply to every trial.
    `options.cache_dir` and `output_root` default to VTRAIN_CACHE_DIR (else ~/.cache/vtrain) and
    $TMPDIR/vtrain-emulator, read when a job starts."""

    def __init__(self, *, output_root: str | os.PathLike[str] | None = None, options: RunOptions | None = None,
                 **keywords: Any) -> None:
        from vtrain.emulator.local_jobs import EMULATED

        self.options = run_options(options, keywords, "TuningRunner", base=EMULATED)
        self.output_root = output_root

    def __call__(self, job: Any, ctx: RunContext) -> RunResult:
        return _run(self, job, ctx)


def _run(self: TuningRunner, job: Any, ctx: RunContext) -> RunResult:
    from google.cloud.aiplatform_v1 import HyperparameterTuningJob
    from google.protobuf import json_format

    from vtrain.emulator.local_jobs import (
        default_output_root,
        follow,
        install_packages,
        pull_images,
        severity_of,
        task_of,
    )
    from vtrain.local.runner import local_output_dir
    from vtrain.local.studies import LocalTuningJob, machine_parallelism

    body = json_format.MessageToDict(HyperparameterTuningJob.pb(job))
    spec = {"jobSpec": body.get("trialJobSpec", {})}

    def notice(text: str) -> None:
        ctx.log(text, task="")

    def publish(study: Any) -> None:
        setter = getattr(ctx, "set_trials", None)
        if setter is not None:
            setter(trial_dicts(study))

    def forward(trial: str, replica: Any, text: str, stream: str) -> None:
        task, severity = task_of(replica.pool, replica.index), severity_of(stream)
        if hasattr(ctx, "set_trials"):
            ctx.log(text, task=task, severity=severity, trial=trial)  # type: ignore[call-arg]
        else:
            ctx.log(f"[trial-{trial}] {text}", task=task, severity=severity)

    try:
        trainer_env, prebuilt = install_packages(spec, self.options.cache_dir, notice, self.options.runtime)
        images = {**pull_images(spec, self.options.cache_dir, notice), **prebuilt}  # a trainer.build study's image
        if ctx.cancelled.is_set():
            return RunResult(CANCELLED)
        root = Path(self.output_root) if self.output_root is not None else default_output_root()
        output_dir = local_output_dir(spec) or root / ctx.job_id
        parallel = min(int(body.get("parallelTrialCount") or 1), machine_parallelism(body, self.options.max_replicas))
        study = LocalTuningJob(body, trainer_env=trainer_env, output_dir=Path(output_dir), job_id=ctx.job_id,
                               max_parallel=parallel, notice=notice, on_line=forward, on_change=publish,
                               options=self.options.replace(output_dir=output_dir), images=images).start()
    except VtrainError as err:
        notice(f"the tuning job cannot run here: {err}")
        return RunResult(FAILED, str(err))
    return follow(study, ctx, notice, poll=0.1, parts="trial", noun="study", on_end=lambda: publish(study))


#: What ``vtrain emulator --run-jobs`` loads for tuning jobs (vtrain.emulator.tuning.LOCAL_TUNING_RUNNER).
tuning_runner = TuningRunner()

__all__ = ["TuningRunner", "trial_dicts", "tuning_runner"]
