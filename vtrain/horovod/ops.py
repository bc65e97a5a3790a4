"""One collective op over the ring, and what every Horovod call does before it: the instance key and launch order
of each op, the agreement step (:mod:`vtrain.horovod.agreement`), the argument checks, and the gradient wrapper.
:mod:`vtrain.horovod.collectives` builds Horovod's calls from these."""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from vtrain.horovod import agreement
from vtrain.horovod.agreement import Descriptor
from vtrain.horovod.ring import GROUP_KEY, next_key, rank, size, state
from vtrain.horovod.unsupported import NotSupported, fail

#: Horovod's reduction ops, with Horovod's own values (horovod.common.basics).
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
MERGE = {Average: "Add", Sum: "Add", Min: "Min", Max: "Max", Product: "Mul"}
OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max", Product: "Product"}
_last_in_graph: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


class GlobalProcessSet:
    """Horovod's global_process_set: all ranks (the only set there is here)."""

    process_set_id = 0

    def __repr__(self) -> str:
        return "ProcessSet(process_set_id=0, ranks=all)"


global_process_set = GlobalProcessSet()


def collective(make: Callable[[int, float], Any], after: Sequence[Any] = ()) -> Any:
    """Make one collective op with the next instance key, after the last one made in this graph (and
    after the ops in `after`, the agreement's check)."""
    import tensorflow as tf

    key, timeout = next_key(), state().timeout
    if tf.executing_eagerly():
        return make(key, timeout)
    graph = tf.compat.v1.get_default_graph()
    last = _last_in_graph.get(graph)
    with tf.control_dependencies([*([last] if last is not None else []), *after]):
        out = make(key, timeout)
    _last_in_graph[graph] = out
    return out


def gather(wire: Any, after: Sequence[Any] = ()) -> Any:
    """Every rank's tensor concatenated along dimension 0, in TensorFlow's order (not the ranks')."""
    import tensorflow as tf

    return collective(lambda key, timeout: tf.raw_ops.CollectiveGatherV2(
        input=wire, group_size=size(), group_key=GROUP_KEY, instance_key=key, ordering_token=[],
        communication_hint="auto", timeout_seconds=timeout), after)


class Agreed:
    """What the agreement step gives the call it precedes: the ranks' rows (a [size, WIDTH] int64 tensor,
    in gather order) and, in a graph, the check its collectives must run after."""

    def __init__(self, table: Any = None, check: Any = None) -> None:
        self.table, self.check = table, check

    @property
    def after(self) -> list[Any]:
        return [] if self.check is None else [self.check]


def agree(call: str, desc: Descriptor) -> Agreed:
    """Gather every rank's description of this call; a disagreement is one error on every rank, raised
    before any of the call's data moves. Nothing to agree on for a ring of one."""
    import tensorflow as tf

    if size() == 1:
        return Agreed()
    table = tf.reshape(gather(agreement.encode(tf, desc, rank())[tf.newaxis]), [size(), agreement.WIDTH])
    if not tf.executing_eagerly():
        return Agreed(table, agreement.graph_check(tf, call, desc, table))
    found = agreement.problem(call, desc, table.numpy().tolist())
    if found:
        raise tf.errors.FailedPreconditionError(None, None, found)
    return Agreed(table)


def rank_order(table: Any) -> Any:
    """For each rank, its row in the gather order (TensorFlow orders a gather by device name)."""
    import tensorflow as tf

    return tf.argsort(table[:, agreement.WIDTH - 1])


def check_op(op: int | None, average: bool | None, call: str = "hvd.allreduce") -> int:
    if op is not None and average is not None:
        raise ValueError(f"{call}: give op or the deprecated average, not both")
    chosen = (Average if average in (None, True) else Sum) if op is None else op
    if chosen == Adasum:
        fail("op=hvd.Adasum")
    if chosen not in MERGE:
        raise ValueError(f"{call}: op={chosen!r} is not one of hvd.Average, Sum, Min, Max, Product")
    return chosen


def check_process_set(process_set: Any) -> None:
    if process_set is not None and process_set is not global_process_set:
        fail("process_set=... (a process set)")


def check_sparse(op: int, prescale: float, postscale: float, call: str) -> None:
    """Horovod's refusals for tf.IndexedSlices (NotImplementedError, as Horovod raises them)."""
    if op not in (Average, Sum):
        raise NotSupported(f"vtrain.horovod: {call} of tf.IndexedSlices supports op=hvd.Average and hvd.Sum only, "
                           f"not {OP_NAMES[op]} (as Horovod); pass sparse_as_dense=True or reduce a dense tensor")
    if prescale != 1.0 or postscale != 1.0:
        raise NotSupported(f"vtrain.horovod: {call} of tf.IndexedSlices takes no prescale_factor or "
                           "postscale_factor (as Horovod); scale the values yourself")


def differentiable(forward: Callable[..., Any], backward: Callable[..., Any], tensors: Sequence[Any]) -> Any:
    """forward(*tensors) with `backward` as its gradient when the tensors are floating (a tape can watch them)."""
    import tensorflow as tf

    if not all(t.dtype.is_floating for t in tensors):
        return forward(*tensors)

    @tf.custom_gradient  # type: ignore[untyped-decorator]
    def op(*xs: Any) -> Any:
        out = forward(*xs)

        def grad(*dys: Any) -> Any:
            dys = tuple(tf.zeros_like(o) if d is None else d for d, o in zip(dys, tf.nest.flatten(out), strict=True))
            return backward(*dys)

        return out, grad

    return op(*tensors)


def check_root(root_rank: Any, call: str) -> int:
    n = size()
    try:
        root = operator.index(root_rank)
    except TypeError:
        root = -1
    if isinstance(root_rank, bool) or not 0 <= root < n:
        raise ValueError(f"{call}: root_rank {root_rank!r} is not a rank of this job (0..{n - 1})")
    return root
