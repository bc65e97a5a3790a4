"""How many times this replica was restarted, and which attempt of the job this is.

`vtrain local` says so in VTRAIN_RESTART_COUNT and VTRAIN_JOB_ATTEMPT. Vertex AI says neither, so
there each start is counted in a small ledger under AIP_CHECKPOINT_DIR, keyed by CLOUD_ML_JOB_ID and
the task: the count survives the restart because the checkpoint directory does. Standard library
at import; TensorFlow (tf.io.gfile, for gs://) only when the ledger is used.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Mapping
from functools import cache

from vtrain.constants import JOB_ATTEMPT_ENV, RESTART_COUNT_ENV
from vtrain.runtime.decision import _role

log = logging.getLogger("vtrain.runtime")
LEDGER_DIR = ".vtrain-starts"


def _int_env(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    return int(raw) if raw.isdigit() else None


def job_attempt(env: Mapping[str, str] | None = None) -> int:
    """1 for the first run of the job, n+1 after n whole-job retries (VTRAIN_JOB_ATTEMPT)."""
    return _int_env(os.environ if env is None else env, JOB_ATTEMPT_ENV) or 1


@cache
def restart_count() -> int:
    """How many times this replica was restarted (once per process: the ledger counts this start)."""
    given = _int_env(os.environ, RESTART_COUNT_ENV)
    if given is not None:
        return given
    job_id, base = os.environ.get("CLOUD_ML_JOB_ID", ""), os.environ.get("AIP_CHECKPOINT_DIR", "")
    if not job_id or not base:
        return 0
    task_type, task_index = _role(os.environ)[:2]
    name = f"{job_id}-{task_type}-{task_index}"
    path = posixpath.join(base, LEDGER_DIR, name) if "://" in base else os.path.join(base, LEDGER_DIR, name)
    return _count_start(path)


def _count_start(path: str) -> int:
    """Starts recorded at `path` before this one; records this one. Best effort: 0 if unwritable."""
    import tensorflow as tf

    try:
        before = int(tf.io.gfile.GFile(path).read().strip() or 0) if tf.io.gfile.exists(path) else 0
        tf.io.gfile.makedirs(posixpath.dirname(path) if "://" in path else os.path.dirname(path))
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(f"{before + 1}\n")
        return before
    except (tf.errors.OpError, ValueError) as err:
        log.warning("vtrain: cannot count restarts in %s (%s)", path, err)
        return 0
