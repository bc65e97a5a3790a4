"""The pure part of DTensor set-up: the mesh text and the DTENSOR_* variables, from the environment.

No TensorFlow here: every branch is table-tested. :mod:`.dtensor` applies what this decides.

The mesh travels to replicas as compact text in :data:`MESH_ENV`, its dimensions in order, the
first one outermost: ``batch=2,model=4`` (names are identifiers, sizes positive integers, no name
twice). DTensor's multi-client runtime reads four variables, derived here from the cluster the
launcher describes (TF_CONFIG, or Vertex's CLUSTER_SPEC when TF_CONFIG is absent): one client per
training replica in chief-then-workers order, each at the address (host:port) the cluster names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vtrain.constants import DTENSOR_MESH_ENV
from vtrain.constants import LOCAL_DEVICES_ENV as LOCAL_DEVICES
from vtrain.errors import RuntimeMismatch
from vtrain.runtime.decision import _tf_config

#: The mesh, e.g. ``batch=2,model=4``; set by the launcher from the job file's `dtensor.mesh`.
MESH_ENV = DTENSOR_MESH_ENV
#: Logical CPU devices per process (tests and `vtrain local` on CPUs); default: mesh size / clients.
LOCAL_DEVICES_ENV = LOCAL_DEVICES
#: What DTensor's runtime reads (tensorflow/dtensor/python/config.py).
CLIENT_ID_ENV = "DTENSOR_CLIENT_ID"
NUM_CLIENTS_ENV = "DTENSOR_NUM_CLIENTS"
JOB_NAME_ENV = "DTENSOR_JOB_NAME"
JOBS_ENV = "DTENSOR_JOBS"
DTENSOR_ENVS = (CLIENT_ID_ENV, NUM_CLIENTS_ENV, JOB_NAME_ENV, JOBS_ENV)
JOB_NAME = "worker"

Mesh = tuple[tuple[str, int], ...]
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse_mesh(text: str) -> Mesh:
    """``"batch=2,model=4"`` -> (("batch", 2), ("model", 4)); strict, with the offending part named."""
    where = f"{MESH_ENV}={text!r}"
    if not text or not text.strip():
        raise RuntimeMismatch(f"{where}: empty; write the mesh as name=size pairs, e.g. batch=2,model=4")
    dims: list[tuple[str, int]] = []
    for part in text.split(","):
        name, eq, size = part.strip().partition("=")
        name, size = name.strip(), size.strip()
        if not eq:
            raise RuntimeMismatch(f"{where}: {part.strip()!r} is not name=size (e.g. batch=2,model=4)")
        if not _NAME.match(name):
            raise RuntimeMismatch(f"{where}: {name!r} is not a dimension name (letters, digits, _; not first a digit)")
        if not size.isdigit() or int(size) < 1:
            raise RuntimeMismatch(f"{where}: the size of {name!r} must be a whole number >= 1, got {size!r}")
        if any(name == seen for seen, _ in dims):
            raise RuntimeMismatch(f"{where}: dimension {name!r} appears twice")
        dims.append((name, int(size)))
    return tuple(dims)


def as_mesh(mesh: str | Mapping[str, int] | Any) -> Mesh:
    """Text, a mapping {name: size} (in order) or pairs, checked the same way as the text."""
    if isinstance(mesh, str):
        return parse_mesh(mesh)
    pairs = list(mesh.items()) if isinstance(mesh, Mapping) else list(mesh)
    bad = [p for p in pairs if not (isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[1], int))]
    if bad or not pairs or any(isinstance(p[1], bool) for p in pairs):
        raise RuntimeMismatch(f"mesh {mesh!r}: expected {{name: size}} or [(name, size), ...], e.g. {{'batch': 2}}")
    return parse_mesh(",".join(f"{name}={size}" for name, size in pairs))


def format_mesh(mesh: Mesh) -> str:
    """The text :func:`parse_mesh` reads: what a launcher puts in :data:`MESH_ENV`."""
    return ",".join(f"{name}={size}" for name, size in mesh)


def mesh_size(mesh: Mesh) -> int:
    size = 1
    for _, n in mesh:
        size *= n
    return size


@dataclass(frozen=True)
class Clients:
    """This process's place among DTensor clients."""

    client_id: int
    num_clients: int
    jobs: tuple[str, ...]  # host:port of every client, client 0 first; () for a single client
    source: str  # what it was derived from, for logs and errors

    def env(self) -> dict[str, str]:
        """The DTENSOR_* values; none for a single client (DTensor's local mode, job `localhost`)."""
        if self.num_clients == 1:
            return {}
        return {CLIENT_ID_ENV: str(self.client_id), NUM_CLIENTS_ENV: str(self.num_clients), JOB_NAME_ENV: JOB_NAME,
                JOBS_ENV: ",".join(self.jobs)}  # fmt: skip


