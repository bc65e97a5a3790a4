"""Restarts and injected faults in the local supervisor: Vertex AI's restart policy carried out on processes.

The decisions are pure and live elsewhere: :mod:`vtrain.local.policy` says what a replica's
exit means (restart it in place, restart everyone, retry the whole job, fail, succeed) and
:mod:`vtrain.local.faults` which signals are due. :class:`RestartSupervisor`, which
:class:`vtrain.local.job.LocalJob` holds, does what they say:

* every (re)start of a replica runs the same argv, in the same working dir, with the same port,
  CLUSTER_SPEC and TF_CONFIG (Vertex restarts a replica on the same hostname), plus the restart
  count and job attempt the policy gives and a fresh VTRAIN_STATUS_FILE for its step reports
  (:mod:`vtrain.runtime.status`);
* each supervision tick reads those reports (the current process's only: a report carries the
  restart count it was written under) and sends the faults that are due; a fault's signal is not
  a stop by the supervisor, so the exit it causes goes to the policy like any crash;
* each exit goes to the policy, whose line is printed as a ``[vtrain]`` notice and kept in job.log.

What it needs from the job is :class:`JobSide`, four callables; the job calls its public methods
(:meth:`~RestartSupervisor.start`, :meth:`~RestartSupervisor.tick`, :meth:`~RestartSupervisor.decide`,
:meth:`~RestartSupervisor.relaunch`, :meth:`~RestartSupervisor.result`). Neither touches the other's
attributes, so the supervisor can be driven without processes (``popen`` and ``clock`` injected).
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vtrain import proctree
from vtrain.constants import FAULT_STEPS_ENV, JOB_ATTEMPT_ENV, RESTART_COUNT_ENV, STATUS_FILE_ENV
from vtrain.local.env import Replica
from vtrain.local.faults import FaultScheduler
from vtrain.local.policy import Decision, Exit, RestartPolicy, exit_text
from vtrain.runtime.status import read_status

if TYPE_CHECKING:
    from vtrain.local.containers import ContainerHandle

TAIL_LINES = 15
MAX_STEP_POINTS = 2000  # per replica in the result: a timeline is ~1000 px wide; long runs are thinned

#: What :meth:`RestartSupervisor.launch` sets in a replica at each start (docker needs the names up front).
RESTART_ENV = (RESTART_COUNT_ENV, JOB_ATTEMPT_ENV, STATUS_FILE_ENV, FAULT_STEPS_ENV)


class SharedLog:
    """A replica's log file, written by its stdout and its stderr reader alike (whole lines, under a
    lock); closed when the last of them is done."""

    def __init__(self, file: IO[bytes], writers: int) -> None:
        self._file, self._writers, self._lock = file, writers, threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self._file.write(data)
            self._file.flush()

    def done(self) -> None:
        with self._lock:
            self._writers -= 1
            if self._writers == 0:
                self._file.close()


class Readers:
    """The threads draining one process's stdout and stderr, joined as one."""

    def __init__(self, threads: list[threading.Thread]) -> None:
        self.threads = threads

    def join(self, timeout: float | None = None) -> None:
        end = None if timeout is None else time.monotonic() + timeout
        for thread in self.threads:
            thread.join(None if end is None else max(0.0, end - time.monotonic()))


@dataclass
class Proc:
    """One replica across its restarts: what it runs, and its current process."""

    replica: Replica
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log_path: Path
    container: ContainerHandle | None = None  # the replica's container (vtrain.local.containers)
    popen: subprocess.Popen[bytes] | None = None
    reader: Readers | None = None  # its stdout and stderr readers
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    last_stderr: str = ""  # its last non-blank stderr line: the error, whatever order the two pipes were read in
    returncode: int | None = None
    listening: bool = False
    stopped: bool = False  # we stopped it: its exit code is not the job's concern
    started: float = 0.0  # when its current process started, on the supervisor's clock (monotonic)

    @property
    def label(self) -> str:
        return self.replica.label


@dataclass(frozen=True)
class JobSide:
    """What the restart supervisor needs from the job it serves, and nothing more."""

    # copy one stream ("stdout" or "stderr") of a started process to `log` (run in a thread per stream)
    drain: Callable[[Proc, SharedLog, str], None]
    stop: Callable[[list[Proc]], None]  # stop these on purpose: SIGTERM, the grace, SIGKILL, reaped
    signal: Callable[[Proc, int], None]  # send a signal to a replica's process group (and its container)
    event: Callable[[str], None]  # a launcher line of the job's story: a notice, and in job.log


