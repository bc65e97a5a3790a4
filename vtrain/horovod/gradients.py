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

from vtrain.horovod.collectives import Average, Compression, reduce_gradients
from vtrain.horovod.ops import check_op
from vtrain.horovod.unsupported import ARGUMENTS, fail


def _settings(*, compression: Any, sparse_as_dense: bool, op: int, gradient_predivide_factor: float,
              process_set: Any) -> dict[str, Any]:
    chosen = check_op(op, None)
    if gradient_predivide_factor != 1.0 and chosen != Average:
        raise ValueError("gradient_predivide_factor needs op=hvd.Average (Horovod's rule)")
    if process_set is not None:
        from vtrain.horovod.collectives import global_process_set

        if process_set is not global_process_set:
            fail("process_set=... (a process set)")
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
    travels in one packed all-reduce. ``register_local_source(variable)`` keeps a variable's gradient on
    its rank (divided by size() when scale_local_gradients, as Horovod does); ``get_local_and_global_gradients``
    returns the two kinds apart.
    """
    import tensorflow as tf

    settings = _settings(compression=compression, sparse_as_dense=sparse_as_dense, op=op,
                         gradient_predivide_factor=gradient_predivide_factor, process_set=process_set)
    settings["scale_local"] = scale_local_gradients
    base = type(gradtape)

    def gradient(self: Any, target: Any, sources: Any, output_gradients: Any = None, *args: Any,
                 **kwargs: Any) -> Any:
        grads = base.gradient(self, target, sources, output_gradients, *args, **kwargs)
        flat_sources = tf.nest.flatten(sources, expand_composites=False)
        flat = tf.nest.flatten(grads, expand_composites=False)
        local = self._vtrain_local
        shared = [i for i, s in enumerate(flat_sources) if _ref(s) not in local]
        reduced = _reduce([flat[i] for i in shared], self._vtrain_hvd) if shared else []
        out = list(flat)
        for i, g in zip(shared, reduced, strict=True):
            out[i] = g
        if local and self._vtrain_hvd["scale_local"]:
            from vtrain.horovod.collectives import size

            for i, s in enumerate(flat_sources):
                if _ref(s) in local and out[i] is not None:
                    out[i] = _divided(out[i], size())
        return tf.nest.pack_sequence_as(grads, out)

    def register_local_source(self: Any, source: Any) -> None:
        """A variable whose gradient stays on this rank (a layer local to each rank)."""
        self._vtrain_local.add(_ref(source))

    def get_local_and_global_gradients(self: Any, target: Any, sources: Any, output_gradients: Any = None,
                                       use_generic_names: bool = False) -> tuple[list[Any], list[Any]]:
        """(source, gradient) pairs of the local sources, then of the others, each as ``gradient`` returns them."""
        flat_sources = list(sources)
        grads = self.gradient(target, flat_sources, output_gradients)
        pairs = list(zip(flat_sources, grads, strict=True))
        return ([p for p in pairs if _ref(p[0]) in self._vtrain_local],
                [p for p in pairs if _ref(p[0]) not in self._vtrain_local])

    body = {name: tf.autograph.experimental.do_not_convert(fn) for name, fn in (
        ("gradient", gradient), ("register_local_source", register_local_source),
        ("get_local_and_global_gradients", get_local_and_global_gradients))}
    cls: Any = type(base.__name__, (base,), {**body, "__module__": base.__module__, "_vtrain_hvd": settings})
    tape: Any = object.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._vtrain_local = set()
    return tape


def PartialDistributedGradientTape(gradtape: Any, device_dense: str = "", device_sparse: str = "",  # noqa: N802
                                   compression: Any = Compression.none, sparse_as_dense: bool = False,
                                   op: int = Average, gradient_predivide_factor: float = 1.0, num_groups: int = 0,
                                   groups: Any = None, process_set: Any = None, local_layers: Any = None,
                                   scale_local_gradients: bool = True) -> Any:
    """A DistributedGradientTape that keeps the gradients of `local_layers` (Keras layers) on each rank."""
    layers = [] if local_layers is None else list(local_layers) if isinstance(local_layers, (list, tuple)) \
        else [local_layers]
    for layer in layers:
        if not hasattr(layer, "trainable_weights"):
            raise ValueError(f"PartialDistributedGradientTape: local_layers must be Keras layers, not "
                             f"{type(layer).__name__}")
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression, sparse_as_dense, op,
                                   gradient_predivide_factor, num_groups, groups, process_set, scale_local_gradients)
    for layer in layers:
        for variable in layer.trainable_weights:
            tape.register_local_source(variable)
    return tape


def _ref(source: Any) -> Any:
    """A hashable key for a variable (``ref()``), or the object itself."""
    return source.ref() if hasattr(source, "ref") else id(source)


def _divided(grad: Any, n: int) -> Any:
    import tensorflow as tf

    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / n, grad.indices, grad.dense_shape)
    return grad / n


# --------------------------------------------------------------------------- the optimizer


def _unconverted(fn: Any) -> Any:
    import tensorflow as tf

    return tf.autograph.experimental.do_not_convert(fn)


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
        fail("hvd.DistributedOptimizer(backward_passes_per_step>1)",
             f"backward_passes_per_step={backward_passes_per_step}: "
             f"{ARGUMENTS['hvd.DistributedOptimizer(backward_passes_per_step>1)']}")
    if not hasattr(optimizer, "get_config") or not hasattr(optimizer, "apply_gradients"):
        fail("hvd.DistributedOptimizer(a tf.compat.v1.train optimizer)",
             f"{type(optimizer).__name__} is not a Keras optimizer; "
             f"{ARGUMENTS['hvd.DistributedOptimizer(a tf.compat.v1.train optimizer)']}")
    settings = _settings(compression=compression, sparse_as_dense=sparse_as_dense, op=op,
                         gradient_predivide_factor=gradient_predivide_factor, process_set=process_set)
    base = type(optimizer)
    if _is_keras3(optimizer):

        def apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
            return base.apply(self, _reduce(list(grads), self._vtrain_hvd), trainable_variables)

        body: dict[str, Any] = {"apply": _unconverted(apply)}
    else:

        def apply_gradients(self: Any, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = list(grads_and_vars)
            grads = _reduce([g for g, _ in pairs], self._vtrain_hvd)
            return base.apply_gradients(self, list(zip(grads, [v for _, v in pairs], strict=True)), *args,
                                        **kwargs)

        body = {"apply_gradients": _unconverted(apply_gradients)}

    def register_local_var(self: Any, var: Any) -> None:
        fail("hvd.DistributedOptimizer.register_local_var")

    body["register_local_var"] = register_local_var
    # The settings live on the class: an attribute set on a Keras optimizer would be tracked as its state.
    cls: Any = type(base.__name__, (base,), {**body, "__module__": base.__module__, "_vtrain_hvd": settings})
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    return cls.from_config(config)
