"""What each replica of a local run sees: pure functions from the CustomJob to argv and environment.

Nothing here starts a process, opens a socket or reads ``os.environ``: the job dict (exactly
what ``submit`` sends, :func:`vtrain.request.custom_job.build_job_dict`), a port map and a replica id go in,
an environment comes out. The supervisor (:mod:`vtrain.local`) does the I/O.

Vertex's contract, reproduced here:
  * ``CLUSTER_SPEC`` in every replica: pools ``workerpool0..3`` with ``host:port`` lists, the
    replica's ``task`` ``{type: workerpoolN, index}``, ``environment: cloud`` and ``job`` (the
    CustomJobSpec, as the REST body spells it).
  * ``TF_CONFIG`` only when the job has more than one replica: cluster keys ``chief``,
    ``worker``, ``ps``; the evaluator gets a task but is not in the cluster.
  * ``AIP_MODEL_DIR``/``AIP_CHECKPOINT_DIR``/``AIP_TENSORBOARD_LOG_DIR`` = ``{base}/model/``,
    ``checkpoints/``, ``logs/``; ``CLOUD_ML_JOB_ID``; the pool's own ``env``.
Two pools cannot run here and are handled on purpose: the Reduction Server pool (a
Google-only NCCL service) is left out of the cluster, so training uses plain all-reduce;
container pools run in an OCI runtime (:mod:`vtrain.local.containers`) or under ``docker``
(argv built by :func:`docker_argv`). A DTensor job's chief
and workers are also told how many logical CPU devices their part of the mesh needs
(:func:`dtensor_devices`), as a GPU replica on Vertex brings its GPUs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vtrain import strategies
from vtrain.constants import (
    AIP_OUTPUT_DIRS,
    DILOCO_SYNCER_MODULE,
    DTENSOR,
    DTENSOR_MESH_ENV,
    LOCAL_DEVICES_ENV,
    STRATEGY_ENV,
)
from vtrain.errors import UsageError

#: TensorFlow task type of each Vertex pool index.
POOL_ROLES = ("chief", "worker", "ps", "evaluator")
POOL_KEYS = ("chief", "workers", "parameter_servers", "evaluator")
HOST = "127.0.0.1"
#: Set by Vertex (or by us, standing in for it): never inherited from the developer's shell.
VERTEX_OWNED = ("TF_CONFIG", "CLUSTER_SPEC", "AIP_", "CLOUD_ML_", "CUDA_VISIBLE_DEVICES")
#: The developer's Python set-up must not leak into the isolated environment.
PYTHON_OWNED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__")


@dataclass(frozen=True, order=True)
class Replica:
    """One process: pool index (0 chief, 1 workers, 2 ps, 3 evaluator) and index in the pool."""

    pool: int
    index: int

    @property
    def role(self) -> str:
        return POOL_ROLES[self.pool]

    @property
    def label(self) -> str:
        """The log prefix and file name: chief-0, worker-1, ps-0, evaluator-0."""
        return f"{self.role}-{self.index}"

    @property
    def in_cluster(self) -> bool:
        """Part of TF_CONFIG's cluster (and so listens on its port): all but the evaluator."""
        return self.pool != 3


@dataclass(frozen=True)
class Plan:
    """The job as it will run here: the (maybe shrunk) job dict, its replicas, and what changed."""

    job: dict[str, Any]
    replicas: tuple[Replica, ...]
    notices: tuple[str, ...] = ()

    @property
    def pools(self) -> list[dict[str, Any]]:
        return list(self.job["jobSpec"]["workerPoolSpecs"])

    def pool_spec(self, replica: Replica) -> dict[str, Any]:
        return dict(self.pools[replica.pool])


def is_diloco(p: Plan) -> bool:
    """A DiLoCo job: pool 0 runs vtrain's syncer; the learners never open a TensorFlow server."""
    first = p.pools[0] if p.pools else {}
    spec = first.get("pythonPackageSpec") or first.get("containerSpec") or {}
    return spec.get("pythonModule") == DILOCO_SYNCER_MODULE or DILOCO_SYNCER_MODULE in spec.get("command", [])


def listens(p: Plan, replica: Replica) -> bool:
    """Whether the replica opens its cluster port: TF servers do, DiLoCo learners do not (only the syncer)."""
    return replica.in_cluster and (replica.pool == 0 or not is_diloco(p))