class RestartSupervisor:
    """Starts and restarts the replicas of one job, reads their step reports and injects the faults due."""

    def __init__(self, procs: Sequence[Proc], *, job_id: str, run_dir: Path, policy: RestartPolicy,
                 scheduler: FaultScheduler, job: JobSide, popen: Callable[..., Any] = subprocess.Popen,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.procs = procs  # the job's own list: the same records on both sides
        self.job_id = job_id  # the CLOUD_ML_JOB_ID every replica inherits
        self.run_dir = run_dir
        self.policy = policy
        self.scheduler = scheduler
        self.steps: dict[str, int] = {}  # the step each replica's current process reported last
        # The run's story for the live view and the timeline: (seconds, step) per replica, and one
        # record per process started (replica, restart, start, end, exit code).
        self.history: dict[str, list[tuple[float, int]]] = {p.label: [] for p in procs}
        self.processes: list[dict[str, Any]] = []
        self._current: dict[str, dict[str, Any]] = {}
        self.started_at = 0.0
        self._job = job
        self._popen = popen
        self._clock = clock
        self._preexec: Callable[[], None] | None = None
        self.held: dict[str, float] = {}  # replicas a `late` fault holds back: seconds after the start

    def since_start(self) -> float:
        return self._clock() - self.started_at

    def status_path(self, p: Proc) -> Path:
        return self.run_dir / "status" / f"{p.label}.json"

    def start(self, started_at: float, preexec: Callable[[], None] | None = None) -> None:
        """Start every replica but those a `late` fault holds back (:meth:`tick` starts them when due); fault
        times count from `started_at` (on the supervisor's clock)."""
        self.started_at = started_at
        self._preexec = preexec
        self.held = self.scheduler.late_starts()
        for p in self.procs:
            if p.label not in self.held:
                self.launch(p)

    def release_held(self) -> None:
        """Start no held replica any more (the chief succeeded: Vertex would not start a VM for a finished job);
        they count as stopped."""
        for p in self.procs:
            if p.label in self.held:
                p.stopped = True
        self.held.clear()

    def _start_due(self, at: float) -> None:
        """Start each held replica whose delay has passed."""
        for p in self.procs:
            delay = self.held.get(p.label)
            if delay is not None and at >= delay:
                self._job.event(self.scheduler.started_late(p.label, at))
                self.launch(p)

    def launch(self, p: Proc, *, again: bool = False) -> None:
        """Start (or restart in place) one replica: same argv, cwd, port and TF_CONFIG; the policy's env."""
        self.held.pop(p.label, None)  # started now, with the others (a restart of everyone) or when due
        status = self.status_path(p)
        status.parent.mkdir(parents=True, exist_ok=True)
        status.unlink(missing_ok=True)  # no step of the previous process may count for this one
        if again:
            if p.reader is not None:  # the previous process's last lines first, in its log and job.log
                p.reader.join(timeout=2)
            self._end_leftovers(p)
        self._close(p)
        p.returncode, p.stopped, p.listening = None, False, False
        p.tail.clear()
        p.last_stderr = ""
        self.steps.pop(p.label, None)
        p.cwd.mkdir(parents=True, exist_ok=True)
        env = {**p.env, **self.policy.env(p.label), STATUS_FILE_ENV: str(status)}
        armed = self.scheduler.armed_steps(p.label)
        if armed:  # the runtime pauses at these steps, so a step fault lands where it says
            env[FAULT_STEPS_ENV] = ",".join(map(str, armed))
        preexec = self._preexec
        if p.container is not None:  # its config with this start's environment; the previous one gone
            p.container.prepare(env)
            preexec = _chain(self._preexec, p.container.preexec())
        # stdout and stderr stay apart (Vertex logs a replica's stderr at ERROR), into one log file.
        p.popen = self._popen(
            p.argv, cwd=p.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec,
        )  # fmt: skip
        log = SharedLog(open(p.log_path, "ab" if again else "wb"), writers=2)  # noqa: SIM115 - closed by done()
        threads = [threading.Thread(target=self._job.drain, args=(p, log, stream), daemon=True,
                                    name=f"log-{p.label}-{stream}") for stream in ("stdout", "stderr")]
        for thread in threads:
            thread.start()
        p.reader = Readers(threads)
        p.started = self._clock()
        record = {"replica": p.label, "restart": self.policy.restarts(p.label), "attempt": self.policy.attempt,
                  "start": round(self.since_start(), 3), "end": None, "exit": None}  # fmt: skip
        self.processes.append(record)
        self._current[p.label] = record
        self.scheduler.on_start(p.label, self.since_start())

    def _close(self, p: Proc) -> None:
        """End the record of `p`'s current process (reaped by whoever: an exit, a stop, the job's end)."""
        record = self._current.pop(p.label, None)
        if record is not None:
            record["end"] = round(self.since_start(), 3)
            record["exit"] = p.returncode

    def _end_leftovers(self, p: Proc) -> None:
        """What the previous process of `p` left outside its process group (daemons) goes with it, as
        with the container Vertex restarts; known by the job ID and the cluster spec it inherited."""

        def left_by(q: proctree.Proc) -> bool:
            return proctree.has_env(q, "CLOUD_ML_JOB_ID", self.job_id) and proctree.has_env(
                q, "CLUSTER_SPEC", p.env["CLUSTER_SPEC"])

        ended = proctree.sweep(left_by, 0.0)
        if ended:
            self._job.event(f"ended {len(ended)} process(es) the previous {p.label} left running outside its "
                            f"process group (daemonized): pid {', '.join(map(str, ended))}")

    def tick(self) -> None:
        """Start the held replicas that are due; read the steps the replicas reported; send the faults that are due."""
        at = self.since_start()
        if self.held:
            self._start_due(at)
        live = {p.label: p for p in self.procs if p.popen is not None and p.returncode is None}
        for p in live.values():
            self._read_steps(p, at)
        for action in self.scheduler.due(at, self.steps):
            target = live.get(action.replica)
            if target is None:
                continue
            self._job.event(action.line)
            self._job.signal(target, getattr(signal, action.signal))  # not a stop: its exit is the policy's

    def observe(self) -> None:
        """Read the steps only (after the chief succeeded no fault fires, but the view still follows the workers)."""
        at = self.since_start()
        for p in self.procs:
            if p.popen is not None and p.returncode is None:
                self._read_steps(p, at)

    def _read_steps(self, p: Proc, at: float) -> None:
        """The step `p`'s current process reported last, to the policy (it measures recovery)."""
        status = read_status(self.status_path(p))
        if status is None or status.restarts != self.policy.restarts(p.label):
            return  # nothing yet, or a report of the process before this one
        if p.label not in self.steps and status.first is not None and status.first != status.step:
            self.policy.on_step(p.label, status.first, at)  # where it resumed, though read a few steps late
        if self.steps.get(p.label) != status.step:
            self.steps[p.label] = status.step
            self.policy.on_step(p.label, status.step, at)
            points = self.history.setdefault(p.label, [])
            points.append((round(at, 3), status.step))
            if len(points) > MAX_STEP_POINTS:  # every other point: the shape stays, the size is bounded
                del points[1:-1:2]

    def decide(self, p: Proc) -> Decision:
        """What the exit of `p` (just reaped) means for the job, from the policy; its line printed."""
        assert p.returncode is not None
        self.scheduler.on_exit(p.label)
        self._read_steps(p, self.since_start())  # the steps it did since the last tick count as done
        self._close(p)
        if p.returncode != 0 and not p.stopped and p.reader is not None:
            p.reader.join(timeout=2)  # its last lines tell a permanent error from a transient one
        start_error = p.container.start_error(p.returncode, p.last_stderr) \
            if p.container is not None and p.returncode != 0 and not p.stopped else None
        decision = self.policy.on_exit(Exit(p.label, p.returncode, at=self.since_start(), tail=tuple(p.tail),
                                            stopped=p.stopped, start_error=start_error))  # fmt: skip
        if decision.line:
            self._job.event(decision.line)
        return decision

    def relaunch(self, decision: Decision, cancelled: Callable[[], bool]) -> bool:
        """Restart `decision.replicas` in place: stop those still running (on purpose), start them all
        again. False (nothing started) when the job was cancelled meanwhile: a cancel wins."""
        targets = [p for p in self.procs if p.label in decision.replicas]
        self._job.stop(targets)
        if cancelled():
            return False
        for p in targets:
            self.launch(p, again=True)
        return True

    def result(self) -> dict[str, Any]:
        """The restart part of the job's result: the policy's summary and the faults injected."""
        for p in self.procs:
            if p.returncode is not None:
                self._close(p)
        return {"restarts": self.policy.summary(), "faults": list(self.scheduler.fired),
                "steps": {label: [list(x) for x in points] for label, points in self.history.items()},
                "processes": [dict(r) for r in self.processes]}  # fmt: skip

    def rows(self) -> list[dict[str, Any]]:
        """One row per replica for the live view: its state, last step, steps/s over the last ~10 s, restarts.

        Read without the job's lock: every value is a whole object swapped by one thread (the
        supervisor's), so a row may be one tick old but never torn.
        """
        now = self.since_start()
        out = []
        totals = self.policy.summary()["restarts"]
        for p in self.procs:
            since = max(now - 10.0, (self._current.get(p.label) or {}).get("start", 0.0))
            recent = [pt for pt in list(self.history.get(p.label) or ()) if pt[0] >= since]  # this process's
            rate = None
            live = p.returncode is None and len(recent) >= 2
            if live and recent[-1][0] > recent[0][0] and recent[-1][1] >= recent[0][1]:
                rate = (recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])
            out.append({"replica": p.label, "state": _state(p, p.label in self.steps), "step": self.steps.get(p.label),
                        "rate": rate, "restarts": totals.get(p.label, 0)})  # fmt: skip
        return out

    def lines(self) -> list[str]:
        """The restarts in words, for the end of the run."""
        return self.policy.lines()


def _chain(*hooks: Callable[[], None] | None) -> Callable[[], None] | None:
    """The hooks that are there, one after the other (in the child, before exec)."""
    present = [h for h in hooks if h is not None]
    if len(present) <= 1:
        return present[0] if present else None

    def run() -> None:
        for hook in present:
            hook()

    return run


def _state(p: Proc, stepping: bool) -> str:
    if p.popen is None:
        return "pending"
    if p.returncode is None:
        return "running" if stepping else "starting"
    if p.stopped:
        return "stopped"
    return "done" if p.returncode == 0 else f"exited {exit_text(p.returncode)}"


__all__ = ["TAIL_LINES", "JobSide", "Proc", "RestartSupervisor"]
