"""Jobs held by the emulator and the thread that moves each one through its states.

QUEUED (``queued_seconds``, skipped when 0) → PENDING (``pending_seconds``) → RUNNING (while the
runner runs) → the runner's final state. A cancel moves a live job to CANCELLING at once and
to CANCELLED ``cancel_seconds`` later, with ``error {code: 1, message: "CANCELED"}`` as Vertex reports it. All state is
guarded by one lock; protos handed out are copies, so callers never see a half-update.
"""

from __future__ import annotations

import builtins
import hashlib
import itertools
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from google.cloud.aiplatform_v1.types import CustomJob
from google.cloud.aiplatform_v1.types import JobState as _JobState
from google.protobuf.timestamp_pb2 import Timestamp

from vtrain.emulator.errors import failed_precondition, not_found
from vtrain.emulator.projects import canonical, project_number
from vtrain.emulator.runner import CANCELLED, FAILED, FINAL_STATES, JobRunner, RunContext, RunResult

#: A proto-plus enum is an IntEnum at run time, but proto-plus ships no types, so a checker sees its members
#: as plain ints (no `.value`, no `JobState[name]`): used untyped here.
JobState: Any = _JobState
TERMINAL = {JobState[s].value for s in FINAL_STATES} | {JobState.JOB_STATE_EXPIRED.value}
#: The task name of Vertex's own lines (provisioning, restarts, the job's end), as its log entries carry
#: it; a runner logs them with task "" (issue 21: Vertex says "service", gcloud printed unknown_task).
SERVICE_TASK = "service"
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def _now() -> Timestamp:
    ts = Timestamp()
    ts.GetCurrentTime()
    return ts


