"""Image replicas in real containers: an OCI runtime (runc or crun) on the image's unpacked root filesystem.

Vertex runs each replica of a container pool as the image says (ENTRYPOINT/CMD, Env, WorkingDir,
User), the pool's ``command`` replacing the ENTRYPOINT and its ``args`` the CMD, with Vertex's own
environment on top. Here each replica is one ``runc run`` (or ``crun run``) of a bundle made for it
(:func:`vtrain.local.bundle.runtime_spec`):

* the image's rootfs, unpacked once per image digest (:mod:`vtrain.local.rootfs`), shared read-only
  by every replica; what a replica may write is bound in from its own run folder: its ``/tmp``, the
  image's WorkingDir (a copy of it, as each container has its own file system) and the job's output
  directory at the same path as on the host, so AIP_MODEL_DIR and the step reports land where
  local runs put them;
* host networking (no network namespace: the 127.0.0.1 ports of TF_CONFIG work as they are), its own
  PID, IPC and mount namespaces, Docker's default capabilities, no new privileges;
* as root, or rootless in a user namespace that maps this user to root.

The runtime's process is the replica's process for the supervisor; its container is
:class:`Container` (``Proc.container``): signals go to the container's process through the runtime
(``runc kill``, since the container's process leaves runc's process group), and once the runtime
process has ended, ``runc delete --force`` leaves no container behind. Containers left by a vtrain
that was itself killed are deleted at the next run (:func:`sweep`).

Docker or podman, where one answers, run a ``trainer.container`` pool instead (:class:`DockerContainer`,
the argv from :func:`vtrain.local.env.docker_argv`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from vtrain import proctree
from vtrain.errors import BackendError
from vtrain.foreign import printable
from vtrain.local.bundle import host_files, runtime_spec
from vtrain.local.cachefolders import Lease
from vtrain.local.rootfs import Unpacked
from vtrain.userpaths import cache_folder

RUNTIMES = ("runc", "crun")
ENGINES = ("docker", "podman")
_PREFIX = "vtrain-"
_CLONE_NEWNS, _MS_REC, _MS_PRIVATE = 0x00020000, 0x4000, 1 << 18
_probed: dict[tuple[str, str], str | None] = {}


@dataclass(frozen=True)
class Runtime:
    """An OCI runtime that ran a container here: its binary, its state folder and how it runs."""

    name: str  # runc or crun
    path: str
    state: Path  # --root: the runtime's record of the containers vtrain started
    rootless: bool

    def command(self, *args: str) -> list[str]:
        return [self.path, "--root", str(self.state), *args]

    def logged(self, log: Path, *args: str) -> list[str]:
        """`command(*args)` with the runtime's own messages also written to `log`, one JSON object a line (runc's
        and crun's `--log`/`--log-format json`): what the runtime said apart from what the container's process did."""
        options = ["--log", str(log), "--log-format", "json"] if self.name == "runc" else [
            f"--log=file:{log}", "--log-format=json"]
        return [self.path, "--root", str(self.state), *options, *args]


class ContainerHandle(Protocol):
    """What the supervisor does to a replica's container (``Proc.container``)."""

    name: str

    def prepare(self, env: Mapping[str, str]) -> None: ...  # before each start: this start's environment
    def kill(self, sig: int) -> bool: ...  # True when the signal reached the container's process
    def remove(self) -> None: ...  # after each end: nothing of it left
    def pid(self) -> int | None: ...  # its process on this machine, for the frozen-peer check
    def preexec(self) -> Callable[[], None] | None: ...  # run in the runtime's process before it starts
    def start_error(self, returncode: int, last_stderr: str) -> str | None: ...  # why it never started, if so


