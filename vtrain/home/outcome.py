"""How a job ended, on Vertex and here, and whether the two agree: pure, no I/O.

:func:`cloud_outcome` reads what Vertex said about a job: its REST body (state, ``error``, a google.rpc.Status)
and its Cloud Logging entries (each replica's lines, with their task name and severity). :func:`local_outcome`
reads a local run's result (``result.json``: the restart policy's events and each replica's steps) and its
replicas' last lines. Both give an :class:`Outcome`: the state, the replica that failed first, its exit status,
its exception, its last reported step and its last error lines, and whether the failure came from outside the
trainer (a preemption, a kill, a stock-out, an internal error). :func:`compare` puts them side by side: a
:class:`Verdict`, whose `line` is the one line `vtrain replay` ends with.

Where each fact comes from:

- the replica that ended the job and its exit status: Vertex's ``error.message`` (``The replica workerpool1-0
  exited with a non-zero status of 137. Termination reason: Error.``, as quoted in
  GoogleCloudPlatform/vertex-ai-samples#1504), or the emulator's, which words a local run's error (``chief-0 exited
  1 after 5 restarts``); the first failure: the first such line among Vertex's own log lines (the emulator logs
  each restart: ``[vertex] worker-1 exited 3; restarting 1/5``), else the error's;
- steps: the runtime's step lines (:mod:`vtrain.runtime.steplog`) a replica logs on Vertex; a trainer that logs none
  has its last ``step N`` line counted instead (a guess, and said to be one);
- the exception: the replica's last line that reads as one (``RuntimeError: ...``), from its ERROR lines (stderr)
  or the tail Vertex quotes in the error;
- an outside cause: :func:`vtrain.cloud.failures.classify_failure` (a stock-out, a preemption, an internal error),
  or a replica that ended by SIGKILL (137) with no exception of its own.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from vtrain.foreign import printable

SUCCEEDED = "JOB_STATE_SUCCEEDED"
FAILED = "JOB_STATE_FAILED"
TAIL = 5  # error lines kept per replica
_VERTEX_REPLICA = re.compile(r"The replica (workerpool[0-3]-\d+) exited with a non-zero status of (-?\d+)")
_LOCAL_REPLICA = re.compile(r"^(?:\[\w+\] )?((?:chief|worker|ps|evaluator)-\d+) (?:exited (?:with code )?(-?\d+)|was "
                            r"killed by (SIG[A-Z0-9]+))")
_STEP_WORD = re.compile(r"\bstep[ :=#]+(\d{1,15})\b", re.IGNORECASE)
_SIGNALS = {"SIGKILL": 9, "SIGTERM": 15, "SIGINT": 2, "SIGABRT": 6, "SIGSEGV": 11}

#: Outside causes, and the fault that plays each here.
PREEMPTED = "preempted"
KILLED = "killed"
STOCKOUT = "stock-out"
INTERNAL = "internal error"


@dataclass(frozen=True)
class Outcome:
    """One side's ending: `state` a JobState name; the rest about the replica that failed first (None: none did)."""

    state: str
    replica: str | None = None  # chief-0, worker-1, ...
    exit_status: int | None = None  # as a shell reads it: 137 for SIGKILL
    exception: str | None = None  # "RuntimeError: ..."
    step: int | None = None  # its last reported step
    step_guessed: bool = False  # read from "step N" lines, not the runtime's step reports
    lines: tuple[str, ...] = ()  # its last error lines
    cause: str | None = None  # an outside cause: PREEMPTED, KILLED, STOCKOUT, INTERNAL
    reason: str | None = None  # the error (Vertex's message, first line) or why it is outside

    @property
    def failed(self) -> bool:
        return self.state == FAILED

    def said(self) -> str:
        """The failure in words: `chief-0 raised RuntimeError: boom at step 7 (exit 1)`."""
        if self.replica is None:
            return self.reason or self.state.removeprefix("JOB_STATE_")
        what = f"raised {self.exception}" if self.exception else f"exited {self.exit_status}" \
            if self.exit_status is not None else "was stopped"  # fmt: skip
        step = f" at step {self.step}" if self.step is not None else ""
        code = f" (exit {self.exit_status})" if self.exception and self.exit_status is not None else ""
        return f"{self.replica} {what}{step}{code}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lines": list(self.lines)}