def dtensor_mesh_text(p: Plan) -> str | None:
    """A DTensor job's mesh (``batch=2,model=2``), as the job file sent it to the chief; None otherwise."""
    first = p.pools[0] if p.pools else {}
    env = pool_env(first)
    row = strategies.named(env.get(STRATEGY_ENV, ""))
    if row is None or row.block != DTENSOR or not env.get(DTENSOR_MESH_ENV, "").strip():
        return None
    return env[DTENSOR_MESH_ENV]


def dtensor_devices(p: Plan) -> int | None:
    """Logical devices each DTensor client (chief and workers) needs here: mesh size / clients; None when
    the job is no DTensor job. On Vertex a GPU replica brings its GPUs; here replicas run on CPUs unless
    GPUs are assigned, so each one is told (VTRAIN_LOCAL_DEVICES) how many CPU devices to make."""
    text = dtensor_mesh_text(p)
    if text is None:
        return None
    from vtrain.errors import RuntimeMismatch
    from vtrain.runtime.dtensor_env import mesh_size, parse_mesh

    try:
        size = mesh_size(parse_mesh(text))
    except RuntimeMismatch as err:
        raise UsageError(f"this job's DTensor mesh cannot run: {err}") from None
    clients = sum(1 for r in p.replicas if r.pool in (0, 1))
    if not clients or size % clients:
        raise UsageError(f"the DTensor mesh {text} ({size} devices) cannot be split over the {clients} chief/worker "
                         f"replica(s) this run starts; choose --max-replicas so that it divides {size}")
    return size // clients


def is_reduction_server(pool: Mapping[str, Any]) -> bool:
    image = str((pool.get("containerSpec") or {}).get("imageUri", ""))
    return "/reductionserver" in image


def replica_count(pool: Mapping[str, Any]) -> int:
    return int(pool.get("replicaCount", 0) or 0) if pool else 0


def shrink_counts(counts: Sequence[int], max_replicas: int) -> list[int]:
    """Fit pools into `max_replicas`, keeping every role (one chief, >= 1 of each other pool).

    Spare places go one at a time to the pool that has lost the largest share of its
    replicas (ties: the lower pool, so workers before parameter servers).
    """
    minimum = [min(c, 1) for c in counts]
    if sum(counts) <= max_replicas:
        return list(counts)
    if sum(minimum) > max_replicas:
        raise ValueError(f"needs at least {sum(minimum)} replicas (one per role)")
    out = list(minimum)
    for _ in range(max_replicas - sum(out)):
        open_pools = [i for i, c in enumerate(counts) if out[i] < c]
        best = max(open_pools, key=lambda i: ((counts[i] - out[i]) / counts[i], -i))
        out[best] += 1
    return out


def plan(job: Mapping[str, Any], max_replicas: int | None = None) -> Plan:
    """The replicas to start for a CustomJob body, and a notice for each deliberate difference."""
    body = json.loads(json.dumps(job))  # a deep copy: never mutate the caller's dict
    pools: list[dict[str, Any]] = body["jobSpec"]["workerPoolSpecs"]
    notices: list[str] = []
    runnable = [p if p and not is_reduction_server(p) else {} for p in pools]
    if len(pools) > 2 and is_reduction_server(pools[2]):
        notices.append(
            f"reduction_server: {replica_count(pools[2])} reducer(s) not started (Reduction Server is a "
            "Google-only NCCL service); the job runs with plain all-reduce"
        )
    counts = [replica_count(p) for p in runnable] + [0] * (4 - len(runnable))
    if max_replicas is not None and sum(counts) > max_replicas:
        try:
            new = shrink_counts(counts, max_replicas)
        except ValueError as err:
            roles = ", ".join(POOL_KEYS[i] for i, c in enumerate(counts) if c)
            # A command-line value this job cannot use: a usage error (exit 2), like click's own.
            raise UsageError(f"--max-replicas {max_replicas} is too small: this job {err} ({roles})") from None
        changes = [f"{POOL_KEYS[i]} {counts[i]} → {n}" for i, n in enumerate(new) if counts[i] != n]
        notices.append(f"--max-replicas {max_replicas}: shrank {', '.join(changes)} "
                       f"({sum(counts)} → {sum(new)} replicas)")
        for i, n in enumerate(new):
            if i < len(runnable) and runnable[i]:
                pools[i]["replicaCount"] = str(n)
        counts = new
    replicas = tuple(Replica(p, i) for p in range(4) for i in range(counts[p]))
    the_plan = Plan(job=body, replicas=replicas, notices=tuple(notices))
    devices = dtensor_devices(the_plan)
    if devices is not None:
        clients = sum(1 for r in replicas if r.pool in (0, 1))
        notices.append(f"dtensor: mesh {dtensor_mesh_text(the_plan)} over {clients} replica(s): each makes {devices} "
                       f"logical CPU device(s) ({LOCAL_DEVICES_ENV}={devices}) unless it is given GPUs")
        the_plan = Plan(job=body, replicas=replicas, notices=tuple(notices))
    return the_plan


