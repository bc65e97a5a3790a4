"""HyperparameterTuningJobs in the emulator: the v1 REST collection, its store, and its runners.

Routes (as `JobServiceClient(transport="rest")` calls them):

    POST   /v1/projects/P/locations/L/hyperparameterTuningJobs             create
    GET    /v1/projects/P/locations/L/hyperparameterTuningJobs             list (filter, pageSize, pageToken)
    GET    /v1/projects/P/locations/L/hyperparameterTuningJobs/ID          get
    POST   /v1/projects/P/locations/L/hyperparameterTuningJobs/ID:cancel   cancel → {}
    DELETE /v1/projects/P/locations/L/hyperparameterTuningJobs/ID          delete → done Operation

Parsing is strict (`json_format` into `aiplatform.v1.HyperparameterTuningJob`); the study and
the trial job spec are checked as Vertex checks them at create time (the trial spec by the very
checks a CustomJob gets). A tuning runner is ``runner(job, ctx) -> RunResult`` like a CustomJob
runner, where ``ctx`` (:class:`TuningContext`) also has ``set_trials([...])`` (REST Trial dicts:
the job's `trials` as `get` then returns them) and ``log(message, task=..., trial=ID)``. The
default pretends (trials suggested by random or grid search, none measured); ``--run-jobs``
loads :data:`LOCAL_TUNING_RUNNER`, which runs every trial through the local tuner.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.cloud.aiplatform_v1.types import CustomJob, HyperparameterTuningJob
from google.protobuf import json_format

from vtrain.emulator import validation
from vtrain.emulator.errors import invalid_argument, not_found
from vtrain.emulator.runner import CANCELLED, SUCCEEDED, RunContext, RunResult
from vtrain.emulator.store import TERMINAL, JobStore, _Record

LOCAL_TUNING_RUNNER = "vtrain.emulator.local_studies:tuning_runner"
TRIAL_LABEL = "ml.googleapis.com/trial_id"
_COLLECTION = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/hyperparameterTuningJobs$")
_JOB = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/hyperparameterTuningJobs/([^/:]+)(:cancel)?$")
_OUTPUT_ONLY = ("name", "trials", "state", "create_time", "start_time", "end_time", "update_time", "error",
                "satisfies_pzs", "satisfies_pzi")
TuningPb = HyperparameterTuningJob.pb()


@dataclass
class TuningContext(RunContext):
    """A RunContext that can also publish the study's trials."""

    _trials: Callable[[list[dict[str, Any]]], None] = lambda trials: None
    _trial_sink: Callable[[str, str, str, str], None] = lambda message, task, severity, trial: None

    def set_trials(self, trials: list[dict[str, Any]]) -> None:
        """Replace the job's trials with these REST Trial dicts (id, state, parameters, finalMeasurement, ...)."""
        self._trials(trials)

    def log(self, message: str, *, task: str = "workerpool0-0", severity: str = "INFO", trial: str = "") -> None:
        if trial:
            self._trial_sink(message, task, severity, trial)
        else:
            self._sink(message, task, severity)


