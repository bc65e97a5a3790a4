"""The ring: this process's rank in it, and TensorFlow's collective context set up for it, once.

:func:`init` configures the context the way MultiWorkerMirroredStrategy does for a worker: a gRPC server
for this task of the cluster in TF_CONFIG (:mod:`vtrain.horovod.topology`), rank 0 as the collective group
leader and as the coordination service's leader (its heartbeats turn a dead peer into an error instead
of a hang), and device filters so that a task sees only its own devices. It does not start the context:
like Horovod, a script may still pin GPUs and turn on memory growth after ``hvd.init()``; the server
starts with the first tensor the script makes. Ranks name each collective op by an instance key counted
in the order ops are made (:func:`next_key`), as MultiWorkerMirroredStrategy counts its own.

VTRAIN_COLLECTIVE_TIMEOUT bounds the start too: the first tensor waits for every rank to register with the
coordination service, and a rank that never comes (alive but stuck, or failed before its first tensor) fails
that wait after the timeout instead of holding the others for the hour TensorFlow allows by default.
``hvd.shutdown()`` then ``hvd.init()`` reads the environment again (the timeout too), as in Horovod; the
context configured by the first init stays, since TensorFlow's server lives as long as the process.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from vtrain.errors import RuntimeMismatch
from vtrain.horovod.topology import Topology, topology
from vtrain.horovod.unsupported import fail

log = logging.getLogger("vtrain.horovod")

#: One group: every rank. Far from the keys MultiWorkerMirroredStrategy counts from 1.
GROUP_KEY = 0x5EED
_INSTANCE_START = 0x100000


@dataclass
class _State:
    topology: Topology
    timeout: float


_state: _State | None = None
_configured: Topology | None = None  # the ring TensorFlow's context was set up for (once per process)
_next_instance = _INSTANCE_START
_lock = threading.Lock()


# --------------------------------------------------------------------------- init and who am I


def _timeout() -> float:
    from vtrain.runtime.decision import _timeout as collective_timeout

    return collective_timeout(os.environ) or 0.0


def init(comm: Any = None, process_sets: Any = None) -> None:
    """Read the cluster from TF_CONFIG and configure TensorFlow's collectives; a second call does nothing."""
    global _state, _configured
    if comm is not None:
        fail("hvd.init(comm=...)")
    if process_sets:
        fail("process_set=... (a process set)")
    with _lock:
        if _state is not None:
            return
        topo, timeout = topology(os.environ), _timeout()
        if topo.size > 1 and _configured is None:
            _configure(topo, timeout)
            _configured = topo
        elif topo.size > 1 and topo != _configured:
            raise RuntimeMismatch("vtrain.horovod: hvd.init() after hvd.shutdown() found another cluster in "
                                  "TF_CONFIG than the first init; TensorFlow's server cannot move in a process")
        _state = _State(topology=topo, timeout=timeout)
    log.info("vtrain.horovod: rank %d of %d (%s-%d)", topo.rank, topo.size, topo.task_type, topo.task_index)


