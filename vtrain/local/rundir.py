"""Where a local run keeps its files, and which live run owns an output directory.

    OUTPUT/                    the base output dir, where the user said (AIP_MODEL_DIR = OUTPUT/model/ …)
      vtrain-local/
        lock                   flock'ed by the live run that writes OUTPUT/model, checkpoints, logs
        latest -> JOB_ID       the run started last
        JOB_ID/                one folder per run, never shared: job.json, job.log, chief-0.log …,
                               result.json, work/chief-0/ (the replicas' working dirs; kept with --keep)

Two runs writing one model directory would corrupt each other's checkpoints, so a second live
run on the same output directory is refused with the holder's job id and pid. The lock is an
flock on an open file: the kernel drops it when its process dies, so a killed run never leaves
a stale lock behind. Each run's own files live under its job id, so no run's cleanup can touch
another's logs or results.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from vtrain.constants import LOCAL_RUNS_DIR
from vtrain.errors import BackendError

LOCK = "lock"
LATEST = "latest"


@dataclass
class OutputClaim:
    """This run's hold on an output directory: released when the run ends (or its process dies)."""

    output_dir: Path
    job_id: str
    _file: IO[str] | None

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


def runs_dir(output_dir: Path) -> Path:
    return output_dir / LOCAL_RUNS_DIR


def _holder(lock: IO[str]) -> str:
    lock.seek(0)
    try:
        who = json.loads(lock.read() or "{}")
        return f"job {who['job']} (pid {who['pid']}, started {who['started']})"
    except (ValueError, KeyError, TypeError):
        return "another run"


def claim(output_dir: Path, job_id: str) -> OutputClaim:
    """Hold `output_dir` for this run, or refuse when another live run holds it."""
    runs = runs_dir(output_dir)
    try:
        runs.mkdir(parents=True, exist_ok=True)
        lock = open(runs / LOCK, "a+", encoding="utf-8")  # noqa: SIM115 - held for the run's life
    except OSError as err:
        raise BackendError(f"cannot write the output directory {output_dir}: {err.strerror or err}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _holder(lock)
        lock.close()
        raise BackendError(f"output directory {output_dir} is in use by {holder}, which writes its model "
                           "and checkpoints there; wait for it to end, or pass --output-dir to run this "
                           "job elsewhere") from None
    lock.seek(0)
    lock.truncate()
    lock.write(json.dumps({"job": job_id, "pid": os.getpid(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}))
    lock.flush()
    return OutputClaim(output_dir, job_id, lock)


def new_run_dir(output_dir: Path, job_id: str) -> Path:
    """This run's own folder (created empty: a job id is never reused), and `latest` pointing to it."""
    runs = runs_dir(output_dir)
    run_dir = runs / job_id
    try:
        run_dir.mkdir()
    except FileExistsError:
        raise BackendError(f"{run_dir} already exists: job id {job_id} was used before in this output "
                           "directory") from None
    except OSError as err:
        raise BackendError(f"cannot write the output directory {output_dir}: {err.strerror or err}") from None
    link = runs / f".{LATEST}.{job_id}"
    with contextlib.suppress(OSError):  # a convenience: a filesystem without symlinks just lacks it
        link.symlink_to(job_id)
        os.replace(link, runs / LATEST)
    with contextlib.suppress(OSError):
        link.unlink()
    return run_dir


__all__ = ["LATEST", "LOCK", "OutputClaim", "claim", "new_run_dir", "runs_dir"]