def _rfc3339(when: datetime | None = None) -> str:
    return (when or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class _Record:
    job: Any  # google.cloud.aiplatform.v1.CustomJob (raw protobuf)
    seq: int
    project: str
    cancel: threading.Event = field(default_factory=threading.Event)
    entries: list[dict[str, Any]] = field(default_factory=list)
    thread: threading.Thread | None = None
    trial_times: dict[str, list[Any]] = field(default_factory=dict)  # a tuning job's trials: [start, end]
    output_dir: Path | None = None  # where the runner wrote the outputs of a gs:// baseOutputDirectory


class JobStore:
    #: The REST collection this store serves and the resource's name in messages (TuningStore: its own).
    collection = "customJobs"
    kind = "CustomJob"
    descriptor = CustomJob.pb().DESCRIPTOR

    def __init__(self, runner: JobRunner, pending_seconds: float, cancel_seconds: float,
                 queued_seconds: float = 0.0) -> None:
        self.runner = runner
        self.queued_seconds = queued_seconds
        self.pending_seconds = pending_seconds
        self.cancel_seconds = cancel_seconds
        self._lock = threading.Lock()
        self._jobs: dict[str, _Record] = {}
        self._seq = itertools.count(1)
        self._closing = threading.Event()
        self.api_url = ""  # the server's endpoint, set by Emulator.start (RunContext.api_url)

    # ---- API operations -------------------------------------------------------------
    def create(self, project: str, location: str, job: Any) -> Any:
        with self._lock:
            job_id = self._new_id()
            job.name = f"projects/{project_number(project)}/locations/{location}/{self.collection}/{job_id}"
            # A new job is QUEUED first ("When you create a CustomJob or HyperparameterTuningJob, the job
            # might remain in JOB_STATE_QUEUED for some time before Vertex AI runs it":
            # https://cloud.google.com/vertex-ai/docs/training/understanding-training-service).
            queued = self.queued_seconds > 0
            job.state = (JobState.JOB_STATE_QUEUED if queued else JobState.JOB_STATE_PENDING).value
            now = _now()
            job.create_time.CopyFrom(now)
            job.update_time.CopyFrom(now)
            rec = _Record(job=job, seq=next(self._seq), project=project)
            self._jobs[job.name] = rec
            rec.thread = threading.Thread(target=self._drive, args=(rec,), name=f"job-{job_id}", daemon=True)
            rec.thread.start()
            return self._copy(job)

    def get(self, name: str) -> Any:
        with self._lock:
            return self._copy(self._record(name).job)

    def list(self, parent: str, match: Any, page_size: int, page_token: str) -> tuple[list[Any], str]:
        """Newest first; the token is the last sequence number served, so pages stay stable
        while new jobs are created between calls."""
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        parent = canonical(parent)
        after = int(page_token) if page_token.isdigit() else None
        with self._lock:
            records = sorted(
                (r for n, r in self._jobs.items() if n.startswith(f"{parent}/{self.collection}/")),
                key=lambda r: r.seq,
                reverse=True,
            )
            chosen = [r for r in records if (after is None or r.seq < after) and match(r.job)]
            page = chosen[:size]
            token = str(page[-1].seq) if len(chosen) > size else ""
            return [self._copy(r.job) for r in page], token

    def cancel(self, name: str) -> None:
        with self._lock:
            rec = self._record(name)
            if rec.job.state in TERMINAL:
                state = JobState(rec.job.state).name
                raise failed_precondition(f"Cannot cancel {self.kind} {name} in state {state}.")
            if not rec.cancel.is_set():
                rec.job.state = JobState.JOB_STATE_CANCELLING.value
                rec.job.update_time.CopyFrom(_now())
                rec.cancel.set()

    def delete(self, name: str) -> None:
        with self._lock:
            rec = self._record(name)
            if rec.job.state not in TERMINAL:
                state = JobState(rec.job.state).name
                raise failed_precondition(
                    f"{self.kind} {name} is in state {state} and cannot be deleted; cancel it first."
                )
            del self._jobs[rec.job.name]

    def log_entries(
        self, job_id: str, after: datetime | None, inclusive: bool = False
    ) -> builtins.list[dict[str, Any]]:  # `list` in this class is the method
        with self._lock:
            for rec in self._jobs.values():
                if rec.job.name.rsplit("/", 1)[-1] == job_id:
                    return [
                        e
                        for e in rec.entries
                        if after is None or e["_when"] > after or (inclusive and e["_when"] == after)
                    ]
            return []

    def local_outputs(self, uri: str) -> Path | None:
        """Where `uri` (under a job's gs:// baseOutputDirectory) really is, for a job this emulator ran with its
        outputs on this machine (the newest such job whose folder holds it, else the newest such job's path);
        None for any other path."""
        wanted = uri.rstrip("/")
        with self._lock:
            records = sorted((r for r in self._jobs.values() if r.output_dir is not None), key=lambda r: -r.seq)
            bases = [(r.job.job_spec.base_output_directory.output_uri_prefix.rstrip("/"), r.output_dir)
                     for r in records]
        found = [folder.joinpath(*parts) for base, folder in bases if folder is not None and base
                 and (wanted == base or wanted.startswith(base + "/"))
                 for parts in [[p for p in wanted[len(base):].split("/") if p]] if not {".", ".."} & set(parts)]
        return next((path for path in found if path.exists()), found[0] if found else None)

    def snapshot(self) -> builtins.list[Any]:
        with self._lock:
            return [self._copy(r.job) for r in sorted(self._jobs.values(), key=lambda r: r.seq)]

    def close(self, timeout: float = 5.0) -> None:
        """Cancel every live job and wait for the driver threads, so no thread outlives us."""
        self._closing.set()
        with self._lock:
            records = list(self._jobs.values())
            for rec in records:
                rec.cancel.set()
        for rec in records:
            if rec.thread is not None:
                rec.thread.join(timeout)

    # ---- internals --------------------------------------------------------------------
    def _record(self, name: str) -> _Record:
        rec = self._jobs.get(canonical(name))
        if rec is None:
            raise not_found(f"The {self.kind} does not exist: {name}")
        return rec

    def _new_id(self) -> str:
        while True:  # real IDs are 19-digit numbers; random so IDs never repeat across runs
            job_id = str(10**18 + secrets.randbelow(9 * 10**18))
            if not any(n.endswith("/" + job_id) for n in self._jobs):
                return job_id

    @staticmethod
    def _copy(job: Any) -> Any:
        out = type(job)()
        out.CopyFrom(job)
        return out

    def _log(self, rec: _Record, message: str, task: str, severity: str,
             labels: dict[str, str] | None = None) -> None:
        when = datetime.now(timezone.utc)
        task = task or SERVICE_TASK
        job_id = rec.job.name.rsplit("/", 1)[-1]
        with self._lock:
            rec.entries.append(
                {
                    **({"labels": labels} if labels else {}),
                    "_when": when,
                    "insertId": f"{job_id}-{len(rec.entries)}",
                    "logName": f"projects/{rec.project}/logs/{task}",
                    "resource": {
                        "type": "ml_job",
                        "labels": {"job_id": job_id, "project_id": rec.project, "task_name": task},
                    },
                    "timestamp": _rfc3339(when),
                    "severity": severity,
                    "jsonPayload": {"message": message},
                }
            )

    def _set_state(self, rec: _Record, state: str, error: str | None = None, code: int = 0) -> None:
        rec.job.state = JobState[state].value
        now = _now()
        rec.job.update_time.CopyFrom(now)
        if state == "JOB_STATE_RUNNING":
            rec.job.start_time.CopyFrom(now)
            _web_access(rec.job)
        elif rec.job.state in TERMINAL:
            rec.job.end_time.CopyFrom(now)
            if error is not None:
                rec.job.error.code = code
                rec.job.error.message = error

    def _wrap(self, pb: Any) -> Any:
        return CustomJob.wrap(pb)


    def _context(self, rec: _Record, job_id: str) -> RunContext:
        """What the runner gets (a TuningStore's runner also publishes trials through it)."""
        def outputs(folder: str) -> None:
            with self._lock:
                rec.output_dir = Path(folder)

        return RunContext(job_id=job_id, cancelled=rec.cancel, stopping=self._closing, api_url=self.api_url,
                          _sink=lambda m, t, s: self._log(rec, m, t, s), _outputs=outputs)

    def _finish_cancelled(self, rec: _Record) -> None:
        if not self._closing.is_set():
            self._closing.wait(self.cancel_seconds)
        with self._lock:
            self._set_state(rec, CANCELLED, "CANCELED", code=1)

    def _drive(self, rec: _Record) -> None:
        if self.queued_seconds > 0:
            if rec.cancel.wait(self.queued_seconds):
                self._finish_cancelled(rec)
                return
            with self._lock:
                self._set_state(rec, "JOB_STATE_PENDING")
        if rec.cancel.wait(self.pending_seconds):
            self._finish_cancelled(rec)
            return
        with self._lock:
            self._set_state(rec, "JOB_STATE_RUNNING")
            job = self._wrap(self._copy(rec.job))
        ctx = self._context(rec, job.name.rsplit("/", 1)[-1])
        try:
            result = self.runner(job, ctx)
        except Exception as err:  # a runner bug fails the job, never the emulator
            result = RunResult(FAILED, f"job runner raised {type(err).__name__}: {err}")
        if not isinstance(result, RunResult) or result.state not in FINAL_STATES:
            result = RunResult(FAILED, f"job runner returned {result!r}, not a RunResult with a final state")
        with self._lock:
            if not rec.cancel.is_set():
                if result.state == CANCELLED:
                    self._set_state(rec, CANCELLED, "CANCELED", code=1)
                elif result.state == FAILED:
                    self._set_state(rec, FAILED, result.error or "The job failed.", code=result.code or 13)
                else:
                    self._set_state(rec, result.state)
                return
        self._finish_cancelled(rec)


def _web_access(job: Any) -> None:
    """webAccessUris, as Vertex sets them once the replicas run: with enable_web_access one interactive
    shell per replica (workerpoolN-I), with only enable_dashboard_access the chief's dashboard."""
    spec = getattr(job, "job_spec", None)
    if spec is None or not (spec.enable_web_access or spec.enable_dashboard_access):
        return
    region = job.name.split("/")[3]
    nodes = [(i, r) for i, pool in enumerate(spec.worker_pool_specs) for r in range(pool.replica_count)]
    if not spec.enable_web_access:
        nodes = nodes[:1]
    for pool, replica in nodes:
        token = hashlib.sha256(f"{job.name}/{pool}/{replica}".encode()).hexdigest()[:16]
        job.web_access_uris[f"workerpool{pool}-{replica}"] = (
            f"https://{token}-dot-{region}.aiplatform-training.googleusercontent.com/"
        )
