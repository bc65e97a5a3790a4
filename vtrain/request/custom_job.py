"""JobConfig → the Vertex AI CustomJob request. Pure: no network, no environment, no file read.

What the trainer's files decide (package URIs, image names) comes in planned
(:class:`vtrain.jobfile.artifacts.Artifacts`, or the package URIs alone); a job that
needs them and is given none is a ValueError, never a scan of the folder.

:func:`build_job_dict` returns the REST body exactly as
``json_format.MessageToDict(aiplatform_v1.CustomJob)`` would write it (camelCase
keys in field-number order, int64 as strings, durations as ``"3600s"``,
defaults omitted), so `render` needs no Google library; the tests prove the two
equal through a strict round trip. :func:`build_job` parses that body into the
real proto, the only step that imports google-cloud-aiplatform.

A `trainer.build` pool runs the image vtrain builds on the pool's base (:meth:`JobConfig.base_image
<vtrain.jobfile.config.JobConfig.base_image>`, the rule the planner reads too), with its entry point said in full
(``python3 -m MODULE``). The image holds no environment of the job's and no arguments: both stay in each pool's
containerSpec, so changing an env value or a pool's args rebuilds nothing. The Reduction Server pool keeps
Google's image.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vtrain import catalog
from vtrain.catalog import capacity
from vtrain.constants import DILOCO_ENV, DILOCO_SYNCER_MODULE, DTENSOR_MESH_ENV, IMAGE_PYTHON, STRATEGY_ENV
from vtrain.jobfile.config import JobConfig, PoolConfig
from vtrain.jobfile.schema import plain_fields

if TYPE_CHECKING:
    from typing import TypeAlias

    from google.cloud.aiplatform_v1 import CustomJob

    from vtrain.jobfile.artifacts import Artifacts

    #: The artifacts' names: planned (images too), or the package URIs alone (given, or staged).
    Planned: TypeAlias = Artifacts | Sequence[str] | None

RESERVATION_KEY = capacity.RESERVATION_KEY
#: Plain Vertex fields: (JobConfig attribute, where the CustomJob REST body holds it), in the order
#: MessageToDict writes them (field-number order), declared on the schema nodes (`rest=`), so a plain
#: field needs no code here. A value left unset (None, False, empty) is left out, as proto3 leaves out defaults.
PLAIN_FIELDS: tuple[tuple[str, str], ...] = plain_fields()


def _composed() -> dict[str, Callable[[JobConfig], Any]]:
    """Plain fields whose request value is composed from the config, not copied: the Experiments
    contexts, whose bare names become full ones once the project is known (None: left out)."""
    from vtrain.request.experiment import experiment_context, run_context

    return {"experiment": experiment_context, "experiment_run": run_context}


def executor_image(config: JobConfig, pool: PoolConfig) -> str:
    """The prebuilt executor image for a pool (its own `image`, else trainer.image): alias → regional URI,
    `tf.` picks by hardware; with trainer.build, the base of the image vtrain builds for the pool."""
    return config.base_image(pool)  # the artifacts planner reads the same rule


def _unplanned(what: str) -> ValueError:
    return ValueError(f"this job's {what} {'is' if what.endswith('image') else 'are'} named by its files: pass the "
                      "planned artifacts (vtrain.plan_artifacts(config)) to build its request")


def trainer_package_uris(config: JobConfig, artifacts: Planned = None) -> list[str]:
    """Where the trainer's packages are (or will be, once `submit` stages them): the job file's own URIs, else
    the given ones, else the planned ones."""
    trainer = config.trainer
    if trainer.build is not None:
        return []  # the trainer is in the image
    if artifacts is not None and isinstance(artifacts, Sequence):
        return list(artifacts)
    if trainer.package is None:
        return list(trainer.package_uris)
    if artifacts is None:
        raise _unplanned("package URIs")
    return list(artifacts.package_uris)


def _image_for(base: str, artifacts: Planned) -> str:
    if artifacts is None or isinstance(artifacts, Sequence):
        raise _unplanned("trainer image")
    return artifacts.image_for(base)


def _env_list(env: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in env.items()]


def _reservation_affinity(config: JobConfig, pool: PoolConfig) -> dict[str, Any] | None:
    """The pool's own reservation, else the job-wide one (never for the Reduction Server's CPU machines)."""
    res = pool.reservation or (config.reservation if pool.role != "reduction_server" else None)
    if res is None:
        return None
    affinity: dict[str, Any] = {"reservationAffinityType": capacity.AFFINITY_ENUM[res.affinity]}
    if res.affinity == "specific" and res.name:
        affinity["key"] = RESERVATION_KEY
        affinity["values"] = [res.name]
    return affinity


def _machine_spec(config: JobConfig, pool: PoolConfig) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineType": pool.machine_type}
    if pool.accelerator:
        spec["acceleratorType"] = pool.accelerator
        spec["acceleratorCount"] = pool.accelerator_count
    if pool.tpu_topology:
        spec["tpuTopology"] = pool.tpu_topology
    affinity = _reservation_affinity(config, pool)
    if affinity is not None:
        spec["reservationAffinity"] = affinity
    if pool.gpu_partition_size:
        spec["gpuPartitionSize"] = pool.gpu_partition_size
    return spec


def _camel(mounts: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """Mount entries in the REST body's words (mount_point → mountPoint), in the proto's field order, which
    the job file's node declares them in."""
    return [{re.sub(r"_([a-z])", lambda m: m[1].upper(), k): v for k, v in m.items()} for m in mounts]


