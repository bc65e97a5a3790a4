"""vtrain.horovod's ranks from the cluster Vertex describes (pure: no TensorFlow) and the calls it refuses."""

from __future__ import annotations

import json

import pytest

from vtrain.errors import HorovodUnsupported, RuntimeMismatch
from vtrain.horovod import unsupported
from vtrain.horovod.topology import topology

CLUSTER = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2223"]}


def env(task: str, index: int, cluster: dict[str, object] | None = None) -> dict[str, str]:
    return {"TF_CONFIG": json.dumps({"cluster": cluster or CLUSTER, "task": {"type": task, "index": index}})}


@pytest.mark.parametrize(("task", "index", "rank"), [("chief", 0, 0), ("worker", 0, 1), ("worker", 1, 2)])
def test_the_chief_is_rank_0_and_the_workers_follow_in_order(task: str, index: int, rank: int) -> None:
    t = topology(env(task, index))
    assert (t.rank, t.size, t.local_rank, t.local_size, t.cross_rank, t.cross_size) == (rank, 3, 0, 1, rank, 3)
    assert t.leader == "/job:chief/replica:0/task:0"
    assert t.port == int(([*CLUSTER["chief"], *CLUSTER["worker"]][rank]).rsplit(":")[1])


def test_master_is_the_chief_and_a_chiefless_cluster_starts_at_worker_0() -> None:
    t = topology(env("master", 0, {"master": ["h:1"], "worker": ["h:2"]}))
    assert (t.rank, t.size, t.task_type, t.leader) == (0, 2, "chief", "/job:chief/replica:0/task:0")
    w = topology(env("worker", 1, {"worker": ["h:1", "h:2"]}))
    assert (w.rank, w.size, w.leader) == (1, 2, "/job:worker/replica:0/task:0")


def test_one_replica_has_no_tf_config_and_is_a_ring_of_one() -> None:
    t = topology({"CLUSTER_SPEC": '{"task": {"type": "workerpool0", "index": 0}}'})
    assert (t.rank, t.size, t.cluster) == (0, 1, {})


@pytest.mark.parametrize(("given", "says"), [
    (env("worker", 0, {**CLUSTER, "ps": ["h:9"]}), "lists parameter servers, which a Horovod ring has no place for"),
    (env("evaluator", 0), "this replica is a evaluator (evaluator-0), not part of the training ring"),
    (env("worker", 5), "task worker-5 is not in its cluster.worker"),
    (env("chief", 0, {"chief": ["h:1", "h:2"]}), "lists 2 chief tasks; Vertex runs exactly one"),
    (env("chief", 0, {"chief": "h:1"}), "cluster.chief must be a list of host:port addresses"),
    ({"TF_CONFIG": "{nope"}, "TF_CONFIG is not valid JSON"),
    ({"TF_CONFIG": "[1]"}, "TF_CONFIG must be a JSON object"),
])
def test_a_cluster_that_is_no_ring_is_refused_with_why(given: dict[str, str], says: str) -> None:
    with pytest.raises(RuntimeMismatch, match=None) as info:
        topology(given)
    assert says in str(info.value)


def test_unsupported_calls_fail_at_the_call_with_why() -> None:
    join = unsupported.lookup("vtrain.horovod.tensorflow", "join")
    with pytest.raises(HorovodUnsupported) as info:
        join()
    assert isinstance(info.value, NotImplementedError)
    assert str(info.value).startswith("vtrain.horovod: hvd.join is not supported: vtrain.horovod runs one fixed ring")
    with pytest.raises(AttributeError, match="has no attribute 'no_such_call'"):
        unsupported.lookup("vtrain.horovod.tensorflow", "no_such_call")


def test_import_horovod_as_vtrain_horovod_refuses_horovod_run() -> None:
    import vtrain.horovod as horovod

    with pytest.raises(HorovodUnsupported, match="each replica is already one rank"):
        horovod.run(print, np=2)
