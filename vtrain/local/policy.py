"""Vertex AI's restart policy as a pure state machine: replica exits in, decisions out.

Source: "Understand the custom training service",
https://cloud.google.com/vertex-ai/docs/training/understanding-training-service (and the
`Scheduling` reference for `restartJobOnWorkerRestart` / `disableRetries`). What it says, and so
what a local run does under ``--restart-policy vertex`` (the default):

* a replica that exits non-zero is restarted in place (same hostname: here the same TF_CONFIG,
  CLUSTER_SPEC and port), up to :data:`MAX_RESTARTS` times per replica;
* a replica that fails again after that makes Vertex retry the whole job, up to
  :data:`MAX_JOB_RETRIES` times, then the job is FAILED; ``disableRetries`` turns the whole-job
  retries off (and, per the reference, overrides ``restartJobOnWorkerRestart`` to false);
* with ``restartJobOnWorkerRestart`` every replica restarts when one does;
* a failure from the page's list of common errors is permanent: the job ends at once, no restart.
  A local run recognises them from the replica's last lines (:func:`classify_exit`): the entry
  module cannot be found or imported, a SyntaxError, an ImportError, the trainer's argument
  parser refusing its arguments, or vtrain's own RuntimeMismatch; none of these can heal on a restart;
* a replica whose container never started (its runtime said why: no such executable in the image, an
  environment entry without ``=``, a user the kernel refuses; ``Exit.start_error``) is permanent too, as Vertex
  treats a replica it cannot start: the same image fails the same way on every start. The job ends at once
  with the runtime's message, once, escaped and bounded, under any policy;
* the chief's outcome is the job's outcome: once it exits 0, later exits of others change nothing.

``never`` is the debugging policy: the first failed chief/worker/ps fails the job (fail-fast).
The evaluator is restarted like any replica, but, as before, it never fails the job by itself.

Nothing here starts or signals a process: the supervisor (:mod:`vtrain.local.job`)
feeds :class:`Exit` events to :meth:`RestartPolicy.on_exit`, carries out the :class:`Decision`,
prints ``decision.line`` as a ``[vtrain]`` notice, and puts :meth:`RestartPolicy.summary` in the
job's result (``-o json``).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vtrain.constants import JOB_ATTEMPT_ENV, RESTART_COUNT_ENV
from vtrain.foreign import printable

MAX_RESTARTS = 5
MAX_JOB_RETRIES = 3
POLICIES = ("vertex", "never")

# What a decision asks of the supervisor.
IGNORE = "ignore"  # nothing to do (a worker finished, or the job's result is already known)
RESTART = "restart"  # restart `replicas` in place
RETRY_JOB = "retry_job"  # stop every replica, then start the whole job again (fresh restart counts)
FAIL = "fail"  # stop every replica; the job is FAILED with `error`
CHIEF_SUCCEEDED = "chief_succeeded"  # the job succeeds: stop the servers, give workers their grace


@dataclass(frozen=True)
class PolicyConfig:
    """The policy and the job's `scheduling` switches that shape it."""

    policy: str = "vertex"
    max_restarts: int = MAX_RESTARTS
    max_job_retries: int = MAX_JOB_RETRIES
    restart_job_on_worker_restart: bool = False
    disable_retries: bool = False

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"restart policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")

    @classmethod
    def from_job(cls, job: Mapping[str, Any], policy: str = "vertex") -> PolicyConfig:
        """From a CustomJob REST body's ``jobSpec.scheduling`` (what `submit` sends)."""
        scheduling = (job.get("jobSpec") or {}).get("scheduling") or {}
        return cls(
            policy=policy,
            restart_job_on_worker_restart=bool(scheduling.get("restartJobOnWorkerRestart")),
            disable_retries=bool(scheduling.get("disableRetries")),
        )

    @property
    def restart_all(self) -> bool:
        return self.restart_job_on_worker_restart and not self.disable_retries


@dataclass(frozen=True)
class Exit:
    """One replica process ended. `returncode` as subprocess gives it (-9: killed by SIGKILL);
    `tail`: its last log lines (to recognise permanent errors); `stopped`: the supervisor stopped
    it on purpose (cancel, success, a restart of everyone), so it is no failure."""

    replica: str  # the label: chief-0, worker-1, ps-0, evaluator-0
    returncode: int
    at: float = 0.0  # seconds since the job started (for the summary)
    tail: tuple[str, ...] = ()
    stopped: bool = False
    start_error: str | None = None  # its container never ran the process: the runtime's (or docker's) reason

    @property
    def role(self) -> str:
        return self.replica.rsplit("-", 1)[0]


