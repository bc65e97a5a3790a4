"""Why a local job failed, in words: the lines a user reads first, kept apart from the job's machinery."""

from __future__ import annotations

import signal
from collections.abc import Sequence

from vtrain import proctree
from vtrain.local.restarts import Proc


def describe_exit(code: int) -> str:
    """A process's end as a person says it: the signal's name for a kill, else the exit code."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def frozen(p: Proc) -> bool:
    """Whether the replica's process is stopped: the container's own process for a container replica."""
    inside = p.container.pid() if p.container is not None else None
    return p.popen is not None and proctree.frozen(inside or p.popen.pid)


def startup_state(members: Sequence[Proc], now: float, first_listen: float | None, startup_timeout: float,
                  restarted: bool = False) -> tuple[bool, str | None]:
    """The start-up window's state: (still starting, why the deadline passed, or None).

    Still starting while a member is not up and answering: its server not listening, frozen, held back by a late
    fault (not started: its deadline counts from its own start), or, once a member was `restarted`, finished
    (exit 0) while the restarted peer forms the cluster again, which it never rejoins. Once a member's server is
    up, each of those past `startup_timeout` (from the first listen, or from its own later start) fails the job:
    TF's first contact waits for every member and a peer that will not come makes it wait to the end."""
    late = [p for p in members if (p.returncode is None and (not p.listening or frozen(p)))
            or (restarted and p.returncode == 0 and not p.stopped)]  # fmt: skip
    overdue = [p for p in late if p.popen is not None and first_listen is not None
               and now - max(first_listen, p.started) >= startup_timeout]  # fmt: skip
    return bool(late), late_peers(members, overdue, startup_timeout) if overdue else None


def late_peers(members: Sequence[Proc], late: Sequence[Proc], startup_timeout: float) -> str:
    """Why the start-up deadline passed: peers whose server never came up, peers that stayed frozen, and peers
    that had finished while the others formed the cluster again."""
    ready = ", ".join(p.label for p in members if p not in late and p.returncode is None and p.popen is not None)
    ready = ready or "no one"
    finished = [p.label for p in late if p.returncode == 0]
    down = [p.label for p in late if not p.listening and p.returncode is None]
    stopped = [p.label for p in late if p.listening and p.returncode is None]
    within = f"within {startup_timeout:g} s while {ready} waited for it"
    why = [f"{', '.join(down)} did not start its TensorFlow server {within}"] if down else []
    if stopped:
        why.append(f"{', '.join(stopped)} stayed frozen (stopped, e.g. by SIGSTOP: its port accepts, nothing "
                   f"answers) and did not answer {within}")
    if finished:
        why.append(f"{', '.join(finished)} had finished (exit 0) and cannot rejoin the cluster {ready} formed again "
                   f"after a restart; {ready} waited {startup_timeout:g} s for it (on Vertex it would wait until "
                   "TensorFlow's registration timeout)")
    return "; ".join(why) + " (TF's initial cluster check has no timeout)"