@dataclass
class Container:
    """One replica's container under an OCI runtime; its bundle folder is in the run folder."""

    runtime: Runtime
    name: str
    bundle: Path
    spec: dict[str, Any]
    overlay: Overlay | None = None  # the writable root: the image's rootfs under this replica's own layer
    _pid: int | None = field(default=None, repr=False)

    def argv(self) -> list[str]:
        return self.runtime.logged(self.runtime_log, "run", "--bundle", str(self.bundle), self.name)

    @property
    def runtime_log(self) -> Path:
        """What the runtime itself said during this start (JSON lines), apart from the container's output."""
        return self.bundle / "runtime.log"

    def prepare(self, env: Mapping[str, str]) -> None:
        """Write the bundle's config.json with this start's environment (the restart count differs); a fresh
        writable layer, as a restarted replica is a new container of the same image."""
        spec = json.loads(json.dumps(self.spec))
        spec["process"]["env"] = [f"{k}={v}" for k, v in env.items()]
        self.bundle.mkdir(parents=True, exist_ok=True)
        self.runtime_log.unlink(missing_ok=True)
        if self.overlay is not None:
            self.overlay.fresh()
        (self.bundle / "config.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
        self._pid = None

    def preexec(self) -> Callable[[], None] | None:
        return self.overlay.mount if self.overlay is not None else None

    def kill(self, sig: int) -> bool:
        done = _quiet(self.runtime.command("kill", self.name, signal.Signals(sig).name))
        return done == 0

    def remove(self) -> None:
        _quiet(self.runtime.command("delete", "--force", self.name))
        self._pid = None

    def start_error(self, returncode: int, last_stderr: str) -> str | None:
        """Why the container never ran its process (the runtime logged an error: no such executable, an
        environment entry without '=', a user the kernel refuses), escaped and bounded; None when it ran."""
        return runtime_error(self.runtime.name, self.runtime_log) if returncode != 0 else None

    def pid(self) -> int | None:
        if self._pid is None:
            with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError):
                done = subprocess.run(self.runtime.command("state", self.name), capture_output=True, text=True,
                                      timeout=10, check=False)
                if done.returncode == 0:
                    self._pid = int(json.loads(done.stdout)["pid"]) or None
        return self._pid


@dataclass
class DockerContainer:
    """A replica under docker (or podman): `docker run --name NAME` copies the values of its -e names."""

    engine: str
    name: str

    def prepare(self, env: Mapping[str, str]) -> None:
        self.remove()  # `run --name` again needs the previous container gone

    def kill(self, sig: int) -> bool:
        return _quiet([self.engine, "kill", "--signal", signal.Signals(sig).name, self.name]) == 0

    def remove(self) -> None:
        _quiet([self.engine, "rm", "-f", self.name], timeout=30)

    def pid(self) -> int | None:
        return None

    def preexec(self) -> Callable[[], None] | None:
        return None

    def start_error(self, returncode: int, last_stderr: str) -> str | None:
        """docker's (podman's) own failure to run the container: exit 125 (the engine), 126 (the command cannot be
        run) or 127 (no such command) with the engine's message, not the container process's exit code."""
        said = last_stderr.strip()
        if returncode in (125, 126, 127) and said.startswith(("docker:", "Error:", "Error response", "podman:")):
            return printable(said, limit=300)
        return None


@dataclass(frozen=True)
class Overlay:
    """A replica's writable root: an overlay of the cached rootfs (lower, never written) and its own upper
    directory in the run folder, mounted in a mount namespace of the runtime's own (made in its process
    before it starts, :meth:`mount`), so the mount ends with the container and none is left behind."""

    lower: Path
    upper: Path
    work: Path
    target: Path

    def fresh(self) -> None:
        for path in (self.upper, self.work):
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
        self.target.mkdir(parents=True, exist_ok=True)

    def mount(self) -> None:
        """In the child, before exec: a private mount namespace, the overlay on `target`. Raises OSError."""
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            raise OSError(ctypes.get_errno(), "cannot make a mount namespace")
        data = f"lowerdir={self.lower},upperdir={self.upper},workdir={self.work}".encode()
        if libc.mount(b"overlay", os.fsencode(self.target), b"overlay", 0, data) != 0:
            raise OSError(ctypes.get_errno(), "cannot mount the overlay")


def overlay_works(lower: Path, scratch: Path) -> bool:
    """Whether this process may mount an overlay of `lower` with its upper layer under `scratch` (root, a
    file system overlayfs accepts as upper, paths without `,` or `:`): tried once, in a child running `true`."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or any(c in str(p) for p in (lower, scratch)
                                                                         for c in ",:"):
        return False
    probe = Overlay(lower, scratch / "upper", scratch / "work", scratch / "merged")
    try:
        probe.fresh()
        true = shutil.which("true") or "/bin/true"
        return subprocess.run([true], preexec_fn=probe.mount, check=False, timeout=30).returncode == 0  # noqa: PLW1509
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


#: The most of a runtime's log read back (its last error is at the end; a start writes a few lines).
_RUNTIME_LOG_LIMIT = 64 << 10


def runtime_error(name: str, log: Path) -> str | None:
    """The last error the OCI runtime `name` logged in `log` (JSON lines: runc's and crun's `--log-format json`; a
    plain line is an error crun met before its options), as one escaped line of at most 300 characters without
    the runtime's "run failed" wrapping; None when it logged none (the container's process ran, whatever its exit)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - _RUNTIME_LOG_LIMIT))
            lines = f.read().splitlines()
    except OSError:
        return None
    said = None
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:  # crun writes an error it meets before reading its options as plain text
            text = line.decode(errors="replace").strip()
            said = text or said
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "fatal", "panic") and entry.get("msg"):
            said = str(entry["msg"])
    if said is None:
        return None
    for wrapping in (f"{name} run failed: ", f"{name} create failed: ", "unable to start container process: "):
        said = said.removeprefix(wrapping)
    return f"{name}: {printable(said, limit=300)}"