@dataclass(frozen=True)
class Cause:
    """Why a replica failed, as the policy sees it."""

    permanent: bool
    reason: str
    started: bool = True  # False: the replica's container never ran its process (Exit.start_error)


@dataclass(frozen=True)
class Decision:
    """What the supervisor must do now; `line` (if any) is printed as a `[vtrain]` notice."""

    action: str
    replicas: tuple[str, ...] = ()
    line: str | None = None
    error: str | None = None  # for FAIL: the job's error headline (the supervisor adds the log tail)
    failed: str | None = None  # the replica whose exit led here
    tail: bool = True  # False: the headline says it all (a container that never started: its log is the reason)


def exit_text(returncode: int) -> str:
    """`137 (SIGKILL)` for -9, `1` for 1: the shell's convention, with the signal's name."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"{128 - returncode} ({name})"
    if returncode > 128:
        try:
            return f"{returncode} ({signal.Signals(returncode - 128).name})"
        except ValueError:
            pass
    return str(returncode)


_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?(?P<name>[A-Za-z_]\w*(?:Error|Exception|Mismatch))(?::\s*(?P<msg>.*))?$"
)
_NO_MODULE = re.compile(r"No module named '?(?P<name>[\w.]+)'?")
_PERMANENT_EXCEPTIONS = {
    "SyntaxError": "a SyntaxError",
    "IndentationError": "a SyntaxError",
    "TabError": "a SyntaxError",
    "ModuleNotFoundError": "a module cannot be imported",
    "ImportError": "a module cannot be imported",
    "RuntimeMismatch": "the distribution strategy does not fit this replica",
}


def last_exception(lines: Sequence[str]) -> str | None:
    """The last line of `lines` that reads as a Python exception (``RuntimeError: ...``), printable; None if none."""
    for line in reversed(lines):
        found = _EXCEPTION.match(line.strip())
        if found is not None:
            return printable(f"{found['name']}: {found['msg']}" if found["msg"] else found["name"])
    return None


def classify_exit(returncode: int, tail: Sequence[str], module: str | None = None,
                  start_error: str | None = None) -> Cause:
    """Permanent (a restart cannot help) or not, from the exit code and the replica's last lines, or from why its
    container never started (`start_error`, the runtime's words: always permanent).

    Only what fails the same way on every restart is permanent; a signal, an OOM kill, a lost
    peer or any other exception is worth a restart, as on Vertex.
    """
    if start_error:
        return Cause(True, f"its container did not start: {printable(start_error, limit=400)}", started=False)
    if returncode < 0 or returncode > 128:
        return Cause(False, f"exited {exit_text(returncode)}")
    lines = [line.strip() for line in tail if line.strip()]
    for line in reversed(lines):
        if "Error while finding module specification for" in line:
            return Cause(True, f"the entry module cannot be imported: {printable(line)}")
        found = _NO_MODULE.search(line)
        if found and module and (module == found["name"] or module.startswith(found["name"] + ".")):
            return Cause(True, f"the entry module cannot be imported: No module named {found['name']!r}")
    last = next((m for m in map(_EXCEPTION.match, reversed(lines)) if m), None)
    if last is not None and last["name"] in _PERMANENT_EXCEPTIONS:
        what = _PERMANENT_EXCEPTIONS[last["name"]]
        detail = printable(f"{last['name']}: {last['msg']}" if last["msg"] else last["name"])
        return Cause(True, f"{what} ({detail})")
    if returncode == 2 and any(line.startswith("usage:") for line in lines) and any(": error: " in x for x in lines):
        bad = next(x for x in reversed(lines) if ": error: " in x)
        return Cause(True, f"the trainer refused its arguments ({printable(bad)})")
    return Cause(False, f"exited {exit_text(returncode)}")


@dataclass
class _Replica:
    label: str
    restarts: int = 0  # times restarted in place this attempt (for any reason): VTRAIN_RESTART_COUNT
    failures: int = 0  # failed exits this attempt (counted against max_restarts)
    last_step: int | None = None  # the last step it reported before its latest failure
    failed_at: float | None = None
    waiting_step: bool = False  # restarted after a failure, no step reported yet


@dataclass
class RestartPolicy:
    """The policy for one local job. Feed it every replica exit (and, optionally, the steps the
    replicas report); it answers with what to do and keeps the counts for the summary."""

    config: PolicyConfig
    labels: Sequence[str]
    module: str | None = None  # the entry module (`python -m MODULE`), to spot it failing to import
    attempt: int = 1  # whole-job attempt: 1, then 2 after the first retry (VTRAIN_JOB_ATTEMPT)
    events: list[dict[str, Any]] = field(default_factory=list)
    recoveries: list[dict[str, Any]] = field(default_factory=list)
    chief_succeeded: bool = False
    ended: str | None = None
    _replicas: dict[str, _Replica] = field(default_factory=dict)
    _total: dict[str, int] = field(default_factory=dict)  # restarts over every attempt

    def __post_init__(self) -> None:
        self._replicas = {label: _Replica(label) for label in self.labels}
        self._total = dict.fromkeys(self.labels, 0)

    # ---- what the supervisor asks -----------------------------------------------------------
    def restarts(self, label: str) -> int:
        """Times `label` was restarted in place in this attempt: its VTRAIN_RESTART_COUNT."""
        return self._replicas[label].restarts

    def env(self, label: str) -> dict[str, str]:
        """What the supervisor adds to `label`'s environment at each (re)start."""
        return {RESTART_COUNT_ENV: str(self.restarts(label)), JOB_ATTEMPT_ENV: str(self.attempt)}

    def on_exit(self, event: Exit) -> Decision:
        """Decide what a replica's exit means for the job."""
        if self.ended is not None or event.stopped:
            return Decision(IGNORE)
        if event.returncode == 0:
            if event.role == "chief":
                self.chief_succeeded = True
                self._record(event, "chief succeeded", None)
                return Decision(CHIEF_SUCCEEDED, (event.replica,))
            return Decision(IGNORE)
        code = exit_text(event.returncode)
        if self.chief_succeeded:
            line = f"{event.replica} exited {code} after the chief succeeded; the job's result follows the chief"
            return Decision(IGNORE, line=line)
        cause = classify_exit(event.returncode, event.tail, self.module, event.start_error)
        state = self._replicas[event.replica]
        state.failures += 1
        state.failed_at = event.at
        who = f"{event.replica} exited {code}"
        if not cause.started:  # the runtime's reason once, in the error; the notice only says what happens
            line = f"{event.replica}'s container did not start (a permanent error); failing the job without a restart"
            return replace(self._fail(event, cause, line, f"{who}: {cause.reason}"), tail=False)
        if self.config.policy == "never":
            return self._fail(event, cause, f"{who}; failing the job (--restart-policy never)", f"{who}")
        if cause.permanent:
            line = f"{who}: permanent error, {cause.reason}; failing the job without a restart"
            return self._fail(event, cause, line, f"{who}: permanent error, {cause.reason}")
        if state.failures <= self.config.max_restarts:
            n, limit = state.failures, self.config.max_restarts
            if self.config.restart_all:
                targets = tuple(self.labels)
                line = f"{who}; restarting every replica {n}/{limit} (restart_job_on_worker_restart)"
            else:
                targets = (event.replica,)
                line = f"{who}; restarting {n}/{limit}"
            for label in targets:
                self._replicas[label].restarts += 1
                self._total[label] += 1
            state.waiting_step = True
            self._record(event, "restart", cause, targets=list(targets), count=n, limit=limit)
            return Decision(RESTART, targets, line=line, failed=event.replica)
        return self._exhausted(event, cause, who)

    def on_step(self, label: str, step: int, at: float) -> None:
        """A step reported by `label`'s current process (VTRAIN_STATUS_FILE): measures recovery."""
        state = self._replicas[label]
        if state.waiting_step and state.failed_at is not None:
            resumed_from = step - 1  # it reports a step once done: the first one after the checkpoint
            redone = None if state.last_step is None else max(0, state.last_step - resumed_from)
            self.recoveries.append(
                {
                    "replica": label,
                    "at": round(at, 3),  # when it reported that step: the recovery's end
                    "seconds": round(at - state.failed_at, 3),
                    "resumed_at_step": step,
                    "steps_redone": redone,
                }
            )
            state.waiting_step = False
        if not state.waiting_step:
            state.last_step = step

    def summary(self) -> dict[str, Any]:
        """The restart part of the job's result (`-o json`)."""
        return {
            "policy": self.config.policy,
            "attempts": self.attempt,
            "restarts": dict(self._total),
            "events": list(self.events),
            "recoveries": list(self.recoveries),
        }

    def lines(self) -> list[str]:
        """The summary in words, for the end of a text run."""
        if not any(self._total.values()) and self.attempt == 1:
            return []
        per = ", ".join(f"{label} {n}" for label, n in self._total.items() if n)
        out = [f"restarts: {per or 'none'} (attempt {self.attempt} of the job)"]
        for rec in self.recoveries:
            redone = "" if rec["steps_redone"] is None else f", {rec['steps_redone']} step(s) redone"
            out.append(
                f"{rec['replica']} resumed at step {rec['resumed_at_step']} {rec['seconds']:.1f} s "
                f"after it failed{redone}"
            )
        return out

    # ---- internals -----------------------------------------------------------------------------
    def _exhausted(self, event: Exit, cause: Cause, who: str) -> Decision:
        limit = self.config.max_restarts
        if event.role == "evaluator":  # never the job's result, on Vertex as before
            line = f"{who} after {limit} restarts; leaving the evaluator down (the job's result follows the chief)"
            self._record(event, "evaluator_down", cause)
            return Decision(IGNORE, line=line)
        after = f"{who} after {limit} restarts"
        if self.config.disable_retries:
            return self._fail(event, cause, f"{after}; failing the job (scheduling.disable_retries)", after)
        retries = self.attempt - 1
        if retries >= self.config.max_job_retries:
            text = f"{after} and {retries} job retries"
            return self._fail(event, cause, f"{text}; failing the job", text)
        self._record(event, "retry_job", cause, count=retries + 1, limit=self.config.max_job_retries)
        line = f"{after}; retrying the whole job {retries + 1}/{self.config.max_job_retries}"
        self.attempt += 1
        before = self._replicas
        self._replicas = {label: _Replica(label, last_step=before[label].last_step) for label in self.labels}
        fresh = self._replicas[event.replica]
        fresh.failed_at, fresh.waiting_step = event.at, True
        return Decision(RETRY_JOB, tuple(self.labels), line=line, failed=event.replica)

    def _fail(self, event: Exit, cause: Cause, line: str, error: str) -> Decision:
        if event.role == "evaluator":  # an evaluator never fails the job
            self._record(event, "evaluator_down", cause)
            return Decision(IGNORE, line=f"{line.split(';')[0]}; the job's result follows the chief, not the evaluator")
        self.ended = "failed"
        self._record(event, "fail", cause)
        return Decision(FAIL, line=line, error=error, failed=event.replica)

    def _record(self, event: Exit, action: str, cause: Cause | None, **extra: Any) -> None:
        self.events.append(
            {
                "replica": event.replica,
                "exit_code": event.returncode,
                "exit": exit_text(event.returncode),
                "action": action,
                "permanent": bool(cause and cause.permanent),
                "reason": cause.reason if cause else None,
                "at": round(event.at, 3),
                "attempt": self.attempt,
                **extra,
            }
        )


def policy_for_job(job: Mapping[str, Any], labels: Iterable[str], policy: str = "vertex") -> RestartPolicy:
    """The policy for a CustomJob body and its replicas' labels; the entry module from pool 0."""
    pools = (job.get("jobSpec") or {}).get("workerPoolSpecs") or [{}]
    module = ((pools[0] or {}).get("pythonPackageSpec") or {}).get("pythonModule")
    return RestartPolicy(PolicyConfig.from_job(job, policy), tuple(labels), module=module)


__all__ = [
    "CHIEF_SUCCEEDED",
    "FAIL",
    "IGNORE",
    "MAX_JOB_RETRIES",
    "MAX_RESTARTS",
    "POLICIES",
    "RESTART",
    "RETRY_JOB",
    "Cause",
    "Decision",
    "Exit",
    "PolicyConfig",
    "RestartPolicy",
    "classify_exit",
    "exit_text",
    "last_exception",
    "policy_for_job",
]
