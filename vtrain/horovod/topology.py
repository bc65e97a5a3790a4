"""Who this process is in the Horovod sense, read from the cluster Vertex describes (pure: no TensorFlow).

Horovod numbers the processes of a job 0..size-1 and starts one per GPU. On Vertex AI a replica is a
machine that runs one process, so vtrain.horovod maps one replica to one Horovod rank: the chief (pool 0)
is rank 0 and the workers (pool 1) follow in their index order, as TF_CONFIG lists them. Every rank is
alone on its machine, so ``local_rank`` is 0 and ``local_size`` 1, and ``cross_rank``/``cross_size`` equal
``rank``/``size``: a script's ``gpus[hvd.local_rank()]`` is the replica's one GPU (the job file's rules
ask for at most one GPU per chief/worker replica under `distribution_strategy: horovod`). Under
`vtrain local` the replicas share a host but each gets its own CUDA_VISIBLE_DEVICES, so the same holds.

A job with one replica has no TF_CONFIG (Vertex sets it only for more than one): size 1, rank 0, and
every collective is the identity.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from vtrain.errors import RuntimeMismatch

#: The cluster jobs that train; TF_CONFIG's older `master` is the chief.
_RING_JOBS = ("chief", "worker")


@dataclass(frozen=True)
class Topology:
    """This process's place in the ring, and the cluster the collectives run over."""

    rank: int
    size: int
    task_type: str  # chief | worker ("local" without TF_CONFIG)
    task_index: int
    cluster: dict[str, list[str]]  # {"chief": [host:port], "worker": [...]}; {} for one process

    @property
    def local_rank(self) -> int:
        return 0

    @property
    def local_size(self) -> int:
        return 1

    @property
    def cross_rank(self) -> int:
        return self.rank

    @property
    def cross_size(self) -> int:
        return self.size

    @property
    def leader(self) -> str:
        """The task that resolves collective groups (and leads the coordination service): rank 0."""
        job = "chief" if self.cluster.get("chief") else "worker"
        return f"/job:{job}/replica:0/task:0"

    @property
    def port(self) -> int:
        """The port of this task's own address in the cluster (where its gRPC server listens)."""
        address = self.cluster[self.task_type][self.task_index]
        return int(address.rsplit(":", 1)[1])


def _load(raw: str, name: str) -> dict[str, object]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise RuntimeMismatch(f"{name} is not valid JSON ({err.msg} at char {err.pos})") from None
    if not isinstance(data, dict):
        raise RuntimeMismatch(f"{name} must be a JSON object")
    return data


def _addresses(cluster: Mapping[str, object], job: str) -> list[str]:
    found = cluster.get(job, [])
    if not isinstance(found, list) or not all(isinstance(a, str) and ":" in a for a in found):
        raise RuntimeMismatch(f"TF_CONFIG's cluster.{job} must be a list of host:port addresses")
    return list(found)


def topology(env: Mapping[str, str]) -> Topology:
    """The rank, size and cluster from TF_CONFIG (CLUSTER_SPEC's task when there is none)."""
    raw = env.get("TF_CONFIG", "").strip()
    if not raw:
        return Topology(rank=0, size=1, task_type="local", task_index=0, cluster={})
    data = _load(raw, "TF_CONFIG")
    cluster = data.get("cluster") or {}
    task = data.get("task") or {}
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise RuntimeMismatch("TF_CONFIG must hold a `cluster` object and a `task` object")
    if "master" in cluster:
        cluster = {("chief" if k == "master" else k): v for k, v in cluster.items()}
    kind = "chief" if task.get("type") == "master" else str(task.get("type", ""))
    try:
        index = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise RuntimeMismatch(f"TF_CONFIG's task.index must be a number, not {task.get('index')!r}") from None
    if cluster.get("ps"):
        raise RuntimeMismatch("vtrain.horovod: TF_CONFIG lists parameter servers, which a Horovod ring has no "
                              "place for; remove cluster.parameter_servers from the job file")
    if kind not in _RING_JOBS:
        raise RuntimeMismatch(f"vtrain.horovod: this replica is a {kind or 'task without a type'} "
                              f"({kind}-{index}), not part of the training ring (chief and workers); "
                              "an evaluator must not call hvd.init()")
    ring = {job: _addresses(cluster, job) for job in _RING_JOBS if cluster.get(job)}
    chiefs = len(ring.get("chief", []))
    if chiefs > 1:
        raise RuntimeMismatch(f"TF_CONFIG lists {chiefs} chief tasks; Vertex runs exactly one")
    if not 0 <= index < len(ring.get(kind, [])):
        raise RuntimeMismatch(f"TF_CONFIG's task {kind}-{index} is not in its cluster.{kind}")
    rank = index if kind == "chief" else chiefs + index
    size = chiefs + len(ring.get("worker", []))
    return Topology(rank=rank, size=size, task_type=kind, task_index=index, cluster=ring)
