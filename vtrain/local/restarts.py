"""Restarts and injected faults in the local supervisor: Vertex AI's restart policy carried out on processes.

The decisions are pure and live elsewhere: :mod:`vtrain.local.policy` says what a replica's
exit means (restart it in place, restart everyone, retry the whole job, fail, succeed) and
:mod:`vtrain.local.faults` which signals are due. :class:`Restarting` (a part of
:class:`vtrain.local.job.LocalJob`) does what they say:

* every (re)start of a replica runs the same argv, in the same working dir, with the same port,
  CLUSTER_SPEC and TF_CONFIG (Vertex restarts a replica on the same hostname), plus the restart
  count and job attempt the policy gives and a fresh VTRAIN_STATUS_FILE for its step reports;
* each supervision tick reads those reports (the current process's only: a report carries the
  restart count it was written under) and sends the faults that are due; a fault's signal is not
  a stop by the supervisor, so the exit it causes goes to the policy like any crash;
* each exit goes to the policy, whose line is printed as a ``[vtrain]`` notice and kept in job.log.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vtrain import proctree
from vtrain.constants import STATUS_FILE_ENV
from vtrain.local.faults import FaultScheduler
from vtrain.local.policy import Decision, Exit, RestartPolicy
from vtrain.runtime.status import read_status

if TYPE_CHECKING:
    from vtrain.local.job import _Proc


class Restarting:
    """The restart and fault part of the supervisor; LocalJob provides the processes and the signals."""

    # Set up by LocalJob.
    policy: RestartPolicy
    scheduler: FaultScheduler
    run_dir: Path
    started_at: float
    _procs: list[_Proc]
    _lock: threading.Lock
    _job_log: IO[str]
    _notice: Callable[[str], None]
    _preexec: Callable[[], None] | None
    _steps: dict[str, int]
    _name: str

    if TYPE_CHECKING:  # provided by LocalJob

        def _read(self, p: _Proc, log: IO[bytes]) -> None: ...
        def _stop(self, procs: list[_Proc]) -> None: ...
        def _signal(self, p: _Proc, sig: int) -> None: ...

    def _since_start(self) -> float:
        return time.monotonic() - self.started_at

    def _status_path(self, p: _Proc) -> Path:
        return self.run_dir / "status" / f"{p.label}.json"

    def _event(self, text: str) -> None:
        """A launcher line that belongs to the job's story: a notice, and in job.log among the replicas' lines."""
        self._notice(text)
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._job_log.write(f"[vtrain] {text}\n")
            self._job_log.flush()

    def _launch(self, p: _Proc, *, again: bool = False) -> None:
        """Start (or restart in place) one replica: same argv, cwd, port and TF_CONFIG; the policy's env."""
        status = self._status_path(p)
        status.parent.mkdir(parents=True, exist_ok=True)
        status.unlink(missing_ok=True)  # no step of the previous process may count for this one
        if again:
            if p.reader is not None:  # the previous process's last lines first, in its log and job.log
                p.reader.join(timeout=2)
            if p.container is not None:  # `docker run --name` again needs the old container gone
                subprocess.run(["docker", "rm", "-f", p.container], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=30, check=False)  # fmt: skip
            self._end_leftovers(p)
        p.returncode, p.stopped, p.listening = None, False, False
        p.tail.clear()
        self._steps.pop(p.label, None)
        p.cwd.mkdir(parents=True, exist_ok=True)
        env = {**p.env, **self.policy.env(p.label), STATUS_FILE_ENV: str(status)}
        p.popen = subprocess.Popen(  # noqa: S603 - argv list, no shell
            p.argv, cwd=p.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=self._preexec,
        )  # fmt: skip
        log = open(p.log_path, "ab" if again else "wb")  # noqa: SIM115 - closed by the reader thread
        p.reader = threading.Thread(target=self._read, args=(p, log), daemon=True, name=f"log-{p.label}")
        p.reader.start()
        self.scheduler.on_start(p.label, self._since_start())

    def _end_leftovers(self, p: _Proc) -> None:
        """What the previous process of `p` left outside its process group (daemons) goes with it, as
        with the container Vertex restarts; known by the job ID and the cluster spec it inherited."""

        def left_by(q: proctree.Proc) -> bool:
            return proctree.has_env(q, "CLOUD_ML_JOB_ID", self._name) and proctree.has_env(
                q, "CLUSTER_SPEC", p.env["CLUSTER_SPEC"])

        ended = proctree.sweep(left_by, 0.0)
        if ended:
            self._event(f"ended {len(ended)} process(es) the previous {p.label} left running outside its process "
                        f"group (daemonized): pid {', '.join(map(str, ended))}")

    def _tick(self) -> None:
        """Read the steps the replicas reported; send the faults that are due."""
        at = self._since_start()
        live = {p.label: p for p in self._procs if p.popen is not None and p.returncode is None}
        for p in live.values():
            self._read_steps(p, at)
        for action in self.scheduler.due(at, self._steps):
            target = live.get(action.replica)
            if target is None:
                continue
            self._event(action.line)
            self._signal(target, getattr(signal, action.signal))  # not a stop: its exit is the policy's

    def _read_steps(self, p: _Proc, at: float) -> None:
        """The step `p`'s current process reported last, to the policy (it measures recovery)."""
        status = read_status(self._status_path(p))
        if status is None or status.restarts != self.policy.restarts(p.label):
            return  # nothing yet, or a report of the process before this one
        if p.label not in self._steps and status.first is not None and status.first != status.step:
            self.policy.on_step(p.label, status.first, at)  # where it resumed, though read a few steps late
        if self._steps.get(p.label) != status.step:
            self._steps[p.label] = status.step
            self.policy.on_step(p.label, status.step, at)

    def _decide(self, p: _Proc) -> Decision:
        """What the exit of `p` (just reaped) means for the job, from the policy; its line printed."""
        assert p.returncode is not None
        self.scheduler.on_exit(p.label)
        self._read_steps(p, self._since_start())  # the steps it did since the last tick count as done
        if p.returncode != 0 and not p.stopped and p.reader is not None:
            p.reader.join(timeout=2)  # its last lines tell a permanent error from a transient one
        decision = self.policy.on_exit(Exit(p.label, p.returncode, at=self._since_start(), tail=tuple(p.tail),
                                            stopped=p.stopped))  # fmt: skip
        if decision.line:
            self._event(decision.line)
        return decision

    def _relaunch(self, decision: Decision, cancelled: Callable[[], bool]) -> bool:
        """Restart `decision.replicas` in place: stop those still running (on purpose), start them all
        again. False (nothing started) when the job was cancelled meanwhile: a cancel wins."""
        targets = [p for p in self._procs if p.label in decision.replicas]
        self._stop(targets)
        if cancelled():
            return False
        for p in targets:
            self._launch(p, again=True)
        return True

    def _restart_result(self) -> dict[str, Any]:
        return {"restarts": self.policy.summary(), "faults": list(self.scheduler.fired)}


__all__ = ["Restarting"]