@dataclass(frozen=True)
class Verdict:
    """Vertex's ending against the local one: `reproduced`, the `line` that says so, what differs and what that
    suggests; the faults the replay injected and what it resumed from."""

    reproduced: bool
    line: str
    cloud: Outcome
    local: Outcome
    differences: tuple[str, ...] = ()
    suggestion: str = ""
    faults: tuple[str, ...] = ()
    resumed_from: str | None = None
    run_dir: str | None = None
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {"reproduced": self.reproduced, "line": self.line, "cloud": self.cloud.to_dict(),
                "local": self.local.to_dict(), "differences": list(self.differences), "suggestion": self.suggestion,
                "faults": list(self.faults), "resumed_from": self.resumed_from, "run_dir": self.run_dir,
                "notes": list(self.notes)}  # fmt: skip


# ---- reading lines --------------------------------------------------------------------------------
def label_of(task: str) -> str:
    """workerpool1-0 → worker-0 (vtrain local's label); anything else as it is."""
    from vtrain.cloud.vertex.logs import replica_label

    return replica_label(task)


def status_of(code: str | None, signal_name: str | None) -> int | None:
    if code is not None:
        value = int(code)
        return 128 - value if value < 0 else value  # -9 as subprocess gives it: 137 as a shell reads it
    if signal_name is not None:
        return 128 + _SIGNALS.get(signal_name, 9)
    return None


def replica_failure(text: str) -> tuple[str, int | None] | None:
    """(replica label, exit status) a failure line names, Vertex's wording or vtrain local's; None otherwise."""
    vertex = _VERTEX_REPLICA.search(text)
    if vertex is not None:
        return label_of(vertex[1]), status_of(vertex[2], None)
    local = _LOCAL_REPLICA.match(text.strip())
    if local is not None:
        return local[1], status_of(local[2], local[3])
    return None


def last_step(lines: Iterable[str]) -> tuple[int | None, bool]:
    """(the last step reported in `lines`, guessed): the runtime's step lines first, else the last `step N` words."""
    from vtrain.runtime.steplog import BadStepLine, parse

    reported = worded = None
    for line in lines:
        try:
            record = parse(line)
        except BadStepLine:
            record = None
        if record is not None:
            reported = int(record["step"])
            continue
        found = _STEP_WORD.findall(line)
        if found:
            worded = int(found[-1])
    if reported is not None:
        return reported, False
    return worded, worded is not None


@dataclass
class _Replica:
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=400))
    errors: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL * 8))


def cloud_outcome(body: Mapping[str, Any], entries: Iterable[Mapping[str, Any]]) -> Outcome:
    """Vertex's side, from the job's REST body and its log entries (each read once; a replica keeps its last 400
    lines and last error lines, so a long log costs no more)."""
    from vtrain.cloud.failures import classify_failure
    from vtrain.cloud.vertex.logs import entry_parts
    from vtrain.local.policy import last_exception

    state = str(body.get("state") or "JOB_STATE_UNSPECIFIED")
    error = body.get("error") or {}
    message = str(error.get("message") or "") if isinstance(error, Mapping) else ""
    code = error.get("code") if isinstance(error, Mapping) else None
    replicas: dict[str, _Replica] = {}
    first: tuple[str, int | None] | None = None
    for entry in entries:
        _, task, text = entry_parts(dict(entry))
        label = label_of(task)
        if label in ("vertex", "service"):
            failure = replica_failure(text)
            if failure is not None and first is None:
                first = failure
            continue
        rec = replicas.setdefault(label, _Replica())
        for line in text.splitlines() or [""]:
            rec.lines.append(line)
            if str(entry.get("severity", "")).upper() in ("ERROR", "CRITICAL", "ALERT", "EMERGENCY") and line.strip():
                rec.errors.append(line)
    headline = message.splitlines()[0] if message else None
    ended = replica_failure(message) if message else None
    if state != FAILED:
        return Outcome(state, reason=printable(headline) if headline else None)
    verdict = classify_failure(int(code) if isinstance(code, (int, float)) else None, message)
    replica, status = first or ended or (None, None)
    if replica is None:  # no replica failed: the cloud ended it (a stock-out, a preemption, a quota, ...)
        cause = _outside(verdict.reason) if verdict.retryable else None
        # The job's VMs went while it ran: the chief (whose outcome is the job's) stands for them, at its last step.
        ran = "chief-0" if "chief-0" in replicas else next(iter(replicas), None)
        if cause is None or ran is None:
            return Outcome(state, cause=cause, reason=printable(headline or verdict.reason))
        step, guessed = last_step(replicas[ran].lines)
        return Outcome(state, ran, None, None, step, guessed, (), cause, printable(headline or verdict.reason))
    rec = replicas.get(replica, _Replica())
    tail = [line.strip().removeprefix("|").strip() for line in message.splitlines()[1:]]
    exception = last_exception(list(rec.errors)) or last_exception(list(rec.lines)) or last_exception(tail)
    step, guessed = last_step(rec.lines)
    lines = [printable(x) for x in (list(rec.errors) or tail)][-TAIL:]
    cause = _outside(verdict.reason) if verdict.retryable else (KILLED if status == 137 and not exception else None)
    return Outcome(state, replica, status, exception, step, guessed, tuple(lines), cause, printable(headline or ""))


