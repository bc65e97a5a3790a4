"""The distribution strategies, one row each: everything that differs between them, in one table.

The job file's rules, the request builder, the runtime inside a replica, `vtrain local` and the
advisor all read a strategy's row instead of comparing its name: adding a strategy is adding a row
(and, where it builds something new, the builder its ``builds`` names). A test holds that no
module outside this one compares ``distribution_strategy`` with a literal.

Imports nothing of vtrain but :mod:`vtrain.constants`: it ships to replicas with :mod:`vtrain.runtime`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vtrain.constants import DILOCO, DILOCO_ENV, DTENSOR, DTENSOR_MESH_ENV, HOROVOD, STRATEGIES

#: How many machines (chief + workers) a strategy trains on: "one" (the chief alone), "many"
#: (a cluster of chief and workers, at least one worker), or "any".
Hosts = Literal["one", "many", "any"]
#: What a strategy does with cluster.parameter_servers: "needs" them, "refuses" them, or takes "any"
#: cluster (auto, which resolves to parameter_server when the cluster has them).
ParameterServers = Literal["needs", "refuses", "any"]
#: How the advisor and the profiler count a strategy's traffic per step.
Traffic = Literal["decided_at_runtime", "none", "all_reduce", "parameter_server", "tpu", "diloco", "dtensor"]
#: What the runtime builds in a replica (vtrain.runtime.tfsetup has one builder per value).
Builds = Literal["decided_at_runtime", "default", "OneDeviceStrategy", "MirroredStrategy",
                 "MultiWorkerMirroredStrategy", "ParameterServerStrategy", "TPUStrategy", "learner", "mesh", "rank"]


@dataclass(frozen=True)
class Strategy:
    """One `distribution_strategy` value and what it means to every stage."""

    name: str
    hosts: Hosts
    parameter_servers: ParameterServers
    #: A tf.distribute cluster across replicas (TF_CONFIG normalised; Keras 3's model.fit cannot train).
    multi_worker: bool
    #: Needs a TPU chief (and a TPU chief needs it, or auto).
    tpu: bool
    #: Its own job-file block (`diloco:`, `dtensor:`), None when it has none.
    block: str | None
    #: Env vars the request adds to each replica besides VTRAIN_DISTRIBUTION_STRATEGY (with its block).
    env: tuple[str, ...]
    traffic: Traffic
    builds: Builds
    #: The chief's GPUs: "many" (warn below 2: nothing distributes), "one" (warn above 1: GPUs idle), None.
    local_gpus: Literal["many", "one"] | None = None
    #: Checked with its own block's rules (dtensor: the mesh covers the cluster), not the generic ones.
    own_cluster_rules: bool = False
    #: Each replica trains alone (DiLoCo learners): its own checkpoints and outputs per task.
    standalone_replicas: bool = False
    #: The runtime needs the local GPU count to decide (auto; MWM picks NCCL or RING; DiLoCo mirrors).
    probes_gpus: bool = False
    #: Vertex's Reduction Server can serve its all-reduce (documented for MultiWorkerMirrored's NCCL).
    reducers: bool = True

    @property
    def auto(self) -> bool:
        """Resolved inside each replica from the environment it has (vtrain.runtime.decision)."""
        return self.builds == "decided_at_runtime"


TABLE: tuple[Strategy, ...] = (
    Strategy("auto", "any", "any", False, False, None, (), "decided_at_runtime", "decided_at_runtime",
             probes_gpus=True),
    Strategy("one_device", "one", "refuses", False, False, None, (), "none", "OneDeviceStrategy", local_gpus="one"),
    Strategy("mirrored", "one", "refuses", False, False, None, (), "none", "MirroredStrategy", local_gpus="many"),
    Strategy("multi_worker_mirrored", "many", "refuses", True, False, None, (), "all_reduce",
             "MultiWorkerMirroredStrategy", probes_gpus=True),
    Strategy("parameter_server", "any", "needs", True, False, None, (), "parameter_server",
             "ParameterServerStrategy"),
    Strategy("tpu", "any", "refuses", False, True, None, (), "tpu", "TPUStrategy"),
    Strategy(DILOCO, "any", "refuses", False, False, DILOCO, (DILOCO_ENV,), "diloco", "learner",
             standalone_replicas=True, probes_gpus=True),
    Strategy(DTENSOR, "any", "refuses", False, False, DTENSOR, (DTENSOR_MESH_ENV,), "dtensor", "mesh",
             own_cluster_rules=True),
    # Horovod's API on TensorFlow's collectives (vtrain.horovod): one rank per chief/worker replica, each
    # with TensorFlow's default strategy; a ring all-reduce the reducers are not documented for.
    Strategy(HOROVOD, "any", "refuses", False, False, None, (), "all_reduce", "rank", own_cluster_rules=True,
             reducers=False),
)
BY_NAME: dict[str, Strategy] = {row.name: row for row in TABLE}
#: What the runtime reports when auto resolves to no distribution at all (not a job-file value).
DEFAULT = Strategy("default", "one", "refuses", False, False, None, (), "none", "default")
assert tuple(BY_NAME) == STRATEGIES, "constants.STRATEGIES and the table list the same strategies, in order"


def get(name: str) -> Strategy:
    """The row of `name` (a job-file value, or ``default`` as the runtime reports it); KeyError when unknown."""
    return DEFAULT if name == DEFAULT.name else BY_NAME[name]


def named(name: str) -> Strategy | None:
    """The row of `name`, or None when no strategy has that name."""
    return DEFAULT if name == DEFAULT.name else BY_NAME.get(name)


__all__ = ["BY_NAME", "DEFAULT", "TABLE", "Strategy", "get", "named"]
