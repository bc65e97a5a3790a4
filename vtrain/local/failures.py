"""Why a local job failed, in words: the lines a user reads first, kept apart from the job's machinery."""

from __future__ import annotations

import signal
from collections.abc import Sequence

from vtrain.local.restarts import Proc


def describe_exit(code: int) -> str:
    """A process's end as a person says it: the signal's name for a kill, else the exit code."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def late_peers(members: Sequence[Proc], late: Sequence[Proc], startup_timeout: float) -> str:
    """Why the start-up deadline passed: peers whose server never came up, and peers that stayed frozen."""
    ready = ", ".join(p.label for p in members if p not in late and p.returncode is None and p.popen is not None)
    ready = ready or "no one"
    down, frozen = [p.label for p in late if not p.listening], [p.label for p in late if p.listening]
    within = f"within {startup_timeout:g} s while {ready} waited for it"
    why = [f"{', '.join(down)} did not start its TensorFlow server {within}"] if down else []
    if frozen:
        why.append(f"{', '.join(frozen)} stayed frozen (stopped, e.g. by SIGSTOP: its port accepts, nothing "
                   f"answers) and did not answer {within}")
    return "; ".join(why) + " (TF's initial cluster check has no timeout)"
