"""`vtrain local`: the CustomJob `submit` would send, run as one process per replica on 127.0.0.1.

    job = vtrain.run_local(vtrain.load_config("job.yaml", target="local"))
    job.wait(); job.state, job.exit_code

Preparation happens in :func:`run_local` (a packaging mistake raises before anything
starts); then a supervisor thread owns the processes and decides the job's state, with
Vertex's semantics:
  * any chief/worker/ps exiting non-zero fails the job at once: the others are stopped
    (whole process groups, SIGTERM then SIGKILL) and the summary names the replica, its exit
    code and its last log lines;
  * success follows the chief: when it exits 0, ps and evaluator replicas are stopped, and
    workers get a grace period (the coordination service may keep them ~20 s) before they are;
  * a cluster member that never starts its server while its peers wait for it (TF's initial
    health check has no timeout) fails the job after `startup_timeout`; dead or frozen peers
    are caught by the runtime's collective timeout and TF's heartbeats;
  * `timeout` fails the job, `cancel()` (or Ctrl-C in the CLI) cancels it; in every case
    no child process group outlives the job and every port is released.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from vtrain.backends import localenv
from vtrain.backends.handle import CANCELLED, CANCELLING, FAILED, PENDING, RUNNING, SUCCEEDED, JobHandle, WaitTimeout
from vtrain.backends.localenv import Plan, Replica
from vtrain.errors import BackendError, PackagingError

TAIL_LINES = 15
RUN_DIR = "vtrain-local"


@dataclass(frozen=True)
class Options:
    """How the launcher behaves; every time is in seconds."""

    timeout: float | None = None  # the whole job; None: the job's scheduling.timeout, if any
    startup_timeout: float = 120.0  # a cluster member's server up, once a peer's is
    worker_grace: float = 30.0  # workers may outlive a successful chief this long
    kill_grace: float = 5.0  # SIGTERM → SIGKILL
    keep: bool = False  # keep a temporary output dir and the replicas' working dirs


@dataclass
class _Proc:
    replica: Replica
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log_path: Path
    container: str | None = None
    popen: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    returncode: int | None = None
    listening: bool = False
    stopped: bool = False  # we stopped it: its exit code is not the job's concern

    @property
    def label(self) -> str:
        return self.replica.label


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def free_ports(n: int) -> list[int]:
    """n distinct free ports on 127.0.0.1 (all held open together, so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((localenv.HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((localenv.HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


def _pdeathsig() -> Callable[[], None] | None:
    """A preexec hook so a replica dies with the launcher even if it is SIGKILLed (Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return hook


class LocalJob(JobHandle):
    """A running local job: the same handle contract as a Vertex job (state, wait, cancel, logs)."""

    default_poll = 0.2

    def __init__(self, name: str, display_name: str, plan: Plan, procs: list[_Proc], output_dir: Path,
                 temporary: bool, options: Options, out: IO[str] | None, notice: Callable[[str], None]) -> None:
        super().__init__(name)
        self.display_name = display_name
        self.plan = plan
        self.output_dir = output_dir
        self.run_dir = output_dir / RUN_DIR
        self._procs = procs
        self._temporary = temporary
        self._options = options
        self._out = out
        self._notice = notice
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
        self.result: dict[str, Any] = {}

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

    def wait(self, timeout: float | None = None, poll: float | None = None) -> str:
        """Block until the job ends (every process reaped, logs flushed); return its state.

        Native blocking instead of the base class's polling; `poll` is accepted and unused.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        # Short waits in a loop: the main thread stays responsive to Ctrl-C.
        while not self._finished.wait(0.25):
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(self._name, self._state, timeout or 0.0)
        return self._state

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
        with open(self.run_dir / "job.log", encoding="utf-8", errors="replace") as f:
            while True:
                line = f.readline()
                if line:
                    yield line.rstrip("\n")
                elif follow and not self._finished.is_set():
                    time.sleep(0.2)
                else:
                    rest = f.read()
                    yield from (x for x in rest.splitlines())
                    return

    def replica_log(self, label: str) -> Path:
        return self.run_dir / f"{label}.log"

    # ----------------------------------------------------------------------- supervision

    def _start(self) -> None:
        atexit.register(self._at_exit)
        threading.Thread(target=self._supervise, name=f"vtrain-local-{self._name}", daemon=True).start()
        self._started.wait()
        if self._start_error is not None:
            self._finished.wait()
            raise self._start_error

    def _at_exit(self) -> None:
        if not self._finished.is_set():
            self.cancel()
            self._finished.wait(self._options.kill_grace + 5)

    def _supervise(self) -> None:
        state, error = FAILED, "the launcher stopped unexpectedly"
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
            for p in self._procs:
                if p.reader is not None:
                    p.reader.join(timeout=5)
            self.ended_at = time.monotonic()
            self._finish(state, error)

    def _spawn_all(self) -> None:
        preexec = _pdeathsig()
        with self._lock:
            if self._cancel:
                raise KeyboardInterrupt
            self._state = RUNNING
        self.started_at = time.monotonic()
        for p in self._procs:
            p.cwd.mkdir(parents=True, exist_ok=True)
            p.popen = subprocess.Popen(  # noqa: S603 - argv list, no shell
                p.argv, cwd=p.cwd, env=p.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec,
            )
            p.reader = threading.Thread(target=self._read, args=(p,), daemon=True, name=f"log-{p.label}")
            p.reader.start()

    def _read(self, p: _Proc) -> None:
        assert p.popen is not None and p.popen.stdout is not None
        with open(p.log_path, "wb") as log:
            for raw in p.popen.stdout:
                log.write(raw)
                log.flush()
                text = raw.decode(errors="replace").rstrip("\r\n")
                p.tail.append(text)
                line = f"[{p.label}] {text}"
                with self._lock:
                    self._job_log.write(line + "\n")
                    self._job_log.flush()
                    if self._out is not None:
                        with contextlib.suppress(OSError, ValueError):
                            self._out.write(line + "\n")
                            self._out.flush()

    def _exited(self, p: _Proc) -> bool:
        """Reap a replica that exited, after killing whatever is left of its process group."""
        if p.returncode is not None or p.popen is None:
            return False
        try:
            info = os.waitid(os.P_PID, p.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = True  # already reaped
        if not info:
            return False
        # The leader is a zombie, so its group id cannot be reused yet: safe to kill the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.popen.pid, signal.SIGKILL)
        p.returncode = p.popen.wait()
        return True

    def _watch(self) -> tuple[str, str | None]:
        opts = self._options
        deadline = None if opts.timeout is None else self.started_at + opts.timeout
        chief_done_at: float | None = None
        first_listen: float | None = None
        members = [p for p in self._procs if p.replica.in_cluster] if len(self._procs) > 1 else []
        # With parameter servers, workers only serve the chief (coordinator) and never exit by
        # themselves: they stop with it, like the ps. Under all-reduce they get a grace period.
        servers = ("ps", "evaluator", "worker") if any(p.replica.role == "ps" for p in self._procs) else (
            "ps", "evaluator")
        while True:
            now = time.monotonic()
            for p in self._procs:
                if not self._exited(p):
                    continue
                assert p.returncode is not None
                role = p.replica.role
                if role == "chief" and p.returncode == 0:
                    chief_done_at = now
                    self._stop([q for q in self._procs if q.replica.role in servers])
                elif p.returncode != 0 and not p.stopped and chief_done_at is None and role != "evaluator":
                    return FAILED, self._failure(p)
                elif p.returncode != 0 and not p.stopped:
                    self._notice(f"{p.label} {describe_exit(p.returncode)} (not a chief/worker/ps failure: "
                                 "the job's result follows the chief)")
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
            waiting = [p for p in members if not p.listening and p.returncode is None]
            if waiting and chief_done_at is None:
                for p in waiting:
                    p.listening = _listening(self._port(p))
                if first_listen is None and any(p.listening for p in members):
                    first_listen = now
                late = [p for p in members if not p.listening and p.returncode is None]
                if first_listen is not None and late and now - first_listen >= opts.startup_timeout:
                    ready = ", ".join(p.label for p in members if p.listening)
                    return FAILED, (f"{', '.join(p.label for p in late)} did not start its TensorFlow server "
                                    f"within {opts.startup_timeout:g} s while {ready} waited for it "
                                    "(TF's initial cluster check has no timeout)")
            self._wake.wait(0.1)
            self._wake.clear()

    def _port(self, p: _Proc) -> int:
        spec = json.loads(p.env["CLUSTER_SPEC"])
        return int(spec["cluster"][f"workerpool{p.replica.pool}"][p.replica.index].rsplit(":", 1)[1])

    def _failure(self, p: _Proc) -> str:
        assert p.returncode is not None
        if p.reader is not None:
            self._stop([q for q in self._procs if q is not p])
            p.reader.join(timeout=5)
        lines = [f"{p.label} {describe_exit(p.returncode)}",
                 f"last lines of {p.label} (full log: {p.log_path}):"]
        lines += [f"  | {line}" for line in list(p.tail)[-TAIL_LINES:]]
        return "\n".join(lines)

    def _stop(self, procs: list[_Proc]) -> None:
        """SIGTERM each live process group, SIGKILL what is left after the grace period, reap all."""
        live = [p for p in procs if p.popen is not None and p.returncode is None]
        for p in live:
            p.stopped = True
            self._signal(p, signal.SIGTERM)
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

    def _signal(self, p: _Proc, sig: int) -> None:
        assert p.popen is not None
        if p.container is not None:
            subprocess.run(["docker", "kill", "--signal", signal.Signals(sig).name, p.container],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=15, check=False)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.popen.pid, sig)

    def _finish(self, state: str, error: str | None) -> None:
        if state == CANCELLED or (self._cancel and state != SUCCEEDED):
            state, error = CANCELLED, "cancelled"
        self.result = {
            "name": self._name,
            "display_name": self.display_name,
            "state": state,
            "error": error,
            "seconds": round((self.ended_at or time.monotonic()) - (self.started_at or time.monotonic()), 2),
            "output_dir": str(self.output_dir),
            "replicas": {p.label: p.returncode for p in self._procs},
        }
        (self.run_dir / "result.json").write_text(json.dumps(self.result, indent=2) + "\n", encoding="utf-8")
        self._job_log.close()
        if not self._options.keep:
            for p in self._procs:
                shutil.rmtree(p.cwd, ignore_errors=True)
            with contextlib.suppress(OSError):
                (self.run_dir / "work").rmdir()
        if self._temporary and state == SUCCEEDED and not self._options.keep:
            shutil.rmtree(self.output_dir, ignore_errors=True)
        with self._lock:
            self._state, self._error = state, error
        atexit.unregister(self._at_exit)
        self._finished.set()


# --------------------------------------------------------------------------- building the job


def _docker_ready() -> None:
    if shutil.which("docker") is None:
        raise BackendError("this job runs a container (trainer.container); `vtrain local` runs containers "
                           "with docker, which is not installed here")
    done = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                          text=True, timeout=30, check=False)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise BackendError(f"this job runs a container (trainer.container), but docker cannot run it: {why}")


def local_gpus(env: Mapping[str, str]) -> list[str]:
    """GPU ids this machine offers: CUDA_VISIBLE_DEVICES when set, else what nvidia-smi lists."""
    if "CUDA_VISIBLE_DEVICES" in env:
        return [g for g in env["CUDA_VISIBLE_DEVICES"].split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def _job_timeout(job: Mapping[str, Any]) -> float | None:
    raw = (job["jobSpec"].get("scheduling") or {}).get("timeout")
    return float(str(raw).rstrip("s")) if raw else None


def build_procs(plan: Plan, *, python: str | None, venv: str | None, output_dir: Path, job_id: str,
                host_env: Mapping[str, str], gpus: Mapping[Replica, str]) -> list[_Proc]:
    """argv, environment, working dir and log of every replica (ports chosen here)."""
    run_dir = output_dir / RUN_DIR
    ports = dict(zip(plan.replicas, free_ports(len(plan.replicas)), strict=True))
    procs = []
    for r in plan.replicas:
        pool = plan.pool_spec(r)
        vertex = localenv.vertex_env(plan, r, ports, str(output_dir), job_id)
        job_env = localenv.pool_env(pool)
        container = None
        if "containerSpec" in pool:
            container = f"vtrain-{job_id}-{r.label}"
            names = [*job_env, *vertex, "PYTHONUNBUFFERED"]
            argv = localenv.docker_argv(pool, container, names, [str(output_dir)], gpus.get(r, ""))
            env = localenv.compose_env(host_env, vertex=vertex, job=job_env, gpus=gpus.get(r, ""))
        else:
            assert python is not None
            argv = localenv.python_argv(python, pool)
            env = localenv.compose_env(host_env, vertex=vertex, job=job_env, venv=venv, gpus=gpus.get(r, ""))
        procs.append(_Proc(r, argv, env, run_dir / "work" / r.label, run_dir / f"{r.label}.log", container))
    return procs


def run_local(
    config: Any,
    *,
    output_dir: str | os.PathLike[str] | None = None,
    max_replicas: int | None = None,
    timeout: float | None = None,
    keep: bool = True,
    out: IO[str] | None = None,
    notices: IO[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    allow_credentials: bool = False,
    startup_timeout: float = 120.0,
    worker_grace: float = 30.0,
    kill_grace: float = 5.0,
) -> LocalJob:
    """Start a job on this machine and return its handle (RUNNING); `wait()` for the end.

    `config` is a JobConfig or a job-file path (loaded for the local target). Replica logs go
    to `out` prefixed `[chief-0]` (None: only to files), launcher notices to `notices`.
    Outputs go to `output_dir`, else the job's base_output_dir when it is local, else a new
    temporary directory, which is removed when the job succeeds unless `keep`.
    Raises PackagingError/BackendError before anything starts if the job cannot run here.
    """
    from vtrain.backends import localpkg
    from vtrain.config import JobConfig, load_config
    from vtrain.spec import build_job_dict

    if not isinstance(config, JobConfig):
        config = load_config(config, target="local")

    def notice(text: str) -> None:
        if notices is not None:
            notices.write(f"[vtrain] {text}\n")
            notices.flush()

    cache = Path(cache_dir) if cache_dir is not None else localpkg.default_cache_dir()
    trainer_env = None
    package_uris: list[str] | None = None
    if config.trainer.container is None:
        sdists, package_uris = _packages(config, cache, allow_credentials)
        trainer_env = localpkg.prepare_env(sdists, cache)
        notice(f"environment {trainer_env.venv} ({'cached' if trainer_env.cached else 'installed'} "
               f"in {trainer_env.seconds:.1f} s)")
        for text in trainer_env.notices:
            notice(text)
    else:
        _docker_ready()
    job = build_job_dict(config, package_uris if config.staging_bucket is None else None)
    try:
        the_plan = localenv.plan(job, max_replicas)
    except ValueError as err:
        raise BackendError(str(err)) from None
    for text in the_plan.notices:
        notice(text)
    host_env = dict(os.environ)
    requests = {r: localenv.gpus_requested(the_plan.pool_spec(r)) for r in the_plan.replicas}
    gpus, gpu_notices = localenv.assign_gpus(local_gpus(host_env), requests)
    for text in gpu_notices:
        notice(text)
    if any(p.get("machineSpec", {}).get("acceleratorType", "").startswith("TPU") for p in the_plan.pools if p):
        notice("this machine has no TPU: the replica runs on CPU (strategy `tpu` will fail)")

    job_id = f"local-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}"
    temporary = False
    if output_dir is None and config.base_output_dir and not config.base_output_dir.startswith("gs://"):
        output_dir = config.base_output_dir
    if output_dir is None:
        output_dir, temporary = tempfile.mkdtemp(prefix=f"vtrain-local-{config.name[:40]}-"), True
    out_path = Path(output_dir).expanduser().absolute()
    (out_path / RUN_DIR).mkdir(parents=True, exist_ok=True)
    (out_path / RUN_DIR / "job.json").write_text(json.dumps(the_plan.job, indent=2) + "\n", encoding="utf-8")
    procs = build_procs(the_plan, python=trainer_env.python if trainer_env else None,
                        venv=str(trainer_env.venv) if trainer_env else None, output_dir=out_path,
                        job_id=job_id, host_env=host_env, gpus=gpus)
    options = Options(timeout=timeout if timeout is not None else _job_timeout(job),
                      startup_timeout=startup_timeout, worker_grace=worker_grace, kill_grace=kill_grace, keep=keep)
    handle = LocalJob(job_id, config.name, the_plan, procs, out_path, temporary, options, out, notice)
    notice(f"job {config.name} ({job_id}): {', '.join(p.label for p in procs)}; outputs in {out_path}")
    handle._start()
    return handle


def _packages(config: Any, cache: Path, allow_credentials: bool) -> tuple[list[Path], list[str]]:
    """The sdists `submit` would stage (built into the cache) and their file:// URIs."""
    from vtrain import packaging
    from vtrain.backends import localpkg
    from vtrain.staging import uri_to_path

    if config.trainer.package is None:
        paths = localpkg.fetch_packages(config.trainer.package_uris, cache)
        return paths, [p.as_uri() for p in paths]
    staging = cache / "sdists"
    staging.mkdir(parents=True, exist_ok=True)
    staged = packaging.build_and_stage(config.trainer.package, str(staging), config.trainer.module,
                                       allow_credentials=allow_credentials, progress=False)
    paths = [uri_to_path(s.uri) for s in staged]
    if any(p is None for p in paths):  # pragma: no cover - a local target gives file:// URIs
        raise PackagingError("staging into the local cache did not give local files")
    return [p for p in paths if p is not None], [s.uri for s in staged]


__all__ = ["LocalJob", "Options", "build_procs", "describe_exit", "free_ports", "local_gpus", "run_local"]