class TuningStore(JobStore):
    collection = "hyperparameterTuningJobs"
    kind = "HyperparameterTuningJob"
    descriptor = TuningPb.DESCRIPTOR

    def _wrap(self, pb: Any) -> Any:
        return HyperparameterTuningJob.wrap(pb)

    def trial_job(self, name: str) -> Any | None:
        """The CustomJob a trial names (`Trial.custom_job`), as `customJobs.get` answers it: the trial job
        spec, the trial's times, its state as a job's; None when no trial names it."""
        from google.cloud.aiplatform_v1.types import JobState

        from vtrain.emulator.projects import canonical

        wanted = canonical(name)
        with self._lock:
            for rec in self._jobs.values():
                for trial in rec.job.trials:
                    if trial.custom_job and canonical(trial.custom_job) == wanted:
                        job = CustomJob.pb()()
                        job.name = trial.custom_job
                        job.display_name = f"{rec.job.display_name}-trial-{trial.id}"[:128]
                        job.job_spec.CopyFrom(rec.job.trial_job_spec)
                        state = _TRIAL_JOB_STATE.get(trial.state, "JOB_STATE_RUNNING")
                        if state == "JOB_STATE_RUNNING" and rec.job.state in TERMINAL:
                            state = "JOB_STATE_CANCELLED"  # a study that ended stopped its trials
                        job.state = getattr(JobState, state).value
                        job.create_time.CopyFrom(trial.start_time)
                        job.start_time.CopyFrom(trial.start_time)
                        job.update_time.CopyFrom(trial.end_time if trial.HasField("end_time") else trial.start_time)
                        if trial.HasField("end_time"):
                            job.end_time.CopyFrom(trial.end_time)
                        return job
        return None

    def _set_state(self, rec: _Record, state: str, error: str | None = None, code: int = 0) -> None:
        super()._set_state(rec, state, error, code)
        if rec.job.state in TERMINAL:  # a study that ended leaves no trial running
            now = rec.job.end_time
            for trial in rec.job.trials:
                if trial.state not in _TRIAL_ENDED:
                    trial.state = TRIAL_INFEASIBLE
                    trial.infeasible_reason = trial.infeasible_reason or f"The study ended {state}."
                if not trial.HasField("end_time"):
                    trial.end_time.CopyFrom(now)

    def _context(self, rec: _Record, job_id: str) -> RunContext:
        def trials(items: list[dict[str, Any]]) -> None:
            with self._lock:
                del rec.job.trials[:]
                for item in items:
                    trial = rec.job.trials.add()
                    json_format.ParseDict(item, trial)
                    _stamp(rec, trial)

        return TuningContext(job_id=job_id, cancelled=rec.cancel, stopping=self._closing, api_url=self.api_url,
                             _sink=lambda m, t, s: self._log(rec, m, t, s), _trials=trials,
                             _trial_sink=lambda m, t, s, trial: self._log(rec, m, t, s, {TRIAL_LABEL: trial}))


_TRIAL_ENDED = {4, 5}  # Trial.State SUCCEEDED (4) and INFEASIBLE (5)
#: A trial's CustomJob state by Trial.State: SUCCEEDED (4) succeeded, INFEASIBLE (5) failed, others running.
_TRIAL_JOB_STATE = {4: "JOB_STATE_SUCCEEDED", 5: "JOB_STATE_FAILED"}
TRIAL_INFEASIBLE = 5


def _stamp(rec: _Record, trial: Any) -> None:
    """What Vertex fills in on a trial: start and end times and its CustomJob's name ("The CustomJob name
    linked to the Trial": https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.studies.trials)."""
    from vtrain.emulator.store import _now

    times = rec.trial_times.setdefault(trial.id, [_now(), None])
    if trial.state in _TRIAL_ENDED and times[1] is None:
        times[1] = _now()
    trial.start_time.CopyFrom(times[0])
    if times[1] is not None:
        trial.end_time.CopyFrom(times[1])
    if not trial.custom_job:
        parent = rec.job.name.split("/hyperparameterTuningJobs/", 1)[0]
        digest = int(hashlib.sha256(f"{rec.job.name}/{trial.id}".encode()).hexdigest()[:15], 16)
        trial.custom_job = f"{parent}/customJobs/{10**18 + digest % (9 * 10**18)}"


def parse_tuning_job(raw: bytes) -> Any:
    """Strict JSON → HyperparameterTuningJob proto (the same rules as a CustomJob's)."""
    return validation.parse_strict(raw, TuningPb(), "hyperparameter_tuning_job", _OUTPUT_ONLY)


def check_tuning_job(job: Any) -> None:
    """Vertex's create-time rules for the study; the trial spec gets the CustomJob checks."""
    problems = [p for p in validation.negative_values(job) if not p[0].startswith("trial_job_spec")]
    study = job.study_spec
    if not study.metrics:
        problems.append(("study_spec.metrics", "At least one metric is required."))
    if not study.parameters:
        problems.append(("study_spec.parameters", "At least one parameter is required."))
    for i, p in enumerate(study.parameters):
        kind = p.WhichOneof("parameter_value_spec")
        if not p.parameter_id:
            problems.append((f"study_spec.parameters[{i}].parameter_id", "parameter_id is required."))
        if kind is None:
            problems.append((f"study_spec.parameters[{i}]", "One of the value specs is required."))
        elif kind in ("double_value_spec", "integer_value_spec"):
            spec = getattr(p, kind)
            if spec.min_value > spec.max_value:
                problems.append((f"study_spec.parameters[{i}].{kind}", "min_value must not exceed max_value."))
        if study.algorithm == 2 and kind == "double_value_spec":  # GRID_SEARCH
            problems.append((f"study_spec.parameters[{i}]", "Grid search does not support DOUBLE parameters."))
    if job.max_trial_count <= 0:
        problems.append(("max_trial_count", "max_trial_count must be positive."))
    if job.parallel_trial_count <= 0:
        problems.append(("parallel_trial_count", "parallel_trial_count must be positive."))
    elif job.parallel_trial_count > job.max_trial_count > 0:
        problems.append(("parallel_trial_count", "parallel_trial_count must not exceed max_trial_count."))
    if problems:
        field, message = problems[0]
        raise invalid_argument(f"{field}: {message}", problems)
    custom = CustomJob.pb()(display_name=job.display_name)
    custom.job_spec.CopyFrom(job.trial_job_spec)
    custom.labels.update(job.labels)
    try:
        validation.check_custom_job(custom)
    except validation.ApiError as err:  # the same rules, named as this resource names them
        raise invalid_argument(str(err.message).replace("job_spec", "trial_job_spec")) from err


