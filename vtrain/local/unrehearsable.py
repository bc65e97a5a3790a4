"""What a CustomJob may ask that this machine cannot give: one notice each, never a silent change.

A request someone else wrote (or a job file's passthrough fields) may reserve machines, shape a TPU slice, peer
with a VPC, mount NFS, run as a service account or on Spot VMs. None of it exists on 127.0.0.1: the run goes on
without it, and :func:`vtrain.local.runner.run_job` says so once per field, with what happens here instead. The
Reduction Server pool and a TPU job's missing TPU are said by the plan (:func:`vtrain.local.env.plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: What a CustomJob may ask that this machine cannot give, by where it is in the body: (field, what happens
#: here). The Reduction Server pool and a TPU's lack of a TPU are said by the plan (:func:`vtrain.local.env.plan`).
_SPEC_FIELDS = (
    ("persistentResourceId", "the job runs on a persistent resource; here on this machine's processes"),
    ("network", "the job peers with a VPC network; here replicas talk over 127.0.0.1 and reach what this "
                "machine reaches"),
    ("reservedIpRanges", "IP ranges are reserved for the job; here replicas use 127.0.0.1"),
    ("pscInterfaceConfig", "a Private Service Connect interface is set; here replicas reach what this machine "
                           "reaches"),
    ("serviceAccount", "replicas run as a service account on Vertex; here as you, with your credentials"),
    ("enableWebAccess", "interactive shells (web access) are not opened here"),
    ("enableDashboardAccess", "the dashboard is not served here"),
)
_POOL_FIELDS = (
    ("nfsMounts", "NFS shares are mounted on Vertex; here the paths are not mounted"),
    ("lustreMounts", "Lustre instances are mounted on Vertex; here the paths are not mounted"),
)
_MACHINE_FIELDS = (
    ("reservationAffinity", "machines come from a Compute Engine reservation on Vertex; here from this machine"),
    ("tpuTopology", "a TPU slice's topology has no stand-in here: each replica runs on CPU"),
    ("gpuPartitionSize", "GPUs are partitioned (multi-instance GPU) on Vertex; here each replica gets whole "
                         "GPUs or none"),
)
_SCHEDULING = {
    "SPOT": "Spot VMs can be preempted on Vertex; here nothing preempts unless you inject it "
            "(--fault REPLICA:preempt@WHEN)",
    "FLEX_START": "Dynamic Workload Scheduler waits for capacity on Vertex (maxWaitDuration); here the job starts "
                  "at once",
}


def unrehearsable(body: Mapping[str, Any]) -> list[str]:
    """What this run cannot rehearse of `body`: one notice per field that asks for it, in words."""
    spec = body.get("jobSpec") or {}
    pools = [p for p in spec.get("workerPoolSpecs") or [] if p]
    out = []
    for key, text in _SPEC_FIELDS:
        if spec.get(key):
            out.append(f"{key}: {text}")
    for key, text in _POOL_FIELDS:
        if any(p.get(key) for p in pools):
            out.append(f"{key}: {text}")
    for key, text in _MACHINE_FIELDS:
        if any((p.get("machineSpec") or {}).get(key) for p in pools):
            out.append(f"machineSpec.{key}: {text}")
    strategy = str((spec.get("scheduling") or {}).get("strategy") or "")
    if strategy in _SCHEDULING:
        out.append(f"scheduling.strategy {strategy}: {_SCHEDULING[strategy]}")
    return out


__all__ = ["unrehearsable"]
