"""The Horovod calls vtrain.horovod does not offer, each with why and what to do instead.

A script that reaches one stops at that call with :class:`NotSupported` (also a NotImplementedError),
never trains on with something that only looks like Horovod. The modules resolve these names lazily
(``__getattr__``), so ``hvd.join`` fails where it is called, with the reason, not at import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from vtrain.errors import HorovodUnsupported

#: What an unsupported call raises (a NotImplementedError too); see docs/guides/horovod.md.
NotSupported = HorovodUnsupported


_RING = "vtrain.horovod runs one fixed ring of all chief and worker replicas"

#: name → why it is missing and what to do instead.
REASONS: dict[str, str] = {
    "join": f"{_RING} and every rank must take part in every collective; give each rank the same number "
            "of steps (shard the data evenly, e.g. dataset.shard(hvd.size(), hvd.rank()) and steps_per_epoch)",
    "ProcessSet": f"{_RING}; process sets are not supported",
    "add_process_set": f"{_RING}; process sets are not supported",
    "remove_process_set": f"{_RING}; process sets are not supported",
    "alltoall": "alltoall has no TensorFlow collective op; use allgather and slice",
    "reducescatter": "reducescatter is not implemented; use allreduce and slice",
    "grouped_reducescatter": "reducescatter is not implemented; use allreduce and slice",
    "broadcast_global_variables": "TF1 graph mode (global variables) is not supported; call "
                                  "hvd.broadcast_variables(model.variables, root_rank=0) in TF2",
    "BroadcastGlobalVariablesHook": "TF1 session hooks are not supported; use "
                                    "hvd.broadcast_variables or callbacks.BroadcastGlobalVariablesCallback",
    "SyncBatchNormalization": "synchronised batch normalisation is not implemented; use "
                              "tf.keras.layers.BatchNormalization (per-rank statistics)",
    "PartialDistributedOptimizer": "an optimizer with local (unreduced) layers is not supported; in a custom "
                                   "loop, hvd.PartialDistributedGradientTape(tape, local_layers=...) keeps them",
    "start_timeline": "the Horovod timeline is not available; use TensorFlow's profiler "
                      "(tf.profiler.experimental) or VTRAIN_PROFILE_DIR",
    "stop_timeline": "the Horovod timeline is not available; use TensorFlow's profiler",
    "load_model": "load with tf.keras.models.load_model(path, compile=False), then compile with "
                  "hvd.DistributedOptimizer(your optimizer)",
    "elastic": "elastic Horovod is not supported: a Vertex job keeps its replicas, and a restarted rank "
               "cannot rejoin a running ring (set scheduling.restart_job_on_worker_restart)",
    "run": "horovod.run starts processes itself; on Vertex (and under `vtrain local`) each replica is already "
           "one rank: run the script as the job's module and call train() directly",
    "broadcast_object_fn": "TF1 graph mode (a function for a session) is not supported; call "
                           "hvd.broadcast_object(obj, root_rank) in TF2",
    "BestModelCheckpoint": "the callback of Horovod's Spark estimator (which sets its file path) is not "
                           "provided; use tf.keras.callbacks.ModelCheckpoint(save_best_only=True) on rank 0",
}

#: Arguments of calls that are there, refused with why and what to do instead (the guide lists them too).
ARGUMENTS: dict[str, str] = {
    "hvd.DistributedOptimizer(backward_passes_per_step>1)":
        "local gradient accumulation is not implemented; use 1, or a larger batch",
    "hvd.DistributedOptimizer.register_local_var":
        "local variables of an optimizer (PartialDistributedOptimizer) are not supported; use "
        "hvd.PartialDistributedGradientTape with local_layers",
    "hvd.DistributedOptimizer(a tf.compat.v1.train optimizer)":
        "TF1 tf.compat.v1.train optimizers are not supported: use a tf.keras optimizer or "
        "hvd.DistributedGradientTape",
    "hvd.init(comm=...)":
        "an MPI communicator has no meaning here: the ranks are the job's chief and worker replicas; call "
        "hvd.init() without arguments",
    "process_set=... (a process set)":
        f"{_RING}; process sets are not supported (leave process_set out, or pass hvd.global_process_set)",
    "op=hvd.Adasum": "the Adasum reduction is not implemented; use op=hvd.Average or hvd.Sum",
}


def fail(name: str, detail: str | None = None) -> NoReturn:
    """Stop a script at an unsupported call (a name of REASONS or ARGUMENTS), saying why and what to do."""
    what = f"hvd.{name}" if name in REASONS else name
    raise NotSupported(f"vtrain.horovod: {what} is not supported: {detail or REASONS.get(name) or ARGUMENTS[name]}")


def stub(name: str) -> Callable[..., NoReturn]:
    """A callable that fails with the reason when called (hvd.join, hvd.alltoall, ...)."""

    def unsupported(*_args: Any, **_kwargs: Any) -> NoReturn:
        fail(name)

    unsupported.__name__ = unsupported.__qualname__ = name
    unsupported.__doc__ = f"Not supported by vtrain.horovod: {REASONS[name]}."
    return unsupported


def lookup(module: str, name: str) -> Callable[..., NoReturn]:
    """For a module's ``__getattr__``: the failing stub of a known Horovod name, else AttributeError."""
    if name in REASONS:
        return stub(name)
    raise AttributeError(f"module {module!r} has no attribute {name!r} (vtrain.horovod implements the Horovod "
                         "TF2 API listed in docs/guides/horovod.md)")
