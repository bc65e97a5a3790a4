"""Every process a command started, found and ended: the local stand-in for Vertex ending the VM.

Process groups are not enough. A trainer (or a build backend) that daemonizes (fork, setsid,
fork again, the middle process exits) leaves its group and its session, and the kernel hands
the orphan to init, where nothing vtrain does can see it. Two Linux mechanisms keep it in reach:

* ``PR_SET_CHILD_SUBREAPER`` on the vtrain process: an orphan of any descendant is re-parented
  to vtrain instead of init, so it stays in vtrain's process tree (and vtrain reaps it);
* the environment: every replica carries ``CLOUD_ML_JOB_ID``, which its descendants inherit, so
  a stray is attributed to its job even when one process runs several jobs (the emulator).

A cgroup would hold them more tightly still, but one is rarely delegated to an ordinary user, so
nothing here needs it. On systems without ``/proc`` these functions find nothing, and process
groups remain the only tool. The subreaper flag is process-wide and outlives the call that set
it: an SDK caller that runs a local job adopts its own orphans from then on (documented in
:func:`vtrain.run_local`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

_PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")


@dataclass(frozen=True)
class Proc:
    """One process as /proc shows it; `start` (clock ticks after boot) tells a reused pid apart."""

    pid: int
    ppid: int
    start: int
    zombie: bool


def _read_stat(pid: int) -> Proc | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ")".
    fields = text.rsplit(")", 1)[1].split()
    return Proc(pid=pid, ppid=int(fields[1]), start=int(fields[19]), zombie=fields[0] in ("Z", "X"))


def snapshot() -> dict[int, Proc]:
    """Every process this machine shows, by pid (empty where there is no /proc)."""
    table: dict[int, Proc] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(_PROC):
            if entry.name.isdigit():
                proc = _read_stat(int(entry.name))
                if proc is not None:
                    table[proc.pid] = proc
    return table


def descendants(root: int, table: dict[int, Proc] | None = None) -> list[Proc]:
    """The processes below `root` in the tree, parents before their children."""
    table = snapshot() if table is None else table
    children: dict[int, list[Proc]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc)
    out: list[Proc] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child.pid != root:
                out.append(child)
                todo.append(child.pid)
    return out


def has_env(proc: Proc, name: str, value: str) -> bool:
    """Whether the process's environment (as it started) holds NAME=value; False when unreadable."""
    try:
        raw = (_PROC / str(proc.pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"{name}={value}".encode() in raw.split(b"\0")


def gone(pid: int) -> bool:
    """Whether no process has this pid any more (a temporary file named after it is stale)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    proc = _read_stat(pid)
    return proc is not None and proc.zombie


def frozen(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP, SIGTSTP, a tracer): alive, its sockets accept, nothing
    answers. False where there is no /proc."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return text.rsplit(")", 1)[1].split()[0] in ("T", "t")


def sweep_stale(directory: Path, pattern: re.Pattern[str], min_age: float = 60.0) -> list[Path]:
    """Remove the entries of `directory` whose name `pattern` matches with a dead pid as group 1:
    what a killed vtrain left half-written (it could not clean up after SIGKILL). Entries younger
    than `min_age` seconds are kept: a shared /tmp may hold the work of another pid namespace."""
    removed: list[Path] = []
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            m = pattern.match(entry.name)
            if m and gone(int(m.group(1))) and now - entry.stat(follow_symlinks=False).st_mtime >= min_age:
                path = Path(entry.path)
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(path)
                    else:
                        path.unlink()
                    removed.append(path)
    return removed


def _prctl() -> Callable[..., int] | None:
    """Linux's prctl(2), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def become_subreaper() -> bool:
    """Adopt the orphans of every descendant (Linux); False where the kernel does not offer it."""
    prctl = _prctl()
    return prctl is not None and bool(prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def die_with_parent() -> Callable[[], None] | None:
    """A preexec hook so a child dies with vtrain even if vtrain is SIGKILLed (Linux)."""
    prctl = _prctl()
    if prctl is None:
        return None

    def hook() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return hook


def _same(proc: Proc) -> bool:
    now = _read_stat(proc.pid)
    return now is not None and now.start == proc.start and not now.zombie


def _reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those of `pids` that are our children (adopted orphans)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def end(procs: Iterable[Proc], grace: float) -> None:
    """SIGTERM each process that is still the one seen, SIGKILL what is left after `grace`, reap."""
    live = [p for p in procs if _same(p)]
    for sig in (signal.SIGTERM, signal.SIGCONT):  # SIGCONT: a stopped process handles SIGTERM too
        for p in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, sig)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        _reap(p.pid for p in live)
        live = [p for p in live if _same(p)]
        if live:
            time.sleep(0.05)
    for p in live:
        if _same(p):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0  # SIGKILL is delivered, not waited for: see them go
    while live and time.monotonic() < deadline:
        _reap(p.pid for p in live)
        live = [p for p in live if _same(p)]
        if live:
            time.sleep(0.01)


def sweep(match: Callable[[Proc], bool], grace: float, rounds: int = 5) -> list[int]:
    """End every live descendant of this process that `match` accepts; return their pids.

    The first round gives SIGTERM and `grace`; later rounds catch what those processes started
    (or had started) meanwhile, which the kernel re-parents to us when their parent dies.
    """
    ended: dict[tuple[int, int], int] = {}
    for i in range(rounds):
        found = [p for p in descendants(os.getpid()) if not p.zombie and match(p)]
        if not found:
            break
        end(found, grace if i == 0 else 0.0)
        ended.update({(p.pid, p.start): p.pid for p in found})
    _reap(ended.values())
    return list(ended.values())


# --------------------------------------------------------------------------- commands


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so the same cleanup runs."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def interrupted_by(err: BaseException) -> int:
    """The signal behind a KeyboardInterrupt: SIGTERM when it came from :func:`children_end_with`."""
    return signal.SIGTERM if isinstance(err, _Terminated) else signal.SIGINT


def interruption(err: BaseException) -> tuple[str, int]:
    """(how to say it, the exit status a shell gives a process killed by it): ("Ctrl-C", 130) or
    ("SIGTERM", 143). Every command stopped by a signal exits with that status and says which."""
    signum = interrupted_by(err)
    return ("SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"), 128 + int(signum)


@contextlib.contextmanager
def children_end_with(grace: float = 3.0) -> Iterator[None]:
    """Run a command so that nothing it started outlives it, and SIGTERM cleans up like Ctrl-C.

    SIGTERM raises KeyboardInterrupt (``finally`` blocks remove temporary files, subprocess.run
    kills its child), and on the way out every descendant that was not there before (an orphaned
    build backend, pip's helpers, a trainer's daemon) is ended. Processes already running when
    the command started are left alone: the CLI may run inside a bigger program (CliRunner).
    """
    before = {(p.pid, p.start) for p in descendants(os.getpid())}
    become_subreaper()
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main else None
    try:
        yield
    finally:
        if main:  # a second SIGTERM during the cleanup is the same request: do not abandon it half-way
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            sweep(lambda p: (p.pid, p.start) not in before, grace)
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)


__all__ = ["Proc", "become_subreaper", "children_end_with", "descendants", "die_with_parent", "end", "frozen", "gone",
           "has_env",
           "interrupted_by", "snapshot", "sweep", "sweep_stale"]