def _outside(reason: str) -> str:
    text = reason.lower()
    if "preempt" in text:
        return PREEMPTED
    if "stock-out" in text:
        return STOCKOUT
    return INTERNAL


def local_outcome(summary: Mapping[str, Any], tails: Mapping[str, Sequence[str]]) -> Outcome:
    """The local run's side, from its result (``result.json``) and each replica's last log lines."""
    from vtrain.local.policy import last_exception

    state = str(summary.get("state") or FAILED)
    events = (summary.get("restarts") or {}).get("events") or []
    failures = [e for e in events if e.get("exit_code") not in (0, None) and e.get("action") != "evaluator_down"]
    error = str(summary.get("error") or "")
    replica: str | None = None
    status: int | None = None
    if failures:
        replica, status = str(failures[0]["replica"]), _status(failures[0]["exit_code"])
    else:
        found = replica_failure(error.splitlines()[0]) if error else None
        if found is not None:
            replica, status = found
    if replica is None:
        headline = error.splitlines()[0] if error else None
        return Outcome(state, reason=printable(headline) if headline else None)
    lines = list(tails.get(replica, ()))
    exception = last_exception(lines)
    points = (summary.get("steps") or {}).get(replica) or []
    step, guessed = (int(points[-1][1]), False) if points else last_step(lines)
    errors = [printable(x) for x in lines if x.strip()][-TAIL:]
    headline = printable(error.splitlines()[0]) if error else None
    cause = KILLED if status == 137 and not exception else None
    return Outcome(state, replica, status, exception, step, guessed, tuple(errors), cause, headline)


def _status(code: Any) -> int | None:
    return status_of(str(int(code)), None) if isinstance(code, (int, float)) else None


# ---- the fault that plays an outside cause --------------------------------------------------------
def fault_for(cloud: Outcome, labels: Sequence[str]) -> tuple[str | None, str | None]:
    """(the fault spec that plays `cloud`'s outside cause here, a note), or (None, why not): a preemption is
    ``preempt``, a kill, a stock-out or an internal error ``kill``, at the step the replica reached on Vertex."""
    if cloud.cause is None or cloud.replica is None:
        return None, None if cloud.cause is None else f"{cloud.cause}: no replica had started; nothing to inject"
    if cloud.step is None:
        return None, f"{cloud.cause} of {cloud.replica}: it reported no step on Vertex, so no step to inject it at"
    target, note = cloud.replica, None
    if target not in labels:  # --max-replicas shrank the pool: the last replica of the same role stands in
        role = target.rsplit("-", 1)[0]
        same = [label for label in labels if label.rsplit("-", 1)[0] == role]
        if not same:
            return None, f"{target} is not in this run (it has {', '.join(labels)})"
        target, note = same[-1], f"{cloud.replica} is not in this run (--max-replicas): {same[-1]} stands in"
    kind = "preempt" if cloud.cause == PREEMPTED else "kill"
    return f"{target}:{kind}@step:{max(1, cloud.step)}", note


# ---- the verdict -------------------------------------------------------------------------------
def _role(label: str | None) -> str | None:
    return None if label is None else label.rsplit("-", 1)[0]


