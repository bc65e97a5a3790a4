"""Where gradients meet the ring: Horovod's DistributedGradientTape and DistributedOptimizer.

Both average the gradients over all ranks before they are applied (packed: one all-reduce per dtype
per step, see :mod:`vtrain.horovod.collectives`), as Horovod does; the rest of the tape or optimizer
is the one the script made. The optimizer is rebuilt from its config as a subclass of its own class
(Horovod's way), so it saves, restores and schedules its learning rate as before:

* tf_keras optimizers (``tf.keras`` under TF_USE_LEGACY_KERAS=1, which vtrain.horovod sets when it can,
  and Keras 2's legacy ones): ``apply_gradients`` reduces first (``model.fit`` and ``minimize`` go through it);
* Keras 3 optimizers: ``apply`` reduces first (``apply_gradients`` and ``model.fit`` go through it).
"""

from __future__ import annotations

from typing import Any

from vtrain.horovod.collectives import Average, Compression, _check_op, reduce_gradients
from vtrain.horovod.unsupported import fail


def _settings(*, compression: Any, sparse_as_dense: bool, op: int, gradient_predivide_factor: float,
              process_set: Any) -> dict[str, Any]:
    chosen = _check_op(op, None)
    if gradient_predivide_factor != 1.0 and chosen != Average:
        raise ValueError("gradient_predivide_factor needs op=hvd.Average (Horovod's rule)")
    if process_set is not None:
        from vtrain.horovod.collectives import global_process_set

        if process_set is not global_process_set:
            fail("ProcessSet")
    return {"compression": compression, "sparse_as_dense": sparse_as_dense, "op": chosen,
            "predivide": float(gradient_predivide_factor)}


def _reduce(grads: list[Any], settings: dict[str, Any]) -> list[Any]:
    from vtrain.horovod.collectives import Sum, size

    predivide, op = settings["predivide"], settings["op"]
    if predivide != 1.0:  # Horovod: divide by f before the sum, by size/f after it
        return reduce_gradients(grads, op=Sum, compression=settings["compression"],
                                sparse_as_dense=settings["sparse_as_dense"], prescale_factor=1.0 / predivide,
                                postscale_factor=predivide / size())
    return reduce_gradients(grads, op=op, compression=settings["compression"],
                            sparse_as_dense=settings["sparse_as_dense"])


# --------------------------------------------------------------------------- the tape


def DistributedGradientTape(gradtape: Any, device_dense: str = "", device_sparse: str = "",  # noqa: N802
                            compression: Any = Compression.none, sparse_as_dense: bool = False,
                            op: int = Average, gradient_predivide_factor: float = 1.0, num_groups: int = 0,
                            groups: Any = None, process_set: Any = None,
                            scale_local_gradients: bool = True) -> Any:
    """The same tape, whose ``gradient`` returns the gradients averaged over all ranks.

    num_groups and groups (Horovod's fusion buckets) change nothing here: every gradient of a dtype
    travels in one packed all-reduce.
    """
    settings = _settings(compression=compression, sparse_as_dense=sparse_as_dense, op=op,
                         gradient_predivide_factor=gradient_predivide_factor, process_set=process_set)
    base = type(gradtape)

    def gradient(self: Any, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
        import tensorflow as tf

        grads = base.gradient(self, target, sources, *args, **kwargs)
        flat = tf.nest.flatten(grads, expand_composites=False)
        return tf.nest.pack_sequence_as(grads, _reduce(flat, self._vtrain_hvd))

    cls: Any = type(base.__name__, (base,), {"gradient": gradient, "__module__": base.__module__,
                                            "_vtrain_hvd": settings})
    tape: Any = object.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    return tape


# --------------------------------------------------------------------------- the optimizer


def _is_keras3(optimizer: Any) -> bool:
    return type(optimizer).__module__.split(".")[0] == "keras" and hasattr(optimizer, "apply") \
        and hasattr(optimizer, "stateless_apply")


def DistributedOptimizer(optimizer: Any, name: str | None = None, device_dense: str = "",  # noqa: N802
                         device_sparse: str = "", compression: Any = Compression.none,
                         sparse_as_dense: bool = False, gradient_predivide_factor: float = 1.0,
                         op: int = Average, backward_passes_per_step: int = 1,
                         average_aggregated_gradients: bool = False, num_groups: int = 0, groups: Any = None,
                         process_set: Any = None, scale_local_gradients: bool = True) -> Any:
    """A copy of a Keras optimizer (same class, same config) that averages gradients over all ranks
    before applying them."""
    if backward_passes_per_step != 1:
        fail("DistributedOptimizer", f"backward_passes_per_step={backward_passes_per_step} (local gradient "
                                     "accumulation) is not implemented; use 1, or a larger batch")
    if not hasattr(optimizer, "get_config") or not hasattr(optimizer, "apply_gradients"):
        fail("DistributedOptimizer", f"{type(optimizer).__name__} is not a Keras optimizer; TF1 "
                                     "tf.compat.v1.train optimizers are not supported: use a tf.keras optimizer "
                                     "or hvd.DistributedGradientTape")
    settings = _settings(compression=compression, sparse_as_dense=sparse_as_dense, op=op,
                         gradient_predivide_factor=gradient_predivide_factor, process_set=process_set)
    base = type(optimizer)
    if _is_keras3(optimizer):

        def apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
            return base.apply(self, _reduce(list(grads), self._vtrain_hvd), trainable_variables)

        body: dict[str, Any] = {"apply": apply}
    else:

        def apply_gradients(self: Any, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = list(grads_and_vars)
            grads = _reduce([g for g, _ in pairs], self._vtrain_hvd)
            return base.apply_gradients(self, list(zip(grads, [v for _, v in pairs], strict=True)), *args,
                                        **kwargs)

        body = {"apply_gradients": apply_gradients}
    # The settings live on the class: an attribute set on a Keras optimizer would be tracked as its state.
    cls: Any = type(base.__name__, (base,), {**body, "__module__": base.__module__, "_vtrain_hvd": settings})
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    return cls.from_config(config)