def _quiet(argv: Sequence[str], timeout: float = 15) -> int:
    try:
        return subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
                              check=False).returncode
    except (OSError, subprocess.SubprocessError):
        return -1


@dataclass(frozen=True)
class ContainerImage:
    """An unpacked image and the runtime that runs its replicas."""

    image: Unpacked
    runtime: Runtime
    lease: Lease | None = field(default=None, compare=False, repr=False)  # `cache clear` keeps the rootfs meanwhile

    def replica(self, pool: Mapping[str, Any], *, name: str, bundle: Path, workdir: Path, tmp: Path,
                output_dir: Path, job_env: Mapping[str, str], vertex: Mapping[str, str],
                extra_mounts: Sequence[tuple[str, str, bool]] = ()) -> tuple[Container, dict[str, str]]:
        """One replica's container and its environment: the image's Env, the pool's env over it, then what
        Vertex sets (CLUSTER_SPEC, TF_CONFIG, AIP_*, CLOUD_ML_JOB_ID) and PYTHONUNBUFFERED=1. Its root is
        writable as on Vertex (an overlay: :class:`Overlay`); where no overlay can be mounted (rootless, an
        upper file system overlayfs refuses) the rootfs is read-only and only `tmp` (as /tmp) and `workdir`
        (a copy of the image's WorkingDir) are writable. The job's output directory is bound at its own path."""
        image = self.image
        env = {**image.env, **job_env, **vertex, "PYTHONUNBUFFERED": "1"}
        argv = image.argv(pool)
        if not argv:
            raise BackendError(f"image {image.uri} names no command: its config has no Entrypoint or Cmd and the "
                               "pool's containerSpec no command")
        inside = image.workdir
        mounts = host_files()
        overlay = None
        if overlay_works(image.rootfs, bundle / "probe"):
            overlay = Overlay(image.rootfs, bundle / "upper", bundle / "work", bundle / "rootfs")
        else:
            mounts.append((str(tmp), "/tmp", True))
            source = image.inside(inside)
            if inside != "/" and source is not None and source.is_dir():
                try:
                    shutil.copytree(source, workdir, symlinks=True, dirs_exist_ok=True)
                except (OSError, shutil.Error) as err:
                    raise BackendError(f"cannot copy the image's WorkingDir {inside} into {workdir}: {err}") from None
                mounts.append((str(workdir), inside, True))
        mounts.append((str(output_dir), str(output_dir), True))
        mounts.extend(extra_mounts)  # (host path, container path, writable): a prebuilt image's packages
        user = (0, 0) if self.runtime.rootless else image.user()
        spec = runtime_spec(rootfs=overlay.target if overlay else image.rootfs, args=argv, env=env, cwd=inside,
                            mounts=mounts, rootless=self.runtime.rootless, user=user, readonly=overlay is None)
        return Container(self.runtime, name, bundle, spec, overlay), env


# --------------------------------------------------------------------------- which runtime


def docker_engine() -> tuple[str | None, str]:
    """docker (or podman) when one answers: (its binary, ""), else (None, why not). At most a few seconds."""
    why = []
    for engine in ENGINES:
        path = shutil.which(engine)
        if path is None:
            continue
        argv = [path, "version", "--format", "{{.Server.Version}}"] if engine == "docker" else [path, "info"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError) as err:
            why.append(f"{engine}: {err}")
            continue
        if done.returncode == 0:
            return path, ""
        why.append(f"{engine}: {(done.stderr.strip().splitlines() or ['no answer'])[-1][:200]}")
    return None, "; ".join(why) or "neither docker nor podman is installed"