def _pool_spec(config: JobConfig, pool: PoolConfig, package_uris: Sequence[str],
               artifacts: Planned) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "machineSpec": _machine_spec(config, pool),
        "replicaCount": str(int(pool.replicas)),
    }
    if pool.nfs_mounts:
        spec["nfsMounts"] = _camel(pool.nfs_mounts)
    if pool.boot_disk is not None:  # a size alone: the machine's own default type (Hyperdisk-only machines)
        row = catalog.MACHINES.get(pool.machine_type)
        default = row.boot_disk_default if row is not None else catalog.BOOT_DISK_TYPES[0]
        spec["diskSpec"] = {"bootDiskType": pool.boot_disk.type or default, "bootDiskSizeGb": pool.boot_disk.size_gb}
    if pool.role == "reduction_server":
        spec["containerSpec"] = {"imageUri": catalog.reduction_server_image(config.region)}
        return spec
    trainer = config.trainer
    args = list(pool.args if pool.args is not None else trainer.args)
    env = {**trainer.env, **(pool.env or {}), STRATEGY_ENV: config.distribution_strategy}
    syncer = False
    if config.used_diloco is not None:
        env[DILOCO_ENV] = json.dumps(config.used_diloco.settings(), sort_keys=True, separators=(",", ":"))
        syncer = pool.role == "chief"  # pool 0 runs vtrain's syncer, with the trainer's packages and env
        args = [] if syncer else args
    if config.used_dtensor is not None:
        from vtrain.runtime.dtensor_env import format_mesh  # the text runtime.dtensor_mesh() parses

        env[DTENSOR_MESH_ENV] = format_mesh(config.used_dtensor.mesh)
    image = pool.container or trainer.container
    if trainer.build is not None and pool.container is None:  # the image vtrain builds on this pool's base
        module = DILOCO_SYNCER_MODULE if syncer else pool.module or trainer.module
        built: dict[str, Any] = {"imageUri": _image_for(executor_image(config, pool), artifacts),
                                 "command": [IMAGE_PYTHON, "-m", str(module)]}  # its entry point, said in full
        if args:
            built["args"] = args
        built["env"] = _env_list(env)
        spec["containerSpec"] = built
    elif image is not None:
        container: dict[str, Any] = {"imageUri": image.image_uri}
        if syncer:
            container["command"] = ["python3", "-m", DILOCO_SYNCER_MODULE]
        elif image.command:
            container["command"] = list(image.command)
        if args:
            container["args"] = args
        container["env"] = _env_list(env)
        spec["containerSpec"] = container
    else:
        python: dict[str, Any] = {"executorImageUri": executor_image(config, pool)}
        if package_uris:
            python["packageUris"] = list(package_uris)
        python["pythonModule"] = DILOCO_SYNCER_MODULE if syncer else pool.module or trainer.module
        if args:
            python["args"] = args
        python["env"] = _env_list(env)
        spec["pythonPackageSpec"] = python
    if pool.lustre_mounts:
        spec["lustreMounts"] = _camel(pool.lustre_mounts)
    return spec


def _scheduling(config: JobConfig) -> dict[str, Any] | None:
    s = config.scheduling
    out: dict[str, Any] = {}
    if s.timeout_s is not None:
        out["timeout"] = f"{s.timeout_s}s"
    if s.restart_job_on_worker_restart:
        out["restartJobOnWorkerRestart"] = True
    if s.strategy is not None:
        out["strategy"] = capacity.STRATEGY_ENUM[s.strategy]
    if s.disable_retries:
        out["disableRetries"] = True
    if s.max_wait_s is not None:
        out["maxWaitDuration"] = f"{s.max_wait_s}s"
    return out or None