# --------------------------------------------------------------------------- what Vertex sets


def address(port: int) -> str:
    return f"{HOST}:{port}"


def cluster_spec(p: Plan, ports: Mapping[Replica, int], replica: Replica) -> dict[str, Any]:
    """Vertex's CLUSTER_SPEC: every started pool, this replica's task, and the CustomJobSpec."""
    cluster: dict[str, list[str]] = {}
    for r in p.replicas:
        cluster.setdefault(f"workerpool{r.pool}", []).append(address(ports[r]))
    return {
        "cluster": cluster,
        "environment": "cloud",
        "task": {"type": f"workerpool{replica.pool}", "index": replica.index},
        "job": p.job["jobSpec"],
    }


def tf_config(p: Plan, ports: Mapping[Replica, int], replica: Replica) -> dict[str, Any] | None:
    """TF_CONFIG, or None for a one-replica job (Vertex sets none then)."""
    if len(p.replicas) <= 1:
        return None
    cluster: dict[str, list[str]] = {}
    for r in p.replicas:
        if r.in_cluster:
            cluster.setdefault(r.role, []).append(address(ports[r]))
    return {
        "cluster": cluster,
        "task": {"type": replica.role, "index": replica.index},
        "environment": "cloud",
        "job": p.job["jobSpec"],
    }


def output_env(base: str) -> dict[str, str]:
    """The AIP_* directories under a base output directory, trailing slash as Vertex writes them."""
    base = base.rstrip("/")
    return {name: f"{base}/{folder}/" for name, folder in AIP_OUTPUT_DIRS.items()}


def pool_env(pool: Mapping[str, Any]) -> dict[str, str]:
    """The pool's own env list (trainer env, pool env, the distribution strategy), as a dict."""
    spec = pool.get("pythonPackageSpec") or pool.get("containerSpec") or {}
    return {e["name"]: str(e.get("value", "")) for e in spec.get("env", [])}


def vertex_env(
    p: Plan, replica: Replica, ports: Mapping[Replica, int], output_dir: str, job_id: str
) -> dict[str, str]:
    """Everything Vertex itself sets in a replica (not the pool's env)."""
    env = {"CLUSTER_SPEC": json.dumps(cluster_spec(p, ports, replica)), "CLOUD_ML_JOB_ID": job_id}
    tf = tf_config(p, ports, replica)
    if tf is not None:
        env["TF_CONFIG"] = json.dumps(tf)
    env.update(output_env(output_dir))
    return env


def compose_env(
    host: Mapping[str, str],
    *,
    vertex: Mapping[str, str],
    job: Mapping[str, str],
    venv: str | None = None,
    gpus: str = "",
) -> dict[str, str]:
    """The one merge order, later layers winning:

    1. the host environment, minus what Vertex owns and the developer's Python set-up;
    2. the isolated environment (VIRTUAL_ENV, its bin/ first on PATH) and the replica's GPUs;
    3. the pool's env from the job file (may override 1-2, as it would the image's);
    4. what Vertex sets (CLUSTER_SPEC, TF_CONFIG, AIP_*, CLOUD_ML_JOB_ID), then
       PYTHONUNBUFFERED=1 so logs stream line by line.
    """
    env = {k: v for k, v in host.items() if not k.startswith(VERTEX_OWNED) and k not in PYTHON_OWNED}
    if venv is not None:
        env["VIRTUAL_ENV"] = venv
        env["PATH"] = f"{venv}/bin" + (f":{env['PATH']}" if env.get("PATH") else "")
    env["CUDA_VISIBLE_DEVICES"] = gpus
    env.update(job)
    env.update(vertex)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def gpus_requested(pool: Mapping[str, Any]) -> int:
    machine = pool.get("machineSpec") or {}
    kind = str(machine.get("acceleratorType", ""))
    return int(machine.get("acceleratorCount", 0) or 0) if kind.startswith("NVIDIA_") else 0


