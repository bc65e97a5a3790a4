"""`vtrain local` on a tuning job: each trial a local job, several at a time, as Vertex AI runs a study.

A :class:`LocalTuningJob` takes the `hyperparameterTuningJobs.create` body (what `submit` would
send, or what the emulator stored) and runs it here:

- the searcher (:mod:`vtrain.tuning.search`) suggests each trial's values; the trial runs the
  trial job spec as a full local job (:func:`vtrain.local.runner.run_job`: one process
  per replica, the same supervision), with the values appended to every pool's args as
  `--NAME=VALUE`, CLOUD_ML_TRIAL_ID set, and AIP_* dirs under OUTPUT/<trial id>/ as on Vertex;
- CLOUD_ML_HP_METRIC_FILE points each pool at its own file under the trial's run dir; the
  chief's is read as Vertex reads it (:mod:`vtrain.runtime.hypertune`), while the trial runs
  (median early stopping) and when it ends (the final measurement: the last report);
- at most `max_parallel` trials run at once (the job's parallelTrialCount, bounded by this
  machine's CPUs); a trial that fails or reports no metric is INFEASIBLE and counts against
  maxFailedTrialCount (0 or unset: the study fails only when every trial did);
- the study SUCCEEDS when its trials are done and one has a metric; the best is named.

States are Vertex's: the study's JobState names, each trial's Trial.State names.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vtrain.errors import BackendError, WaitTimeout
from vtrain.foreign import printable
from vtrain.handle import (
    CANCELLED,
    CANCELLING,
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    JobHandle,
    LogHook,
    StateHook,
)
from vtrain.local.options import RunOptions
from vtrain.request.tuning_job import trial_custom_job
from vtrain.runtime.hypertune import METRIC_FILE_ENV, TRIAL_ID_ENV, read_reports
from vtrain.tuning import search
from vtrain.tuning.config import TuningConfig
from vtrain.tuning.table import TrialRow, format_table, format_value

if TYPE_CHECKING:
    from vtrain.local.envcache import TrainerEnv
    from vtrain.local.job import LocalJob

SUMMARY_FILE = "vtrain-tuning.json"
# Trial.State names
REQUESTED, ACTIVE, STOPPING, TRIAL_SUCCEEDED, INFEASIBLE = "REQUESTED", "ACTIVE", "STOPPING", "SUCCEEDED", "INFEASIBLE"


@dataclass
class Trial:
    id: str
    params: dict[str, Any]
    args: list[str]
    output_dir: Path
    state: str = REQUESTED
    job: LocalJob | None = None
    reports: list[tuple[int, float]] = field(default_factory=list)
    error: str | None = None
    stopped_early: bool = False
    started: float = 0.0
    ended: float = 0.0
    pick: str = "last"  # the study's measurement_selection: which report is the final measurement
    maximize: bool = True

    @property
    def final_report(self) -> tuple[int, float] | None:
        """(step, value) of the final measurement: the last report, or the best one (measurement_selection)."""
        if not self.reports:
            return None
        if self.pick == "best":  # the first of equals, as the earliest step to reach it
            return (max if self.maximize else min)(self.reports, key=lambda r: r[1])
        return self.reports[-1]

    @property
    def final(self) -> float | None:
        report = self.final_report
        return report[1] if report else None

    @property
    def metric_file(self) -> Path:
        return self.output_dir / "vtrain-local" / "hypertune" / "workerpool0.metrics"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "state": self.state, "parameters": self.params, "final": self.final,
                "step": self.reports[-1][0] if self.reports else None, "stopped_early": self.stopped_early,
                "error": self.error, "output_dir": str(self.output_dir),
                "seconds": round((self.ended or time.monotonic()) - self.started, 2) if self.started else 0.0}


def tuning_from_body(body: Mapping[str, Any]) -> TuningConfig:
    """The study of a REST body as the job config holds it (the emulator gets only the body)."""
    from vtrain.tuning.config import ALGORITHMS, GOALS, MEASUREMENTS, SCALES, STOPPING, MetricConfig, ParameterConfig

    study = body["studySpec"]
    goals = {v: k for k, v in GOALS.items()}
    scales = {v: k for k, v in SCALES.items()}
    algorithms = {v: k for k, v in ALGORITHMS.items()}
    measurements = {v: k for k, v in MEASUREMENTS.items()}
    params: list[ParameterConfig] = []

    def read(p: Mapping[str, Any], parent: str | None = None, when: tuple[Any, ...] = ()) -> None:
        """One ParameterSpec, then the ones conditional on it (flattened, each naming its parent)."""
        scale = scales.get(p.get("scaleType", ""))
        cond: dict[str, Any] = {"parent": parent, "parent_values": when}
        if "doubleValueSpec" in p:
            s = p["doubleValueSpec"]
            params.append(ParameterConfig(p["parameterId"], "double", s.get("minValue", 0.0), s.get("maxValue", 0.0),
                                          scale, **cond))
        elif "integerValueSpec" in p:
            s = p["integerValueSpec"]
            params.append(ParameterConfig(p["parameterId"], "integer", int(s.get("minValue", 0)),
                                          int(s.get("maxValue", 0)), scale, **cond))
        elif "discreteValueSpec" in p:
            params.append(ParameterConfig(p["parameterId"], "discrete", scale=scale,
                                          values=tuple(p["discreteValueSpec"].get("values", [])), **cond))
        else:
            params.append(ParameterConfig(p["parameterId"], "categorical",
                                          values=tuple(p.get("categoricalValueSpec", {}).get("values", [])), **cond))
        for child in p.get("conditionalParameterSpecs", []):
            condition = (child.get("parentDiscreteValues") or child.get("parentIntValues")
                         or child.get("parentCategoricalValues") or {})
            values = tuple(int(v) if "parentIntValues" in child else v for v in condition.get("values", []))
            read(child.get("parameterSpec", {}), p["parameterId"], values)

    for spec in study.get("parameters", []):
        read(spec)
    return TuningConfig(
        metrics=tuple(MetricConfig(m["metricId"], goals.get(m.get("goal", ""), "maximize"))
                      for m in study.get("metrics", [])),
        parameters=tuple(params),
        max_trials=int(body.get("maxTrialCount") or 1),
        algorithm=algorithms.get(study.get("algorithm", "ALGORITHM_UNSPECIFIED"), "default"),
        parallel_trials=int(body.get("parallelTrialCount") or 1),
        max_failed_trials=int(body.get("maxFailedTrialCount") or 0) or None,
        early_stopping=next((word for word, key in STOPPING.items() if key in study), "none"),
        measurement_selection=measurements.get(study.get("measurementSelectionType", ""), "last"),
    )


def machine_parallelism(body: Mapping[str, Any], max_replicas: int | None = None) -> int:
    """How many trials this machine runs at once: one CPU core per replica of a trial."""
    from vtrain.request.build import trial_job_spec

    replicas = sum(int(p.get("replicaCount", 0)) for p in trial_job_spec(body).get("workerPoolSpecs", []) if p)
    replicas = min(replicas, max_replicas) if max_replicas else replicas
    return max(1, (os.cpu_count() or 1) // max(1, replicas))


class LocalTuningJob(JobHandle):
    """A study running here; the same handle as any job (state, wait, cancel, logs), plus `trials`."""

    default_poll = 0.2

    def __init__(self, body: Mapping[str, Any], *, trainer_env: TrainerEnv | None, output_dir: Path,
                 name: str | None = None, job_id: str | None = None, max_parallel: int | None = None,
                 seed: int = 0, out: IO[str] | None = None,
                 notice: Callable[[str], None] = lambda text: None,
                 on_line: Callable[[str, Any, str, str], None] | None = None,
                 on_change: Callable[[LocalTuningJob], None] | None = None, poll: float = 0.2,
                 options: RunOptions | None = None, images: Mapping[str, Any] | None = None) -> None:
        self.job_id = job_id or f"local-tuning-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}"
        super().__init__(self.job_id)
        self.body = copy.deepcopy(dict(body))
        self.display_name = name or str(body.get("displayName") or "study")
        self.tuning = tuning_from_body(body)
        self.output_dir = output_dir
        wanted = self.tuning.parallel_trials if max_parallel is None else max_parallel
        self.max_parallel = max(1, min(wanted, self.tuning.max_trials))
        self.searcher = search.make_searcher(self.tuning, seed)
        self.seed = seed
        self.trials: list[Trial] = []
        self._trainer_env = trainer_env
        self._images = dict(images or {})  # a trainer.build job's images, unpacked (vtrain.local.image)
        self._out = out
        self._notice = notice
        self._on_line = on_line
        self._on_change = on_change
        self._poll = poll
        self._options = options or RunOptions()  # each trial's, with its own output dir
        self._lock = threading.RLock()
        self._finished = threading.Event()
        self._cancel = False
        self._log_path = output_dir / "vtrain-tuning.log"
        self.summary: dict[str, Any] = {}  # what SUMMARY_FILE says once the study ended
        self.started_at = self.ended_at = 0.0

    # ---- the handle ---------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._finished.is_set()

    def refresh(self) -> str:
        return self._state

    def wait(self, timeout: float | None = None, poll: float | None = None, *,
             on_state: StateHook | None = None, on_log: LogHook | None = None) -> str:
        if on_state is not None or on_log is not None:  # the handle's own wait reports states and follows logs
            return super().wait(timeout, poll, on_state=on_state, on_log=on_log)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._finished.wait(0.25):
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(self._name, self._state, timeout or 0.0)
        return self._state

    def cancel(self, force: bool = False) -> None:
        with self._lock:
            if self._finished.is_set():
                return
            self._cancel = True
            if self._state in (PENDING, RUNNING):
                self._state = CANCELLING
            running = [t.job for t in self.trials if t.job is not None and not t.job.done]
        for job in running:
            job.cancel(force=force)

    def logs(self, *, follow: bool = False) -> Iterator[str]:
        """The study's own lines (trial starts and ends); each trial's replica logs are in its dir."""
        with open(self._log_path, encoding="utf-8", errors="replace") as f:
            while True:
                line = f.readline()
                if line:
                    yield line.rstrip("\n")
                elif follow and not self._finished.is_set():
                    time.sleep(0.2)
                else:
                    return

    @property
    def best(self) -> Trial | None:
        with self._lock:
            done = [t for t in self.trials if t.state == TRIAL_SUCCEEDED]
        index = search.best_index([t.final for t in done], self.tuning.metric.maximize)
        return None if index is None else done[index]

    def rows(self) -> list[TrialRow]:
        with self._lock:
            return [TrialRow(t.id, t.state, {p.name: search.flag_value(p, t.params[p.name])
                                             for p in self.tuning.parameters},
                             t.final, t.reports[-1][0] if t.reports else None,
                             "stopped early" if t.stopped_early else (t.error or "").split("\n")[0][:60])
                    for t in self.trials]

    def table(self) -> list[str]:
        best = self.best
        return format_table(self.rows(), self.tuning.metric.name, best.id if best else None)

    # ---- running ----------------------------------------------------------------------
    def start(self) -> LocalTuningJob:
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self._log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed at the end
        except OSError as err:
            raise BackendError(f"cannot write the output directory {self.output_dir}: {err.strerror or err}") from None
        if self.searcher.notice:
            self._say(self.searcher.notice)
        self._state = RUNNING
        self.started_at = time.monotonic()
        self._say(f"study {self.display_name} ({self.job_id}): {self.tuning.algorithm} search, up to "
                  f"{self.tuning.max_trials} trials, {self.max_parallel} at a time; outputs in {self.output_dir}")
        threading.Thread(target=self._supervise, name=f"vtrain-tuning-{self.job_id}", daemon=True).start()
        return self

    def _say(self, text: str) -> None:
        line = f"[tuning] {text}"
        with self._lock:
            if getattr(self, "_log_file", None) is not None and not self._log_file.closed:
                self._log_file.write(line + "\n")
                self._log_file.flush()
        self._notice(text)

    def _supervise(self) -> None:
        state: str = FAILED
        error: str | None = "the tuner stopped unexpectedly"
        try:
            state, error = self._loop()
        except BaseException as err:  # noqa: BLE001 - a tuner bug fails the study, never leaves processes
            error = f"the tuner failed: {type(err).__name__}: {err}"
        finally:
            for t in self.trials:
                if t.job is not None and not t.job.done:
                    t.job.cancel(force=True)
                    t.job.wait()
            self._finish(state, error)

    def _loop(self) -> tuple[str, str | None]:
        exhausted = False
        budget = self.tuning.max_failed_trials or 0
        while True:
            with self._lock:
                cancel = self._cancel
            if cancel:
                return CANCELLED, "cancelled"
            for t in self._running():
                self._poll_trial(t)
            failed = [t for t in self.trials if t.state == INFEASIBLE]
            if budget and len(failed) > budget:
                return FAILED, (f"{len(failed)} trials failed, more than max_failed_trials ({budget}); "
                                f"the last: {failed[-1].error}")
            running = self._running()
            while not exhausted and len(running) < self.max_parallel and len(self.trials) < self.tuning.max_trials:
                params = self.searcher.suggest()
                if params is None:
                    exhausted = True
                    break
                running.append(self._launch(params))
            if not running:
                return self._verdict(budget)
            time.sleep(self._poll)

    def _verdict(self, budget: int) -> tuple[str, str | None]:
        failed = [t for t in self.trials if t.state == INFEASIBLE]
        if not self.trials:
            return FAILED, "the search suggested no trial"
        if self.best is None:
            why = failed[-1].error if failed else "no trial reported the metric"
            return FAILED, f"no trial succeeded with a value of '{self.tuning.metric.name}': {why}"
        return SUCCEEDED, None

    def _running(self) -> list[Trial]:
        return [t for t in self.trials if t.state in (ACTIVE, STOPPING)]

    def _launch(self, params: dict[str, Any]) -> Trial:
        from vtrain.local.runner import run_job

        trial_id = str(len(self.trials) + 1)
        trial = Trial(trial_id, params, search.trial_args(self.tuning, params), self.output_dir / trial_id,
                      pick=self.tuning.measurement_selection, maximize=self.tuning.metric.maximize)
        body = trial_custom_job(self.body, trial_id, trial.args)
        for i, pool in enumerate(body["jobSpec"].get("workerPoolSpecs", [])):
            for key in ("pythonPackageSpec", "containerSpec"):
                if key in pool:
                    env = [e for e in pool[key].get("env", []) if e["name"] not in (TRIAL_ID_ENV, METRIC_FILE_ENV)]
                    metric_file = trial.metric_file.with_name(f"workerpool{i}.metrics")
                    pool[key]["env"] = [*env, {"name": TRIAL_ID_ENV, "value": trial_id},
                                        {"name": METRIC_FILE_ENV, "value": str(metric_file)}]
        with self._lock:
            self.trials.append(trial)
        trial.started = time.monotonic()

        def forward(replica: Any, text: str, stream: str) -> None:
            if self._out is not None:
                self._out.write(f"[trial-{trial_id} {replica.label}] {printable(text)}\n")
                self._out.flush()
            if self._on_line is not None:
                self._on_line(trial_id, replica, text, stream)

        try:
            options = self._options.replace(output_dir=trial.output_dir, keep=False)
            trial.job = run_job(body, trainer_env=self._trainer_env, options=options, name=body["displayName"],
                                job_id=f"{self.job_id}-trial-{trial_id}", out=None, on_line=forward,
                                images=self._images)
        except BackendError as err:
            trial.state, trial.error, trial.ended = INFEASIBLE, str(err), time.monotonic()
            self._changed(trial, f"trial {trial_id} could not start: {err}")
            self.searcher.tell(params, None)
            return trial
        trial.state = ACTIVE
        shown = ", ".join(trial.args)
        self._changed(trial, f"trial {trial_id} started: {shown} (logs: {trial.output_dir / 'vtrain-local'})")
        return trial

    def _poll_trial(self, t: Trial) -> None:
        metric = self.tuning.metric.name
        assert t.job is not None
        done = t.job.done  # before reading: a report written just before the exit is not missed
        reports = [(r.step, r.value) for r in read_reports(t.metric_file) if r.name == metric]
        if reports != t.reports:
            t.reports = reports
            self._changed(t, None)
        if done:
            self._ended(t)
            return
        if self.tuning.early_stopping == "median" and t.state == ACTIVE:
            with self._lock:
                completed = [c.reports for c in self.trials if c.state == TRIAL_SUCCEEDED and c.reports]
            if search.should_stop_median(t.reports, completed, self.tuning.metric.maximize):
                t.state, t.stopped_early = STOPPING, True
                self._changed(t, f"trial {t.id} stopped early: {metric} {format_value(t.final)} at step "
                                 f"{t.reports[-1][0]} is worse than the median of the completed trials")
                t.job.cancel()

    def _ended(self, t: Trial) -> None:
        assert t.job is not None
        state = t.job.wait()
        t.ended = time.monotonic()
        metric = self.tuning.metric.name
        if t.stopped_early or (state == SUCCEEDED and t.reports):
            t.state = TRIAL_SUCCEEDED if t.reports else INFEASIBLE
            text = f"{metric} {format_value(t.final)} at step {t.reports[-1][0]}" if t.reports else "no metric"
        elif state == SUCCEEDED:
            t.state = INFEASIBLE
            t.error = (f"the trial succeeded but reported no '{metric}' (report it with "
                       f"vtrain.runtime.report_metric('{metric}', value, step) or cloudml-hypertune)")
            text = t.error
        else:
            t.state, t.error = INFEASIBLE, t.job.error or f"the trial ended {state}"
            text = f"{state.removeprefix('JOB_STATE_')}: {t.error}"
        self.searcher.tell(t.params, t.final if t.state == TRIAL_SUCCEEDED else None)
        self._changed(t, f"trial {t.id} {t.state} in {t.ended - t.started:.1f} s: {text}")

    def _changed(self, trial: Trial, text: str | None) -> None:
        if text:
            self._say(text)
        if self._on_change is not None:
            self._on_change(self)

    def _finish(self, state: str, error: str | None) -> None:
        self.ended_at = time.monotonic()
        if self._cancel and state != SUCCEEDED:
            state, error = CANCELLED, "cancelled"
        best = self.best
        self.summary = {
            "name": self.job_id, "display_name": self.display_name, "state": state, "error": error,
            "seconds": round(self.ended_at - self.started_at, 2), "output_dir": str(self.output_dir),
            "algorithm": self.tuning.algorithm, "seed": self.seed, "metric": self.tuning.metric.name,
            "goal": self.tuning.metric.goal, "best_trial": best.id if best else None,
            "trials": [t.to_dict() for t in self.trials],
        }
        with contextlib.suppress(OSError):
            (self.output_dir / SUMMARY_FILE).write_text(json.dumps(self.summary, indent=2) + "\n", encoding="utf-8")
        if best is not None:
            self._say(f"best trial {best.id}: {self.tuning.metric.name} {format_value(best.final)} with "
                      f"{' '.join(best.args)}")
        with self._lock:
            self._state, self._error = state, error
            if getattr(self, "_log_file", None) is not None:
                self._log_file.close()
        if self._on_change is not None:
            self._on_change(self)
        self._finished.set()


__all__ = ["SUMMARY_FILE", "LocalTuningJob", "Trial", "machine_parallelism", "tuning_from_body"]
