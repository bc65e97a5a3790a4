"""DTensor inside a replica: one call turns the launcher's environment into a device mesh.

    from vtrain import runtime
    mesh = runtime.dtensor_mesh()          # first thing in the trainer, before any other TF work
    # or runtime.dtensor_mesh("batch=2,model=4") / runtime.dtensor_mesh({"batch": 2, "model": 4})

It reads the mesh (argument, else :data:`MESH_ENV`), sets DTENSOR_CLIENT_ID / NUM_CLIENTS / JOB_NAME /
JOBS from TF_CONFIG or CLUSTER_SPEC where they are not set already (one client per chief/worker
replica, at the cluster's own addresses), initialises the accelerator system for this replica's
device type (GPU with NCCL collectives, else CPU with mesh size / clients logical devices, or
VTRAIN_LOCAL_DEVICES), checks that the mesh covers clients x local devices exactly, and returns
the mesh: `create_distributed_mesh` with several clients, `create_mesh` with one.

What was measured with TensorFlow 2.21 (and shapes these helpers): multi-client DTensor cannot shut its
accelerator system down again, so the mesh is made once per process (a second call with the same
mesh returns it; another mesh is an error). Layouts, sharded variables, per-client input and sharded
checkpoints are in :mod:`.dtensor_layouts`; the pure environment logic in :mod:`.dtensor_env`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from vtrain.errors import RuntimeMismatch
from vtrain.runtime.dtensor_env import (
    JOBS_ENV,
    LOCAL_DEVICES_ENV,
    MESH_ENV,
    NUM_CLIENTS_ENV,
    Mesh,
    as_mesh,
    check_size,
    dtensor_env,
    format_mesh,
    local_devices,
    parse_mesh,
)

log = logging.getLogger("vtrain.runtime")

#: NCCL collectives between GPUs (DTensor's default is TF's own ring).
NCCL_ENV = "DTENSOR_GPU_USE_NCCL_COMMUNICATION"

_made: dict[str, Any] = {}  # "mesh" text -> the mesh; "device" -> device type; one per process


def _device_type(tf: Any, asked: str | None) -> str:
    if asked:
        kind = asked.upper()
        if kind not in ("CPU", "GPU", "TPU"):
            raise RuntimeMismatch(f"dtensor_mesh(device_type={asked!r}): expected CPU, GPU or TPU")
        return kind
    return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


def dtensor_mesh(mesh: str | Mapping[str, int] | Any = None, device_type: str | None = None) -> Any:
    """The `tf.experimental.dtensor.Mesh` of this job, the accelerator system initialised for it.

    `mesh`: text (``batch=2,model=4``), a mapping in order, or (name, size) pairs; default: the
    VTRAIN_DTENSOR_MESH variable. `device_type`: CPU | GPU | TPU; default GPU when this replica has
    one, else CPU. Call it before any other TensorFlow work (DTensor must configure the devices).
    Raises :class:`~vtrain.errors.RuntimeMismatch` with what to change when the mesh cannot fit.
    """
    if mesh is None:
        text = os.environ.get(MESH_ENV, "")
        if not text.strip():
            raise RuntimeMismatch(
                f"dtensor_mesh(): no mesh given and {MESH_ENV} is not set; pass one, e.g. "
                "runtime.dtensor_mesh('batch=2,model=4'), or set dtensor.mesh in the job file"
            )
        dims = parse_mesh(text)
    else:
        dims = as_mesh(mesh)
    key = format_mesh(dims)
    if "mesh" in _made:
        if _made["key"] == key and (device_type is None or device_type.upper() == _made["device"]):
            return _made["mesh"]
        raise RuntimeMismatch(
            f"dtensor_mesh({key!r}): this process already initialised DTensor for mesh {_made['key']} on "
            f"{_made['device']}, and multi-client DTensor cannot be re-initialised; make one mesh per process"
        )
    for name, value in dtensor_env(os.environ).items():
        os.environ[name] = value
    import tensorflow as tf
    from tensorflow.experimental import dtensor

    given = os.environ.get(NUM_CLIENTS_ENV, "").strip()
    count = num_clients()  # DTensor's own count: the addresses in DTENSOR_JOBS
    if given and given != str(count):
        raise RuntimeMismatch(f"{NUM_CLIENTS_ENV}={given} but {JOBS_ENV} lists {count} client(s): make them agree")
    kind = _device_type(tf, device_type)
    extra: dict[str, Any] = {}
    if kind == "CPU":
        per_client = local_devices(os.environ, dims, count)
        extra["num_logical_cpu_devices"] = per_client
    else:
        per_client = len(tf.config.list_physical_devices(kind))
        if kind == "GPU":
            os.environ.setdefault(NCCL_ENV, "1")
    if kind != "CPU" and os.environ.get(LOCAL_DEVICES_ENV):
        log.info("vtrain: %s is for CPU runs; a %s mesh uses the %d physical device(s)", LOCAL_DEVICES_ENV, kind,
                 per_client)
    check_size(dims, count, per_client, kind)
    try:
        dtensor.initialize_accelerator_system(kind, **extra)
    except ValueError as err:  # "TensorFlow has already been initialized", ...
        raise RuntimeMismatch(
            f"dtensor_mesh(): DTensor could not initialise {kind} devices ({err}); call runtime.dtensor_mesh() "
            "before any other TensorFlow work in the trainer"
        ) from None
    if count > 1:
        made = dtensor.create_distributed_mesh(list(dims), device_type=kind)
    else:
        made = dtensor.create_mesh(list(dims), device_type=kind)
    log.info(
        "vtrain: DTensor client %s of %d, mesh %s on %d %s device(s) per client",
        os.environ.get("DTENSOR_CLIENT_ID", "0"), count, key, per_client, kind,
    )
    _made.update(mesh=made, key=key, device=kind)
    return made


def client_id() -> int:
    """This process's DTensor client id (0 on a single client); client 0 writes the final model."""
    return int(os.environ.get("DTENSOR_CLIENT_ID", "0") or 0)


def num_clients() -> int:
    """How many DTensor clients there are: the addresses in DTENSOR_JOBS (1 without it), as DTensor counts."""
    jobs = os.environ.get(JOBS_ENV, "").strip()
    return len(jobs.split(",")) if jobs else 1


def mesh_dims(mesh: Any) -> Mesh:
    """((name, size), ...) of a DTensor mesh, in order."""
    return tuple((name, int(mesh.dim_size(name))) for name in mesh.dim_names)


__all__ = ["MESH_ENV", "NCCL_ENV", "client_id", "dtensor_mesh", "mesh_dims", "num_clients"]