def find_runtime(cache: Path, env: Mapping[str, str] | None = None) -> tuple[Runtime | None, str]:
    """The first of runc, crun (VTRAIN_CONTAINER_RUNTIME names one) that runs a container here, as root or in a
    user namespace; else (None, why not). Each is tried once per process (~0.1 s: a container running `true`)."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux"):
        return None, f"OCI runtimes need Linux (this is {sys.platform})"
    rootless = os.geteuid() != 0
    if rootless and not _user_namespaces():
        return None, "not root, and this kernel lets no user create a user namespace"
    if shutil.which("umoci") is None:
        return None, "umoci (which unpacks images) is not installed: apt-get install umoci"
    names = [env["VTRAIN_CONTAINER_RUNTIME"]] if env.get("VTRAIN_CONTAINER_RUNTIME") else list(RUNTIMES)
    why = []
    for name in names:
        path = shutil.which(name)
        if path is None:
            why.append(f"{name} is not installed")
            continue
        runtime = Runtime(name, path, cache_folder("containers", cache) / "state" / name, rootless)
        key = (path, str(cache))
        if key not in _probed:
            _probed[key] = _probe(runtime, cache)
        failed = _probed[key]
        if failed is None:
            sweep(runtime)
            return runtime, ""
        why.append(f"{name} cannot run a container here: {failed}")
    return None, "; ".join(why)


def _user_namespaces() -> bool:
    try:
        return int(Path("/proc/sys/user/max_user_namespaces").read_text().strip()) > 0
    except (OSError, ValueError):
        return False


def _probe(runtime: Runtime, cache: Path) -> str | None:
    """Run `true` in a container (a rootfs of this machine's /bin/true and the libraries ldd lists); None when
    it worked, else the runtime's last line."""
    rootfs = cache_folder("containers", cache) / "probe" / "rootfs"
    try:
        if not (rootfs / "true").is_file():
            _probe_rootfs(rootfs)
        with tempfile.TemporaryDirectory(prefix="probe-", dir=rootfs.parent) as tmp:
            spec = runtime_spec(rootfs=rootfs, args=["/true"], env={"PATH": "/"}, cwd="/", mounts=[],
                                rootless=runtime.rootless)
            Path(tmp, "config.json").write_text(json.dumps(spec), encoding="utf-8")
            name = f"{_PREFIX}{os.getpid()}-probe"
            runtime.state.mkdir(parents=True, exist_ok=True)
            try:
                done = subprocess.run(runtime.command("run", "--bundle", tmp, name), capture_output=True, text=True,
                                      timeout=30, check=False, stdin=subprocess.DEVNULL)
            finally:
                _quiet(runtime.command("delete", "--force", name))
    except (OSError, subprocess.SubprocessError) as err:
        return str(err)
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:300]


def _probe_rootfs(rootfs: Path) -> None:
    true = Path(shutil.which("true") or "/bin/true").resolve()
    tmp = Path(tempfile.mkdtemp(prefix=".rootfs-", dir=_mkdir(rootfs.parent)))
    try:
        shutil.copy2(true, tmp / "true")
        listed = subprocess.run(["ldd", str(true)], capture_output=True, text=True, timeout=30, check=False).stdout
        for line in listed.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 3 else parts[0] if parts else ""
            if path.startswith("/") and os.path.isfile(path):
                target = tmp / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
        with contextlib.suppress(OSError):
            os.replace(tmp, rootfs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def sweep(runtime: Runtime) -> list[str]:
    """Delete the containers a vtrain that is gone left in `runtime`'s state folder (vtrain killed with
    SIGKILL cannot delete its own); their names hold the pid of the vtrain that started them."""
    try:
        done = subprocess.run(runtime.command("list", "--format", "json"), capture_output=True, text=True,
                              timeout=30, check=False)
        listed = json.loads(done.stdout or "null") or []
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
    gone = []
    for entry in listed if isinstance(listed, list) else []:
        name = str(entry.get("id", "")) if isinstance(entry, dict) else ""
        owner = name[len(_PREFIX):].split("-", 1)[0]
        if name.startswith(_PREFIX) and owner.isdigit() and int(owner) != os.getpid() and proctree.gone(int(owner)):
            _quiet(runtime.command("delete", "--force", name))
            gone.append(name)
    return gone


def container_name(job_id: str, label: str) -> str:
    """`vtrain-PID-JOBID-LABEL`: unique per vtrain process, and tells the sweep whose it was."""
    return f"{_PREFIX}{os.getpid()}-{job_id}-{label}"


__all__ = ["Container", "ContainerHandle", "ContainerImage", "DockerContainer", "Overlay", "Runtime",
           "container_name", "docker_engine", "find_runtime", "host_files", "overlay_works", "runtime_spec", "sweep"]
