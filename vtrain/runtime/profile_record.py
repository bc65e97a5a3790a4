"""The runtime profile's file: where a replica writes what it measured, its format, and its reader.

A rehearsal (`vtrain local`, or a first short job on Vertex) measures the trainer as it really is, so
`vtrain estimate --from-run` can size the cluster from measurements instead of typed guesses. Each
replica writes one JSON object (:data:`PROFILE_VERSION` 1)::

    {"version": 1, "replica": "chief-0", "job_id": "...", "config_hash": "...", "complete": true,
     "strategy": "multi_worker_mirrored", "replicas_in_sync": 3, "device": "cpu", "precision": "float32",
     "parameters": {"trainable": 161, "non_trainable": 0, "by_dtype": {"float32": {"count": 161, "bytes": 644}}},
     "gradient_bytes": 644, "exchange": {...}, "optimizer": {"name": "SGD", "slot_bytes": 0, "slots_per_param": 0},
     "activation_bytes_per_example": 68, "examples_per_step": 64, "memory": {...},
     "steps": {"count": 40, "warmup": 4, "median_s": ..., "p90_s": ..., "input_wait_share": ..., ...},
     "flops": {"per_step": ..., "per_example": ..., "method": "...", "note": "..."}}

Where (:func:`profile_dir`): VTRAIN_PROFILE_DIR when set (the user's choice, or "0"/"off" to write
nothing); else, under the base output directory (the parent of AIP_MODEL_DIR), the local run's own
folder ``vtrain-local/JOB_ID/profile/`` when `vtrain local` made it, or ``vtrain-profile/JOB_ID/`` on
Vertex. ``config_hash`` is :func:`shape_hash` of the CustomJobSpec the replica got in CLUSTER_SPEC,
so the advisor can tell a profile of this job file from one of another.

Standard library only: it ships inside replicas, and `vtrain estimate` reads profiles without TensorFlow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import posixpath
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from vtrain.constants import LOCAL_RUNS_DIR, MIN_TIMED_STEPS, PROFILE_FOLDER, PROFILE_VERSION

PROFILE_DIR_ENV = "VTRAIN_PROFILE_DIR"
VERTEX_PROFILE_DIR = "vtrain-profile"
#: Steps timed before the median counts: tracing, the first collectives and the input's warm-up.
MIN_WARMUP = 2
_OFF = ("0", "off", "false", "no")
_POOL_KEYS = ("machineSpec", "replicaCount")
_SPEC_KEYS = ("pythonPackageSpec", "containerSpec")
_CODE_KEYS = ("executorImageUri", "pythonModule", "imageUri", "command", "args")


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _camel_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {_camel(str(k)): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def shape_hash(job_spec: Mapping[str, Any] | None) -> str | None:
    """16 hex digits over what decides the measurements: each pool's machine, replicas, module or image
    and args. Package URIs, env and output directories are left out: a local rehearsal stages the
    trainer elsewhere than a submit would, and must still match its job file. Vertex's CLUSTER_SPEC
    may spell keys in snake_case; both spellings hash alike."""
    if not isinstance(job_spec, Mapping):
        return None
    spec = _camel_keys(job_spec)
    pools = []
    for pool in spec.get("workerPoolSpecs") or []:
        shape: dict[str, Any] = {k: pool[k] for k in _POOL_KEYS if k in pool}
        shape["replicaCount"] = str(shape.get("replicaCount", "")) if pool else ""
        for key in _SPEC_KEYS:
            if isinstance(pool.get(key), Mapping):
                shape[key] = {k: pool[key][k] for k in _CODE_KEYS if k in pool[key]}
        pools.append(shape if pool else {})
    text = json.dumps(pools, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def job_spec_from_env(env: Mapping[str, str]) -> Mapping[str, Any] | None:
    """The CustomJobSpec Vertex (and `vtrain local`) put in CLUSTER_SPEC's `job`, or None."""
    try:
        job = json.loads(env.get("CLUSTER_SPEC", "") or "{}").get("job")
        spec = json.loads(job) if isinstance(job, str) else job
    except (ValueError, AttributeError, RecursionError):  # RecursionError: JSON nested past the parser's depth
        return None
    return spec if isinstance(spec, Mapping) else None


def _join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if "://" in base else os.path.join(base, *parts)


def profile_dir(env: Mapping[str, str] | None = None) -> str | None:
    """Where this replica's profile goes; None: nowhere (no output directory, or turned off)."""
    env = os.environ if env is None else env
    given = env.get(PROFILE_DIR_ENV, "").strip()
    if given.lower() in _OFF:
        return None
    if given:
        return given
    model_dir = env.get("AIP_MODEL_DIR", "").rstrip("/")
    job_id = env.get("CLOUD_ML_JOB_ID", "").strip()
    if not model_dir or not job_id or "/" in job_id:
        return None
    base = posixpath.dirname(model_dir) if "://" in model_dir else os.path.dirname(model_dir)
    local_run = os.path.join(base, LOCAL_RUNS_DIR, job_id)
    if "://" not in base and os.path.isdir(local_run):
        return os.path.join(local_run, PROFILE_FOLDER)
    return _join(base, VERTEX_PROFILE_DIR, job_id)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between the sorted values."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def warmup_steps(count: int) -> int:
    """Steps left out at the start: at least MIN_WARMUP, a tenth of a long run."""
    return max(MIN_WARMUP, count // 10)


def step_stats(durations: Sequence[float], waits: Sequence[float] | None = None) -> dict[str, Any]:
    """Median and p90 after warm-up, and the share of step time spent waiting for input (None: unknown)."""
    warm = warmup_steps(len(durations))
    timed = list(durations[warm:])
    out: dict[str, Any] = {"count": len(durations), "warmup": warm, "timed": len(timed),
                           "median_s": None, "p90_s": None, "input_wait_share": None}  # fmt: skip
    if len(timed) < MIN_TIMED_STEPS:
        return out
    out["median_s"] = percentile(timed, 0.5)
    out["p90_s"] = percentile(timed, 0.9)
    if waits is not None and len(waits) == len(durations):
        total = sum(timed)
        out["input_wait_share"] = sum(waits[warm:]) / total if total > 0 else None
    return out


def write_profile(directory: str, replica: str, record: Mapping[str, Any]) -> str:
    """Write `record` as DIR/REPLICA.json (atomically on a local disk; tf.io.gfile for gs://)."""
    text = json.dumps({"version": PROFILE_VERSION, **record}, indent=2, sort_keys=False) + "\n"
    if "://" in directory:
        import tensorflow as tf

        path = posixpath.join(directory, f"{replica}.json")
        tf.io.gfile.makedirs(directory)
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(text)
        return path
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{replica}.json")
    fd, tmp = tempfile.mkstemp(prefix=".profile-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


__all__ = ["MIN_TIMED_STEPS", "MIN_WARMUP", "PROFILE_DIR_ENV", "PROFILE_FOLDER", "PROFILE_VERSION",
           "VERTEX_PROFILE_DIR", "job_spec_from_env", "percentile", "profile_dir", "shape_hash", "step_stats",
           "warmup_steps", "write_profile"]