def _cluster_spec(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Vertex's CLUSTER_SPEC as (cluster with TF_CONFIG's task names, task), or ({}, {})."""
    raw = env.get("CLUSTER_SPEC", "").strip()
    if not raw:
        return {}, {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise RuntimeMismatch(f"CLUSTER_SPEC is not valid JSON ({err.msg} at char {err.pos})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cluster", {}), dict):
        raise RuntimeMismatch("CLUSTER_SPEC must be a JSON object with a `cluster` object")
    names = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps", "workerpool3": "evaluator"}
    cluster = {names.get(pool, pool): list(addrs) for pool, addrs in data.get("cluster", {}).items()}
    task = data.get("task") or {}
    return cluster, {"type": names.get(str(task.get("type", "workerpool0")), "chief"), "index": task.get("index", 0)}


def clients(env: Mapping[str, str]) -> Clients:
    """Client id, count and addresses for this replica: chief (or `master`) first, then the workers.

    TF_CONFIG wins when it has a cluster; else CLUSTER_SPEC. Neither (or one replica in all): a
    single client. Parameter servers have no place in a DTensor job (an error); a side-car evaluator
    is no client (it is not counted, and calling this as the evaluator is an error).
    """
    tf_config = _tf_config(env)
    cluster, task, source = tf_config.get("cluster") or {}, tf_config.get("task") or {}, "TF_CONFIG"
    if not cluster:
        cluster, task = _cluster_spec(env)
        source = "CLUSTER_SPEC"
    if not cluster:
        return Clients(0, 1, (), "no TF_CONFIG or CLUSTER_SPEC: one client")
    if cluster.get("ps"):
        raise RuntimeMismatch(
            f"distribution_strategy dtensor: {source} lists ps tasks, which take no part in a DTensor mesh; "
            "give the job only a chief and workers"
        )
    kind = str(task.get("type") or "chief")
    kind = "chief" if kind == "master" else kind
    try:
        index = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise RuntimeMismatch(f"{source}: task index {task.get('index')!r} is not a number") from None
    chiefs = list(cluster.get("chief", [])) + list(cluster.get("master", []))
    jobs = tuple(str(a) for a in chiefs + list(cluster.get("worker", [])))
    if kind not in ("chief", "worker"):
        raise RuntimeMismatch(
            f"distribution_strategy dtensor: this task is {kind!r}, not one of the mesh's clients (the chief "
            "and workers); evaluate with a single-client mesh of its own: runtime.dtensor_mesh() with "
            "TF_CONFIG and CLUSTER_SPEC removed from its environment"
        )
    client_id = index if kind == "chief" else len(chiefs) + index
    if kind == "chief" and index >= len(chiefs) or kind == "worker" and index >= len(cluster.get("worker", [])):
        raise RuntimeMismatch(f"{source}: task {kind}-{index} is not in its cluster ({len(jobs)} chief/worker tasks)")
    bad = [a for a in jobs if not re.fullmatch(r"[^\s:,]+:\d+|\[[0-9A-Fa-f:.]+\]:\d+", a)]
    if bad:
        raise RuntimeMismatch(f"{source}: cluster address(es) {', '.join(map(repr, bad))} are not host:port")
    if len(jobs) == 1:
        return Clients(0, 1, (), f"{source}: one chief/worker task")
    return Clients(client_id, len(jobs), jobs, f"{source}: {kind}-{index} of {len(jobs)} chief/worker tasks")


def dtensor_env(env: Mapping[str, str]) -> dict[str, str]:
    """The DTENSOR_* values to set: derived from the cluster, minus those the environment already sets.

    Set ones win (a launcher or user who set them knows better); a partial set is filled in from the
    derivation, and a set DTENSOR_NUM_CLIENTS that disagrees with the cluster is an error.
    """
    given = {k: env[k] for k in DTENSOR_ENVS if env.get(k, "").strip()}
    if len(given) == len(DTENSOR_ENVS):
        return {}  # all set by hand: theirs, whatever the cluster says
    derived = clients(env).env()
    if given and not derived:
        return {}  # all set by hand, or set for a cluster this environment does not describe: theirs
    if NUM_CLIENTS_ENV in given and given[NUM_CLIENTS_ENV] != derived[NUM_CLIENTS_ENV]:
        raise RuntimeMismatch(
            f"{NUM_CLIENTS_ENV}={given[NUM_CLIENTS_ENV]} is set but the cluster has {derived[NUM_CLIENTS_ENV]} "
            f"chief/worker task(s); set all of {', '.join(DTENSOR_ENVS)} or none"
        )
    return {k: v for k, v in derived.items() if k not in given}


def local_devices(env: Mapping[str, str], mesh: Mesh, num_clients: int) -> int:
    """Devices each client needs: VTRAIN_LOCAL_DEVICES when set, else mesh size / clients (must divide)."""
    raw = env.get(LOCAL_DEVICES_ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise RuntimeMismatch(f"{LOCAL_DEVICES_ENV}={raw!r} must be a whole number >= 1")
        return int(raw)
    size = mesh_size(mesh)
    if size % num_clients:
        raise RuntimeMismatch(
            f"mesh {format_mesh(mesh)} has {size} devices, which {num_clients} clients cannot split evenly"
        )
    return size // num_clients


def check_size(mesh: Mesh, num_clients: int, per_client: int, device_type: str) -> None:
    """The mesh must cover exactly clients x devices per client."""
    if mesh_size(mesh) != num_clients * per_client:
        raise RuntimeMismatch(
            f"mesh {format_mesh(mesh)} has {mesh_size(mesh)} devices, but {num_clients} client(s) x "
            f"{per_client} {device_type} device(s) per client = {num_clients * per_client}; change the "
            "mesh or the number of replicas/accelerators"
        )