def _configure(topo: Topology, timeout: float) -> None:
    """Collective ops for this task, set before TensorFlow's context starts (MultiWorkerMirrored's recipe)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import tensorflow_server_pb2
    from tensorflow.python.eager import context

    ctx = context.context()
    me = f"/job:{topo.task_type}/task:{topo.task_index}"
    try:
        ctx.configure_collective_ops(collective_leader=topo.leader, scoped_allocator_enabled_ops=("CollectiveReduce",),
                                     device_filters=(me,))
    except (RuntimeError, ValueError) as err:
        raise RuntimeMismatch(
            f"vtrain.horovod: hvd.init() must come before TensorFlow's first tensor, model or strategy ({err}); "
            "call it first, as Horovod's examples do"
        ) from None
    if ctx.coordination_service is None:
        # CoordinatedJob's module moves between TensorFlow releases; ConfigProto names its type.
        job_type = type(tf.compat.v1.ConfigProto().experimental.coordination_config.coordinated_job_list.add())
        jobs = [job_type(name=job, num_tasks=len(addresses)) for job, addresses in topo.cluster.items()]
        ctx.configure_coordination_service(service_type="standalone", service_leader=topo.leader,
                                           coordinated_jobs=jobs)
    config = ctx.config
    config.experimental.collective_group_leader = topo.leader
    coordination = config.experimental.coordination_config
    if timeout:  # every rank must register within the timeout, or the first tensor fails naming who is missing
        coordination.cluster_register_timeout_in_ms = int(timeout * 1000)
        if "cluster_register_with_barrier" in coordination.DESCRIPTOR.fields_by_name:
            coordination.cluster_register_with_barrier = True
        else:  # TensorFlow before 2.18 (Vertex's tf-cpu.2-17): its registration wait has no bound of its own
            threading.Thread(target=_watch_start, args=(ctx, timeout, topo), name="vtrain-horovod-start",
                             daemon=True).start()
    del config.device_filters[:]
    config.device_filters.append(me)
    server_def = tensorflow_server_pb2.ServerDef(
        cluster=tf.train.ClusterSpec(topo.cluster).as_cluster_def(), default_session_config=config,
        job_name=topo.task_type, task_index=topo.task_index, protocol="grpc", port=topo.port,
    )
    ctx.enable_collective_ops(server_def)


def _watch_start(ctx: Any, timeout: float, topo: Topology) -> None:
    """End this process when its first tensor has waited `timeout` seconds for the other ranks to register.

    TensorFlow before 2.18 waits for every task of the cluster in its context's start, in C++ that holds the GIL
    and that no configuration bounds: no Python code runs until it returns. So this thread keeps a timer of the
    C library's (faulthandler's, which needs no GIL) `timeout` seconds ahead while the start has not begun, and
    stops when it begins (the context holds its lock from the first tensor until the cluster is up): a start held
    that long prints where each thread waited (``ensure_initialized``) and exits 1, as a collective that times
    out fails its rank. The timer is cancelled once the start is done."""
    import faulthandler

    lock = getattr(ctx, "_initialize_lock", None)
    if lock is None:
        return
    log.info("vtrain.horovod: rank %d: TensorFlow waits for every rank's first tensor without a bound; this rank "
             "exits 1 if the others of %s have not all started %g s (VTRAIN_COLLECTIVE_TIMEOUT) after its own",
             topo.rank, sorted(topo.cluster), timeout)
    while not getattr(ctx, "_initialized", True):
        if not lock.locked():
            faulthandler.dump_traceback_later(timeout, exit=True)  # re-armed until the start begins
        time.sleep(0.2)
    faulthandler.cancel_dump_traceback_later()


def state() -> _State:
    if _state is None:
        raise RuntimeMismatch("vtrain.horovod has not been initialized; call hvd.init() first")
    return _state


def is_initialized() -> bool:
    return _state is not None


def shutdown() -> None:
    """Forget the ranks (Horovod's shutdown). TensorFlow's server lives as long as the process."""
    global _state
    _state = None


def size() -> int:
    return state().topology.size


def rank() -> int:
    return state().topology.rank


def local_rank() -> int:
    return state().topology.local_rank


def local_size() -> int:
    return state().topology.local_size


def cross_rank() -> int:
    return state().topology.cross_rank


def cross_size() -> int:
    return state().topology.cross_size


def is_homogeneous() -> bool:
    return True


def mpi_threads_supported() -> bool:
    return False


def mpi_enabled() -> bool:
    return False


def mpi_built() -> bool:
    return False


def gloo_enabled() -> bool:
    return False


def gloo_built() -> bool:
    return False


def nccl_built() -> bool:
    """TensorFlow's own NCCL all-reduce runs GPU tensors (Horovod's NCCL build)."""
    import tensorflow as tf

    return bool(tf.test.is_built_with_cuda())


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def cuda_built() -> bool:
    return nccl_built()


def rocm_built() -> bool:
    return False


# --------------------------------------------------------------------------- instance keys


def next_key() -> int:
    """The next collective instance key; every rank counts the same ops in the same order."""
    global _next_instance
    state()
    with _lock:
        key = _next_instance
        _next_instance += 1
    return key
