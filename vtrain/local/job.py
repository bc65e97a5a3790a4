"""The supervisor of a local run: one process group per replica, and the job's state from them.

:func:`vtrain.local.runner.run_local` prepares a run and hands it to :class:`LocalJob`, whose
thread starts the processes and applies Vertex's rules (see :mod:`vtrain.local`).
Everything here is process and socket work; what each replica sees comes, already computed,
from :mod:`vtrain.local.env`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vtrain import proctree
from vtrain.errors import BackendError
from vtrain.foreign import printable, printable_lines
from vtrain.handle import CANCELLED, CANCELLING, FAILED, PENDING, RUNNING, SUCCEEDED, JobHandle, Waiting
from vtrain.local import env as localenv
from vtrain.local.env import Plan, Replica
from vtrain.local.failures import describe_exit, startup_state
from vtrain.local.faults import FaultScheduler
from vtrain.local.options import RunOptions
from vtrain.local.policy import CHIEF_SUCCEEDED, FAIL, RESTART, RETRY_JOB, RestartPolicy, policy_for_job
from vtrain.local.ports import listening
from vtrain.local.restarts import TAIL_LINES, JobSide, Proc, RestartSupervisor, SharedLog

if TYPE_CHECKING:
    from vtrain.handle import LogHook, StateHook


class LocalJob(JobHandle):
    """A running local job: the same handle contract as a Vertex job (state, wait, cancel, logs).
    Failed replicas are restarted as Vertex restarts them and faults are injected by the
    :class:`~vtrain.local.restarts.RestartSupervisor` it holds (`restarts`, with its `policy` and
    `scheduler`); the job keeps the processes' output, their stopping and its state."""

    default_poll = 0.2

    def __init__(self, name: str, display_name: str, plan: Plan, procs: list[Proc], output_dir: Path,
                 run_dir: Path, temporary: bool, options: RunOptions, out: IO[str] | None,
                 notice: Callable[[str], None], on_line: Callable[[Replica, str, str], None] | None = None,
                 release: Callable[[], None] = lambda: None, policy: RestartPolicy | None = None,
                 scheduler: FaultScheduler | None = None) -> None:
        super().__init__(name)
        self.display_name = display_name
        self.plan = plan
        self.output_dir = output_dir
        self.run_dir = run_dir  # this run's own folder (see vtrain.local.rundir)
        self._procs = procs
        self._temporary = temporary
        self._release = release  # the output directory's claim, the environment's lease
        self._options = options
        self._out = out
        self._notice = notice
        self._on_line = on_line
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._finished = threading.Event()
        self._started = threading.Event()
        self._cancel = False
        self._force = False
        self._start_error: BaseException | None = None
        self._job_log = open(self.run_dir / "job.log", "w", encoding="utf-8")  # noqa: SIM115
        self.started_at = 0.0
        self.ended_at = 0.0
        self.summary: dict[str, Any] = {}  # what result.json says once the job ended
        self.error_reason = ""  # the failed replica's last stderr line (a trial's infeasibleReason)
        self.restarts = RestartSupervisor(
            procs, job_id=name, run_dir=run_dir, policy=policy or policy_for_job(plan.job, [p.label for p in procs]),
            scheduler=scheduler or FaultScheduler(()),
            job=JobSide(drain=self._read, stop=self._stop, signal=self._signal, event=self._event),
        )

    # ----------------------------------------------------------------------- the handle

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    @property
    def pids(self) -> dict[str, int]:
        """Process id (= process group id) of each replica started, by label."""
        return {p.label: p.popen.pid for p in self._procs if p.popen is not None}

    @property
    def ports(self) -> dict[str, int]:
        """The 127.0.0.1 port of each replica in CLUSTER_SPEC, by label."""
        return {p.label: self._port(p) for p in self._procs}

    def refresh(self) -> str:
        return self._state

    def wait(
        self,
        timeout: float | None = None,
        poll: float | None = None,
        *,
        on_state: StateHook | None = None,
        on_log: LogHook | None = None,
    ) -> str:
        """Block until the job ends (every process reaped, logs flushed); return its state.

        Native blocking instead of the base class's polling (`poll` only paces `on_state`);
        with `on_log`, the job's lines are followed meanwhile.
        """
        if on_log is not None:
            return super().wait(timeout, poll, on_state=on_state, on_log=on_log)
        waiting = Waiting(self, timeout, self.default_poll if poll is None else poll, on_state)
        # Short waits in a loop: the main thread stays responsive to Ctrl-C.
        while True:
            finished = self._finished.wait(min(0.25, waiting.poll))
            waiting.check(self._state)
            if finished:
                return self._state

    def _follow(self, waiting: Waiting) -> Iterator[str]:
        return self._read_log(follow=True, waiting=waiting)

    def cancel(self, force: bool = False) -> None:
        """Stop every replica (SIGTERM, then SIGKILL after the grace period, or at once with
        `force`); the job ends CANCELLED."""
        with self._lock:
            if self._finished.is_set():
                return
            self._cancel = True
            self._force = self._force or force
            if self._state in (PENDING, RUNNING):
                self._state = CANCELLING
        self._wake.set()

    def logs(self, *, follow: bool = False) -> Iterator[str]:
        """Every replica's lines, prefixed `[chief-0]`, in arrival order; `follow` until the job ends."""
        return self._read_log(follow=follow)

    def _read_log(self, *, follow: bool, waiting: Waiting | None = None) -> Iterator[str]:
        with open(self.run_dir / "job.log", encoding="utf-8", errors="replace") as f:
            while True:
                where = f.tell()
                line = f.readline()
                if line.endswith("\n"):
                    yield printable(line[:-1], limit=None)  # bounded when written
                elif follow and not self._finished.is_set():
                    f.seek(where)  # nothing, or half a line: wait for the rest
                    pause = waiting.check(self._state) if waiting is not None else 0.2
                    self._finished.wait(min(pause, 0.2))
                else:
                    if line:
                        yield line
                    return

    def progress(self) -> dict[str, Any]:
        """What the live view shows now: the job's state, seconds since its replicas started, a row per replica
        (:meth:`~vtrain.local.restarts.RestartSupervisor.rows`). Safe to call from any thread."""
        started = self.started_at
        end = self.ended_at or time.monotonic()
        return {"name": self.display_name, "state": self._state, "seconds": round(end - started, 1) if started else 0.0,
                "replicas": self.restarts.rows() if started else []}  # fmt: skip

    def replica_log(self, label: str) -> Path:
        return self.run_dir / f"{label}.log"

    # ----------------------------------------------------------------------- supervision

    def _start(self) -> None:
        atexit.register(self._at_exit)
        threading.Thread(target=self._supervise, name=f"vtrain-local-{self._name}", daemon=True).start()
        try:
            self._started.wait()
        except KeyboardInterrupt:  # no handle reached the caller yet: nothing may be left running
            self.cancel(force=True)
            self._finished.wait()
            raise
        if self._start_error is not None:
            self._finished.wait()
            if isinstance(self._start_error, OSError):  # e.g. too many processes or open files
                raise BackendError(f"could not start the replicas: {self._start_error}") from None
            raise self._start_error

    def _at_exit(self) -> None:
        if not self._finished.is_set():
            self.cancel()
            self._finished.wait(self._options.kill_grace + 5)

    def _supervise(self) -> None:
        state: str = FAILED
        error: str | None = "the launcher stopped unexpectedly"
        try:
            try:
                self._spawn_all()
            except BaseException as err:  # noqa: BLE001 - reported to run_local's caller
                self._start_error = err
                state, error = FAILED, f"could not start the replicas: {err}"
                return
            finally:
                self._started.set()
            state, error = self._watch()
        finally:
            self._stop(self._procs)
            self._end_strays()
            for p in self._procs:
                if p.reader is not None:
                    p.reader.join(timeout=5)
            self.ended_at = time.monotonic()
            self._finish(state, error)

    def _end_strays(self) -> None:
        """End what the replicas left outside their process groups (daemons), as Vertex ends the VM.

        vtrain adopts such orphans (a child subreaper, set in :meth:`_spawn_all`) and knows them
        by the CLOUD_ML_JOB_ID they inherited: see :mod:`vtrain.proctree`.
        """
        grace = 0.0 if self._force else self._options.kill_grace
        ended = proctree.sweep(lambda q: proctree.has_env(q, "CLOUD_ML_JOB_ID", self._name), grace)
        if ended:
            self._notice(f"ended {len(ended)} process(es) the replicas left running outside their process "
                         f"groups (daemonized): pid {', '.join(map(str, ended))}")

    def _spawn_all(self) -> None:
        proctree.become_subreaper()  # a replica's daemonized descendants stay in our tree
        preexec = proctree.die_with_parent()
        with self._lock:
            if self._cancel:
                raise KeyboardInterrupt
            self._state = RUNNING
        self.started_at = time.monotonic()
        self.restarts.start(self.started_at, preexec)  # see vtrain.local.restarts

    def _event(self, text: str) -> None:
        """A launcher line that belongs to the job's story: a notice, and in job.log among the replicas' lines."""
        self._notice(text)
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._job_log.write(f"[vtrain] {text}\n")
            self._job_log.flush()

    def _read(self, p: Proc, log: SharedLog, stream: str = "stdout") -> None:
        assert p.popen is not None
        try:
            self._copy(p, p.popen.stderr if stream == "stderr" else p.popen.stdout, log, stream)  # type: ignore[arg-type]
        finally:
            log.done()

    def _copy(self, p: Proc, pipe: IO[bytes], log: SharedLog, stream: str) -> None:
        for raw in pipe:
            log.write(raw)  # the replica's own log: byte for byte
            text = raw.decode(errors="replace").rstrip("\r\n")
            p.tail.append(text)
            if stream == "stderr" and text.strip():
                p.last_stderr = printable(text.strip())
            line = f"[{p.label}] {printable(text)}"  # job.log and `out` are vtrain's lines: no \r over the prefix
            with self._lock:
                self._job_log.write(line + "\n")
                self._job_log.flush()
                if self._out is not None:
                    with contextlib.suppress(OSError, ValueError):
                        self._out.write(line + "\n")
                        self._out.flush()
            if self._on_line is not None:
                with contextlib.suppress(Exception):  # a broken sink must not stop the draining
                    self._on_line(p.replica, text, stream)

    def _exited(self, p: Proc) -> bool:
        """Reap a replica that exited, after killing whatever is left of its process group."""
        if p.returncode is not None or p.popen is None:
            return False
        try:
            info: object = os.waitid(os.P_PID, p.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = True  # already reaped
        if not info:
            return False
        # The leader is a zombie, so its group id cannot be reused yet: safe to kill the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.popen.pid, signal.SIGKILL)
        p.returncode = p.popen.wait()
        if p.container is not None:  # its runtime is gone: its container (a process of its own) goes too
            p.container.remove()
        return True

    def _watch(self) -> tuple[str, str | None]:
        """Supervise until the job ends. The startup deadline: once one cluster member's server is up (or a
        replica was restarted), each other live member must be up and not frozen within `startup_timeout`,
        or the job fails: TF's initial cluster check waits for every peer with no timeout, and a stopped
        process, whose port the kernel still accepts on, answers it no more than one that never started.
        Vertex sees neither as a failure (neither has exited) and would hang to scheduling.timeout; a
        frozen peer after start-up is the runtime's collective timeout's (vtrain.runtime)."""
        opts = self._options
        deadline = None if opts.timeout is None else self.started_at + opts.timeout
        chief_done_at: float | None = None
        first_listen: float | None = None
        members = [p for p in self._procs if localenv.listens(self.plan, p.replica)] if len(self._procs) > 1 else []
        # With parameter servers, workers only serve the chief (coordinator) and never exit by
        # themselves: they stop with it, like the ps. Under all-reduce they get a grace period.
        ps = any(p.replica.role == "ps" for p in self._procs) and not localenv.is_diloco(self.plan)
        servers = ("ps", "evaluator", "worker") if ps else (
            "ps", "evaluator")
        starting = bool(members)  # the start-up window: until every member is up and answering at once
        restarted = False  # a member was restarted: one that finished since cannot rejoin
        while True:
            now = time.monotonic()
            for p in self._procs:
                if not self._exited(p):
                    continue
                decision = self.restarts.decide(p)  # Vertex's restart policy (vtrain.local.policy)
                if decision.action == CHIEF_SUCCEEDED:
                    chief_done_at = now
                    self.restarts.release_held()  # one still held back by a late fault never starts
                    self._stop([q for q in self._procs if q.replica.role in servers])
                elif decision.action == FAIL:
                    return FAILED, self._failure(p, decision.error, tail=decision.tail)
                elif decision.action in (RESTART, RETRY_JOB):
                    try:
                        if self.restarts.relaunch(decision, lambda: self._cancel):
                            first_listen = None if first_listen is None else now  # their servers: the full time
                            starting = restarted = bool(members)  # a restarted member runs the cluster check again
                    except OSError as err:  # e.g. out of processes or open files
                        return FAILED, f"could not restart {', '.join(decision.replicas)}: {err}"
            if self._cancel:
                return CANCELLED, "cancelled"
            if chief_done_at is not None:
                workers = [q for q in self._procs if q.returncode is None and not q.stopped]
                if not workers:
                    return SUCCEEDED, None
                if now - chief_done_at >= opts.worker_grace:
                    self._notice(f"chief-0 succeeded; stopping {', '.join(q.label for q in workers)} "
                                 f"still running {opts.worker_grace:g} s later")
                    return SUCCEEDED, None
            if deadline is not None and now >= deadline:
                return FAILED, f"timed out after {opts.timeout:g} s (--timeout / scheduling.timeout)"
            if chief_done_at is None and starting:
                for p in members:
                    if not p.listening and p.returncode is None:
                        p.listening = listening(self._port(p))
                if first_listen is None and any(p.listening for p in members):
                    first_listen = now
                starting, failure = startup_state(members, now, first_listen, opts.startup_timeout, restarted)
                if failure is not None:  # (starting: until every member is up and answering at once)
                    return FAILED, failure
            if chief_done_at is None:
                self.restarts.tick()  # step reports in, faults out
            else:
                self.restarts.observe()  # the workers' last steps, for the live view and the timeline
            self._wake.wait(0.1)
            self._wake.clear()

    def _port(self, p: Proc) -> int:
        spec = json.loads(p.env["CLUSTER_SPEC"])
        return int(spec["cluster"][f"workerpool{p.replica.pool}"][p.replica.index].rsplit(":", 1)[1])

    def _failure(self, p: Proc, headline: str | None = None, *, tail: bool = True) -> str:
        assert p.returncode is not None
        if p.reader is not None:
            self._stop([q for q in self._procs if q is not p])
            p.reader.join(timeout=5)
        tail_lines = [printable(line) for line in p.tail]
        with contextlib.suppress(OSError), open(p.log_path, "rb") as f:  # every line read so far
            f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
            tail_lines = printable_lines(f.read())  # split at newlines only: a \r is shown, not obeyed
        self.error_reason = p.last_stderr
        first = printable(headline) if headline else f"{p.label} {describe_exit(p.returncode)}"
        if not tail:  # the headline holds the reason (a container that never started): no log to repeat it
            self.error_reason = first
            return f"{first} (full log: {p.log_path})"
        lines = [first, f"last lines of {p.label} (full log: {p.log_path}):"]
        lines += [f"  | {line}" for line in tail_lines[-TAIL_LINES:]]
        return "\n".join(lines)

    def _stop(self, procs: list[Proc]) -> None:
        """SIGTERM each live process group, SIGKILL what is left after the grace period, reap all."""
        live = [p for p in procs if p.popen is not None and p.returncode is None]
        for p in live:
            p.stopped = True
            self._signal(p, signal.SIGTERM)
            self._signal(p, signal.SIGCONT)  # a frozen (SIGSTOPped) replica handles SIGTERM too
        end = time.monotonic() + self._options.kill_grace
        while any(not self._exited(p) and p.returncode is None for p in live) and time.monotonic() < end:
            if self._force:
                break
            time.sleep(0.05)
        for p in live:
            if p.returncode is None:
                self._signal(p, signal.SIGKILL)
                self._exited(p) or p.popen.wait()  # type: ignore[union-attr]
                if p.returncode is None:
                    p.returncode = p.popen.returncode  # type: ignore[union-attr]

    def _signal(self, p: Proc, sig: int) -> None:
        """The signal to the replica's process: through its runtime for a container (whose process left the
        runtime's process group), else to its process group; once, so a handler runs once."""
        assert p.popen is not None
        if p.container is not None and p.container.kill(sig) and p.container.pid() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.popen.pid, sig)

    def _finish(self, state: str, error: str | None) -> None:
        if state == CANCELLED or (self._cancel and state != SUCCEEDED):
            state, error = CANCELLED, "cancelled"
        if state == SUCCEEDED and self._options.check_output is not None:  # what the job's output must be
            problem = self._options.check_output(self.output_dir)
            if problem:
                self._event(problem)
                state, error = FAILED, problem
        self.summary = {
            "name": self._name,
            "display_name": self.display_name,
            "state": state,
            "error": error,
            "seconds": round((self.ended_at or time.monotonic()) - (self.started_at or time.monotonic()), 2),
            "output_dir": str(self.output_dir),
            "replicas": {p.label: p.returncode for p in self._procs},
            **self.restarts.result(),  # restarts (the policy's summary) and the faults injected
        }
        for line in self.restarts.lines():  # the restarts in words, at the end of the run
            self._event(line)
        with contextlib.suppress(OSError):  # an output dir removed under us must not hang wait()
            (self.run_dir / "result.json").write_text(json.dumps(self.summary, indent=2) + "\n", encoding="utf-8")
        self._job_log.close()
        if not self._options.keep:
            for p in self._procs:
                shutil.rmtree(p.cwd, ignore_errors=True)
            shutil.rmtree(self.run_dir / "tmp", ignore_errors=True)  # the replicas' TMPDIRs
            with contextlib.suppress(OSError):
                (self.run_dir / "work").rmdir()
        with contextlib.suppress(Exception):
            self._release()
        if self._temporary and state == SUCCEEDED and not self._options.keep:
            shutil.rmtree(self.output_dir, ignore_errors=True)
        with self._lock:
            self._state, self._error = state, error
        atexit.unregister(self._at_exit)
        self._finished.set()


__all__ = ["LocalJob", "describe_exit"]