def worker_pool_specs(config: JobConfig, artifacts: Planned = None) -> list[dict[str, Any]]:
    """Pools in Vertex order; an empty middle pool is `{}`, trailing empty pools are dropped."""
    uris = trainer_package_uris(config, artifacts)
    slots: list[dict[str, Any]] = [{}, {}, {}, {}]
    for pool in config.pools():
        slots[pool.index] = _pool_spec(config, pool, uris, artifacts)
    while slots and not slots[-1]:
        slots.pop()
    return slots


def _put(body: dict[str, Any], path: str, value: Any) -> None:
    """Set `value` at a dotted REST path, making the messages on the way (after those already there)."""
    *parents, leaf = path.split(".")
    for name in parents:
        body = body.setdefault(name, {})
    body[leaf] = list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, Mapping) else value


def build_job_dict(config: JobConfig, artifacts: Planned = None) -> dict[str, Any]:
    """The `customJobs.create` REST body, as MessageToDict(CustomJob) writes it; `artifacts` as
    :func:`~vtrain.request.build.build_request` takes them."""
    spec: dict[str, Any] = {"workerPoolSpecs": worker_pool_specs(config, artifacts)}
    scheduling = _scheduling(config)
    if scheduling:
        spec["scheduling"] = scheduling
    body: dict[str, Any] = {"displayName": config.name, "jobSpec": spec}
    composed = _composed()
    for attribute, path in PLAIN_FIELDS:
        value = composed[attribute](config) if attribute in composed else getattr(config, attribute)
        if value:
            _put(body, path, value)
    psc = config.psc_interface
    if psc is not None:  # field 21, the last of CustomJobSpec's
        spec["pscInterfaceConfig"] = {"networkAttachment": psc.network_attachment}
        if psc.dns_peering:
            spec["pscInterfaceConfig"]["dnsPeeringConfigs"] = _camel(psc.dns_peering)
    if config.vertex is not None and (config.vertex.job_spec or config.vertex.worker_pool):
        body["jobSpec"] = _with_passthrough(spec, config.vertex.job_spec, config.vertex.worker_pool)
    return body


def _with_passthrough(spec: dict[str, Any], job_spec: Mapping[str, Any],
                      worker_pool: Mapping[str, Any]) -> dict[str, Any]:
    """`vertex:` merged in: each block as MessageToDict writes it (so int64 are strings, enums names), then
    every key in field-number order, as the whole body would be written. Only a job file with a `vertex:`
    block imports the protos here; its rules have already refused unknown names and fields vtrain sets."""
    import copy

    from google.cloud.aiplatform_v1 import CustomJobSpec, WorkerPoolSpec
    from google.protobuf import json_format

    def canonical(message: Any, fields: Mapping[str, Any]) -> dict[str, Any]:
        pb = message.pb()()
        json_format.ParseDict(dict(fields), pb)
        return json_format.MessageToDict(pb)

    if worker_pool:
        extra = canonical(WorkerPoolSpec, worker_pool)
        for pool in spec["workerPoolSpecs"]:
            if pool:
                _merge(pool, copy.deepcopy(extra))
    if job_spec:
        _merge(spec, canonical(CustomJobSpec, job_spec))
    return _ordered(spec, CustomJobSpec.pb().DESCRIPTOR)


def _merge(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _ordered(value: dict[str, Any], desc: Any) -> dict[str, Any]:
    """`value` with its keys (and its messages' keys) in field-number order, as MessageToDict writes them."""
    fields = {f.json_name: f for f in desc.fields}
    out: dict[str, Any] = {}
    for key in sorted(value, key=lambda k: fields[k].number if k in fields else 1 << 30):
        item, field = value[key], fields.get(key)
        message = field.message_type if field is not None else None
        if message is not None and not message.GetOptions().map_entry and message.full_name.startswith(
                "google.cloud."):
            if isinstance(item, list):
                item = [_ordered(v, message) if isinstance(v, dict) else v for v in item]
            elif isinstance(item, dict):
                item = _ordered(item, message)
        out[key] = item
    return out


def to_proto(body: Mapping[str, Any]) -> CustomJob:
    """Parse a REST body into the real `aiplatform_v1.CustomJob` (strict: unknown fields fail)."""
    from google.cloud.aiplatform_v1 import CustomJob
    from google.protobuf import json_format

    job = CustomJob()
    json_format.ParseDict(dict(body), job._pb)
    return job


def build_job(config: JobConfig, artifacts: Planned = None) -> CustomJob:
    """The CustomJob `submit` sends and `local` runs: a real google.cloud.aiplatform_v1.CustomJob."""
    return to_proto(build_job_dict(config, artifacts))