def route_tuning(handler: Any, path: str, query: dict[str, str], body: bytes, int_enums: bool) -> Any:
    """Answer a hyperparameterTuningJobs request; None when the path is not one."""
    server = handler.server
    store: TuningStore = server.tuning_store
    m = _COLLECTION.match(path)
    if m:
        project, location = m.groups()
        parent = f"projects/{project}/locations/{location}"
        verb = {"POST": "create", "GET": "list"}.get(handler.command)
        if verb is None:
            raise not_found(f"Method {handler.command} not found for {path}.")
        _authorize(server, project, parent, verb)
        validation.check_parent(project, location)
        if verb == "create":
            job = parse_tuning_job(body)
            check_tuning_job(job)
            return handler._json(store.create(project, location, job), int_enums)
        return handler._list(parent, query, int_enums, store)
    m = _JOB.match(path)
    if not m:
        return None
    project, location, job_id, cancel = m.groups()
    name = f"projects/{project}/locations/{location}/hyperparameterTuningJobs/{job_id}"
    verb = {("GET", None): "get", ("DELETE", None): "delete", ("POST", ":cancel"): "cancel"}.get(
        (handler.command, cancel))
    if verb is None:
        raise not_found(f"Method {handler.command} not found for {path}.")
    _authorize(server, project, name, verb)
    validation.check_job_name(project, location, job_id)
    if verb == "get":
        return handler._json(store.get(name), int_enums)
    if verb == "cancel":
        from vtrain.emulator.wire import empty_body

        empty_body(body, "CancelHyperparameterTuningJobRequest")
        store.cancel(name)
        return {}
    store.delete(name)
    from vtrain.emulator.projects import canonical

    return {"name": f"{canonical(name)}/operations/{job_id}1", "done": True,
            "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}


def _authorize(server: Any, project: str, resource: str, verb: str) -> None:
    from vtrain.emulator.projects import authorize

    authorize(server, project, resource, f"aiplatform.hyperparameterTuningJobs.{verb}")


def pretend_tuning_runner(seconds: float = 2.0) -> Callable[[Any, RunContext], RunResult]:
    """The default without --run-jobs: the study's trials are suggested (grid or seeded random
    search) and each 'succeeds' without a measurement; nothing runs."""

    def run(job: Any, ctx: RunContext) -> RunResult:
        from vtrain.local.studies import tuning_from_body
        from vtrain.tuning.search import make_searcher

        body = json_format.MessageToDict(HyperparameterTuningJob.pb(job))
        tuning = tuning_from_body(body)
        searcher = make_searcher(tuning, 0)
        trials: list[dict[str, Any]] = []
        ctx.log(f"emulated tuning job {job.display_name} started (nothing runs without --run-jobs)")
        for n in range(1, tuning.max_trials + 1):
            params = searcher.suggest()
            if params is None:
                break
            if ctx.sleep(seconds / tuning.max_trials):
                return RunResult(CANCELLED)
            trials.append({"id": str(n), "state": "SUCCEEDED",
                           "parameters": [{"parameterId": k, "value": v} for k, v in params.items()]})
            if isinstance(ctx, TuningContext):
                ctx.set_trials(trials)
        return RunResult(SUCCEEDED)

    return run


__all__ = ["LOCAL_TUNING_RUNNER", "TuningContext", "TuningStore", "check_tuning_job", "parse_tuning_job",
           "pretend_tuning_runner", "route_tuning"]
