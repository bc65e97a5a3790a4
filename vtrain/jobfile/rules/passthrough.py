"""`vertex: {job_spec, worker_pool}`: raw REST fields for what Vertex AI adds before vtrain has a key for it.

Checked strictly against the installed google-cloud-aiplatform's `aiplatform_v1` protos (CustomJobSpec and
WorkerPoolSpec), the same ones `submit` sends: an unknown name is refused with its path and the nearest field
name, a snake_case name with its camelCase spelling, a value the proto cannot hold with the parser's words.
A field one of vtrain's keys sets is refused too, naming the key: two ways to say one thing would drift, and
a passthrough that overrode vtrain's value would send a job other than the one `validate` checked.
The protos are imported only for a job file that has this block, so `validate` stays fast for the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vtrain.jobfile.config import JobConfig
from vtrain.jobfile.nodes import did_you_mean
from vtrain.jobfile.rules.base import Rules
from vtrain.jobfile.schema import plain_fields
from vtrain.jobfile.yamlpos import PathKey

#: REST fields (dotted, under CustomJobSpec) that a job-file key sets, and the key: the plain fields as their
#: schema nodes declare them (`rest=`), and those the builder composes.
JOB_SPEC_KEYS: dict[str, str] = {
    **{path.removeprefix("jobSpec.").split(".")[0]: key for key, path in plain_fields() if path.startswith("jobSpec.")},
    "workerPoolSpecs": "cluster", "pscInterfaceConfig": "psc_interface", "scheduling.timeout": "scheduling.timeout",
    "scheduling.restartJobOnWorkerRestart": "scheduling.restart_job_on_worker_restart",
    "scheduling.strategy": "scheduling.strategy", "scheduling.disableRetries": "scheduling.disable_retries",
    "scheduling.maxWaitDuration": "scheduling.max_wait",
}
#: The same under WorkerPoolSpec; the task (container or package) is always vtrain's.
WORKER_POOL_KEYS: dict[str, str] = {
    "containerSpec": "trainer / cluster.<pool>.container", "pythonPackageSpec": "trainer / cluster.<pool>.module",
    "replicaCount": "cluster.<pool>.replicas", "nfsMounts": "cluster.<pool>.nfs_mounts",
    "lustreMounts": "cluster.<pool>.lustre_mounts", "diskSpec.bootDiskType": "cluster.<pool>.boot_disk.type",
    "diskSpec.bootDiskSizeGb": "cluster.<pool>.boot_disk.size_gb",
    "machineSpec.machineType": "cluster.<pool>.machine_type",
    "machineSpec.acceleratorType": "cluster.<pool>.accelerator",
    "machineSpec.acceleratorCount": "cluster.<pool>.accelerator_count",
    "machineSpec.tpuTopology": "cluster.<pool>.tpu_topology",
    "machineSpec.reservationAffinity": "cluster.<pool>.reservation",
    "machineSpec.gpuPartitionSize": "cluster.<pool>.gpu_partition_size",
}
_MESSAGES = {"job_spec": ("CustomJobSpec", JOB_SPEC_KEYS), "worker_pool": ("WorkerPoolSpec", WORKER_POOL_KEYS)}


def descriptor(name: str) -> Any:
    """The installed proto's descriptor of CustomJobSpec or WorkerPoolSpec."""
    from google.cloud import aiplatform_v1

    return getattr(aiplatform_v1, name).pb().DESCRIPTOR


def check_passthrough(r: Rules, config: JobConfig) -> None:
    if config.vertex is None:
        return
    for key, (message, owned) in _MESSAGES.items():
        fields = getattr(config.vertex, key)
        if not fields:
            continue
        path = ("vertex", key)
        before = len(r.problems)
        _check_names(r, fields, descriptor(message), path, "", owned)
        if len(r.problems) == before:
            _check_values(r, fields, message, path)


def _check_names(r: Rules, value: Mapping[str, Any], desc: Any, path: PathKey, rest: str,
                 owned: Mapping[str, str]) -> None:
    by_json = {f.json_name: f for f in desc.fields}
    by_name = {f.name: f for f in desc.fields}
    for key, item in value.items():
        where, dotted = (*path, key), f"{rest}{key}"
        field = by_json.get(key)
        if field is None:
            if key in by_name:
                r.add(where, f"write Vertex's camelCase name '{by_name[key].json_name}', not '{key}'")
            else:
                hint = did_you_mean(key, sorted(by_json)) or f" fields: {', '.join(sorted(by_json))}"
                r.add(where, f"{desc.name} has no field '{key}' in the installed google-cloud-aiplatform;{hint}")
            continue
        if dotted in owned:
            r.add(where, f"{dotted} is set by vtrain from `{owned[dotted]}`; use that key instead of "
                         f"vertex.{path[1]}")
            continue
        message = field.message_type
        if message is None or message.GetOptions().map_entry or message.full_name.startswith("google.protobuf."):
            continue
        if field.is_repeated:
            for i, entry in enumerate(item if isinstance(item, list) else []):
                if isinstance(entry, dict):
                    _check_names(r, entry, message, (*where, i), f"{dotted}.", owned)
        elif isinstance(item, dict):
            _check_names(r, item, message, where, f"{dotted}.", owned)


def _check_values(r: Rules, fields: Mapping[str, Any], message: str, path: PathKey) -> None:
    """Every name is known: now whether the proto can hold the values (types, enum names, durations)."""
    from google.cloud import aiplatform_v1
    from google.protobuf import json_format

    for key, value in fields.items():
        try:
            json_format.ParseDict({key: value}, getattr(aiplatform_v1, message).pb()())
        except (json_format.ParseError, ValueError, TypeError, OverflowError, RecursionError) as err:
            words = (str(err).splitlines() or [type(err).__name__])[0]
            r.add((*path, key), f"{message}.{key} cannot hold this value: {words[:300]}")


__all__ = ["JOB_SPEC_KEYS", "WORKER_POOL_KEYS", "check_passthrough", "descriptor"]
