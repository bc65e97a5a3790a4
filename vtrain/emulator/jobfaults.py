"""Jobs the emulator ends FAILED on purpose, as Vertex AI ends them: `vtrain emulator --fail-jobs CAUSE[:N]`.

    vtrain emulator --run-jobs --fail-jobs stockout          # the first job: FAILED, a stock-out
    vtrain emulator --fail-jobs preempted:2 --fail-after 5s  # the first two: preempted after 5 s

CAUSE is one of :data:`vtrain.emulator.endings.FAILURES` (stockout, preempted, internal: retryable;
replica, quota: not), N how many jobs (default 1), counted in the order they start running.
A stock-out or quota failure happens before the job runs (Vertex never got the machines);
``preempted``, ``internal`` and ``replica`` let it run `--fail-after` seconds first (default 0):
the run is then cancelled (its replicas get SIGTERM, so a trainer saves its checkpoint) and the
job ends FAILED with Vertex's wording and code. That is how `vtrain submit --recover` is tested
against the real client: a retryable failure is resubmitted and resumes, the others are not.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from vtrain.emulator.endings import FAILURES as CAUSES
from vtrain.emulator.runner import CANCELLED, FAILED, JobRunner, RunContext, RunResult
from vtrain.errors import UsageError

#: Causes that happen before any machine runs the job.
BEFORE_RUNNING = ("stockout", "quota")


@dataclass(frozen=True)
class JobFault:
    cause: str
    count: int = 1

    def __str__(self) -> str:
        return f"{self.cause}:{self.count}"


def parse_job_fault(text: str) -> JobFault:
    """`stockout`, `preempted:2` → JobFault; UsageError (exit 2) naming the causes otherwise."""
    cause, _, count = text.strip().lower().partition(":")
    if cause not in CAUSES:
        raise UsageError(f"--fail-jobs '{text}': cause must be one of {', '.join(CAUSES)} (optionally :N jobs)")
    if count and (not count.isdigit() or int(count) < 1):
        raise UsageError(f"--fail-jobs '{text}': N must be a whole number >= 1, got '{count}'")
    return JobFault(cause, int(count) if count else 1)


@dataclass
class FailingRunner:
    """Wraps a runner: the first `fault.count` jobs end FAILED with `fault.cause`; later ones run as usual."""

    inner: JobRunner
    fault: JobFault
    fail_after: float = 0.0
    failed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, job: Any, ctx: RunContext) -> RunResult:
        with self._lock:
            chosen = self.failed < self.fault.count
            self.failed += chosen
        if not chosen:
            return self.inner(job, ctx)
        cause = CAUSES[self.fault.cause]
        region = job.name.split("/locations/", 1)[-1].split("/", 1)[0] if "/locations/" in job.name else "us-central1"
        message = cause.message.format(region=region, task="workerpool0-0")
        if self.fault.cause in BEFORE_RUNNING:
            ctx.log(f"the emulator fails this job on purpose (--fail-jobs {self.fault}): {message}", task="")
            return RunResult(FAILED, message, cause.code)
        inner_ctx = RunContext(ctx.job_id, threading.Event(), ctx.stopping, ctx._sink, ctx.api_url)
        result: list[RunResult] = []
        worker = threading.Thread(target=lambda: result.append(self.inner(job, inner_ctx)), daemon=True)
        worker.start()
        if ctx.cancelled.wait(self.fail_after):  # cancelled by the user meanwhile
            inner_ctx.cancelled.set()
            worker.join()
            return RunResult(CANCELLED)
        ctx.log(f"the emulator fails this job on purpose (--fail-jobs {self.fault}): {message}", task="")
        inner_ctx.cancelled.set()  # the replicas get SIGTERM, as a preempted VM's do
        worker.join()
        return RunResult(FAILED, message, cause.code)


def with_job_faults(runner: JobRunner, fault: JobFault | None, fail_after: float = 0.0) -> JobRunner:
    return runner if fault is None else FailingRunner(runner, fault, fail_after)


__all__ = ["BEFORE_RUNNING", "FailingRunner", "JobFault", "parse_job_fault", "with_job_faults"]