def assign_gpus(
    available: Sequence[str], requests: Mapping[Replica, int]
) -> tuple[dict[Replica, str], list[str]]:
    """CUDA_VISIBLE_DEVICES per replica: disjoint slices of the local GPUs when there are enough.

    A replica that asks for none gets "" (a CPU machine sees no GPU). With fewer GPUs than
    asked, each GPU replica gets an equal share, shared round-robin when there are more
    replicas than GPUs; with none, all run on CPU. Returns the map and notices.
    """
    want = {r: n for r, n in sorted(requests.items()) if n > 0}
    out = {r: "" for r in requests}
    if not want:
        return out, []
    total = sum(want.values())
    if not available:
        return out, [f"the job asks for {total} GPU(s); this machine has none: replicas run on CPU"]
    notices: list[str] = []
    ids = list(available)
    if total <= len(ids):
        start = 0
        for r, n in want.items():
            out[r] = ",".join(ids[start:start + n])
            start += n
        return out, notices
    share = max(1, len(ids) // len(want))
    for k, r in enumerate(want):
        first = (k * share) % len(ids)
        out[r] = ",".join(ids[(first + j) % len(ids)] for j in range(min(share, want[r])))
    notices.append(f"the job asks for {total} GPU(s); this machine has {len(ids)}: "
                   f"{'shared' if len(want) > len(ids) else 'split'} across {len(want)} replica(s)")
    return out, notices


# --------------------------------------------------------------------------- what runs


_IMAGE_TF = re.compile(r"/tf-(?:cpu|gpu)\.(\d+)-(\d+)[.:]")


def image_tf_notice(p: Plan, host_tf: str | None) -> str | None:
    """A notice when the prebuilt image's TensorFlow is not the one this machine will run."""
    for pool in p.pools:
        match = _IMAGE_TF.search(str((pool.get("pythonPackageSpec") or {}).get("executorImageUri", "")))
        if match is None:
            continue
        image = f"{match[1]}.{match[2]}"
        if host_tf is None:
            return f"the job's image has TensorFlow {image}; this machine has none installed"
        if ".".join(host_tf.split(".")[:2]) != image:
            return (f"the job's image has TensorFlow {image}; this machine runs {host_tf}: "
                    "local results can differ from Vertex's")
        return None
    return None


def python_argv(python: str, pool: Mapping[str, Any]) -> list[str]:
    """`python -m <module> <args>`, as the prebuilt image runs a Python package."""
    spec = pool["pythonPackageSpec"]
    return [python, "-m", spec["pythonModule"], *spec.get("args", [])]


def docker_argv(
    pool: Mapping[str, Any], name: str, env_names: Sequence[str], mounts: Sequence[str], gpus: str,
    engine: str = "docker",
) -> list[str]:
    """`docker run` (or `podman run`: `engine`) for a container pool: host network (127.0.0.1 ports work), env
    passed by name.

    Values are not on the command line (secrets would show in `ps`): `-e NAME` makes docker
    copy each from its own environment. `command` replaces the image's ENTRYPOINT, as on Vertex.
    """
    spec = pool["containerSpec"]
    argv = [engine, "run", "--rm", "--init", "--name", name, "--network", "host"]
    for m in mounts:
        argv += ["-v", f"{m}:{m}"]
    for n in env_names:
        argv += ["-e", n]
    if gpus:
        argv += ["--gpus", f'"device={gpus}"']
    command = list(spec.get("command", []))
    if command:
        argv += ["--entrypoint", command[0]]
    argv.append(spec["imageUri"])
    return argv + command[1:] + list(spec.get("args", []))


__all__ = [
    "Plan",
    "Replica",
    "assign_gpus",
    "cluster_spec",
    "dtensor_devices",
    "compose_env",
    "docker_argv",
    "image_tf_notice",
    "output_env",
    "plan",
    "pool_env",
    "python_argv",
    "tf_config",
    "vertex_env",
]