def compare(cloud: Outcome, local: Outcome, *, faults: Sequence[str] = (), resumed_from: str | None = None,
            run_dir: str | None = None, notes: Sequence[str] = ()) -> Verdict:
    """Whether the local run ended as the job did on Vertex, and the one line that says so."""
    differences: list[str] = []
    suggestion = ""
    injected = f" with the same fault ({', '.join(faults)})" if faults else ""
    if not cloud.failed:
        if cloud.state == SUCCEEDED:
            where = "on Vertex the job succeeded"
        elif cloud.state in ("JOB_STATE_RUNNING", "JOB_STATE_PENDING", "JOB_STATE_QUEUED"):
            where = f"on Vertex the job is {cloud.state.removeprefix('JOB_STATE_').lower()}, with no failure so far"
        else:
            where = f"on Vertex the job ended {cloud.state.removeprefix('JOB_STATE_')} with no failure"
        if local.state == SUCCEEDED:
            line = f"replay: reproduced: {where}; here it succeeded"
            return Verdict(True, line, cloud, local, (), "", tuple(faults), resumed_from, run_dir, tuple(notes))
        differences.append(f"here {local.said()}")
        suggestion = ("what differs is this machine: the local runtime (TensorFlow, Python), data paths only the cloud "
                      "reaches, or memory")
        line = f"replay: not reproduced: {where}; here {local.said()}: {suggestion}"
        return Verdict(False, line, cloud, local, tuple(differences), suggestion, tuple(faults), resumed_from,
                       run_dir, tuple(notes))
    if cloud.cause is not None:  # from outside the trainer: did the trainer survive the same fault here?
        vertex = f"on Vertex {cloud.said()} ({cloud.cause}{': ' + cloud.reason if cloud.reason else ''})"
        if local.failed:
            line = f"replay: reproduced: {vertex}; here{injected} {local.said()} too: the trainer does not survive it"
            return Verdict(True, line, cloud, local, (), "make the trainer resume from its checkpoints "
                           "(docs: Surviving failures)", tuple(faults), resumed_from, run_dir, tuple(notes))
        suggestion = {PREEMPTED: "a cloud-side cause: Spot capacity (resubmit with --recover, or scheduling.strategy "
                                 "STANDARD)",
                      STOCKOUT: "a cloud-side cause: no capacity for the machine in the region (--recover, another "
                                "region or machine: scheduling.fallback)",
                      INTERNAL: "a cloud-side cause: an internal error of Vertex AI (--recover)",
                      KILLED: "a cloud-side cause: memory (an OOM kill ends a replica with SIGKILL) or hardware; try "
                              "a machine with more memory"}[cloud.cause]
        line = f"replay: not reproduced: {vertex}; here{injected} the job {local.state.removeprefix('JOB_STATE_')}: " \
               f"{suggestion}"  # fmt: skip
        differences.append(f"here the job {local.state}")
        return Verdict(False, line, cloud, local, tuple(differences), suggestion, tuple(faults), resumed_from,
                       run_dir, tuple(notes))
    vertex = f"on Vertex {cloud.said()}"
    if not local.failed:
        suggestion = ("a cloud-side cause: memory (a larger batch or model than here), hardware (GPUs, drivers), the "
                      "image's TensorFlow, or data only the cloud reads")
        line = f"replay: not reproduced: {vertex}; here the job {local.state.removeprefix('JOB_STATE_')}: {suggestion}"
        return Verdict(False, line, cloud, local, (f"here the job {local.state}",), suggestion, tuple(faults),
                       resumed_from, run_dir, tuple(notes))
    if _role(local.replica) != _role(cloud.replica):
        differences.append(f"the replica: {cloud.replica} on Vertex, {local.replica} here")
    if cloud.exception and local.exception:
        if cloud.exception.split(":", 1)[0] != local.exception.split(":", 1)[0]:
            differences.append(f"the exception: {cloud.exception} on Vertex, {local.exception} here")
    elif cloud.exit_status != local.exit_status:
        differences.append(f"the exit: {cloud.exit_status} on Vertex, {local.exit_status} here")
    if cloud.step is not None and local.step is not None and cloud.step != local.step:
        differences.append(f"the step: {cloud.step} on Vertex, {local.step} here")
    if not differences:
        line = f"replay: reproduced: {local.said()}, as on Vertex"
        return Verdict(True, line, cloud, local, (), "", tuple(faults), resumed_from, run_dir, tuple(notes))
    suggestion = ("the failure depends on where it runs: data, the runtime's versions, the cluster's size (see "
                  "--max-replicas) or timing")
    line = f"replay: not reproduced: {vertex}; here {local.said()} (differs in {'; '.join(differences)}): {suggestion}"
    return Verdict(False, line, cloud, local, tuple(differences), suggestion, tuple(faults), resumed_from, run_dir,
                   tuple(notes))


__all__ = ["FAILED", "KILLED", "PREEMPTED", "STOCKOUT", "SUCCEEDED", "Outcome", "Verdict", "cloud_outcome", "compare",
           "fault_for", "last_step", "local_outcome", "replica_failure"]
