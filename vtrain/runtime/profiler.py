"""Measuring the trainer while it rehearses: what `vtrain estimate --from-run` sizes the cluster from.

    prof = runtime.profile(model, optimizer, examples_per_step=global_batch)   # a custom loop
    with prof.step():
        with prof.waiting():
            batch = next(batches)
        train_step(batch)
    # Keras: model.fit(..., callbacks=[runtime.profile_callback(keras, global_batch, dataset)])

What is measured, once per replica, into :func:`~vtrain.runtime.profile_record.profile_dir` as
REPLICA.json (the format: :mod:`.profile_record`): parameters and bytes by dtype (trainable and not),
the gradient bytes a step's exchange carries, optimizer slot bytes, activation bytes per example (the
layers' outputs), examples per step, peak memory (the device's peak where TensorFlow has a GPU, the
process's peak RSS on CPU), step time after warm-up (median, p90) and the share spent waiting for
input, and FLOPs per step as TensorFlow's graph profiler counts them for the model's forward and
backward pass on one replica's batch (traced, never run: no collective is started). What cannot be
measured is null with a note saying why. Measuring costs two clock reads per step; everything else
happens once, when training ends. The profile is written when training ends (``complete: true``) or,
if the process exits first, at exit (``complete: false``); a profile must never stop training, so
every failure here is logged and swallowed.

TensorFlow is imported only inside the functions that measure.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import resource
import sys
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from vtrain.runtime.decision import _role
from vtrain.runtime.profile_record import job_spec_from_env, profile_dir, shape_hash, step_stats, write_profile

log = logging.getLogger("vtrain.runtime")
INPUT_PROBE_BATCHES = 10
_SCALAR_OPTIMIZER_VARS = ("iteration", "iter", "learning_rate", "lr", "loss_scale", "good_steps", "current_loss_scale")


def _rss_peak() -> int:
    """This process's peak resident set (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _rss_now() -> int:
    """This process's resident set now (Linux /proc; elsewhere the peak so far stands in)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return _rss_peak()


def _var_list(obj: Any) -> list[Any]:
    found = getattr(obj, "variables", [])
    return list(found() if callable(found) else found)


def _size_and_dtype(var: Any) -> tuple[int, str, int]:
    import tensorflow as tf

    dtype = tf.as_dtype(var.dtype)
    return int(math.prod(int(d) for d in var.shape)), dtype.name, dtype.size


def parameters(model: Any) -> dict[str, Any]:
    """Counts and bytes of the model's variables by dtype, trainable and not."""
    by_dtype: dict[str, dict[str, int]] = {}
    counts = {"trainable": 0, "non_trainable": 0}
    grad = 0
    for kind, variables in (("trainable", model.trainable_variables), ("non_trainable", model.non_trainable_variables)):
        for var in variables:
            size, name, width = _size_and_dtype(var)
            counts[kind] += size
            row = by_dtype.setdefault(name, {"count": 0, "bytes": 0, "trainable": 0})
            row["count"] += size
            row["bytes"] += size * width
            if kind == "trainable":
                row["trainable"] += size
                grad += size * width  # the gradient of a variable has the variable's dtype
    return {**counts, "by_dtype": by_dtype, "gradient_bytes": grad}


def optimizer_slots(optimizer: Any, trainable_bytes: int) -> dict[str, Any]:
    """Bytes of the optimizer's per-parameter state (its scalars, step and learning rate, left out)."""
    slot = 0
    for var in _var_list(optimizer):
        name = str(getattr(var, "path", None) or getattr(var, "name", "")).split("/")[-1].split(":")[0]
        size, _, width = _size_and_dtype(var)
        if size <= 1 and name in _SCALAR_OPTIMIZER_VARS:
            continue
        slot += size * width
    per_param = slot / trainable_bytes if trainable_bytes else 0.0
    return {"name": type(optimizer).__name__, "slot_bytes": slot, "slots_per_param": round(per_param, 3)}


def _input_specs(model: Any, batch: int) -> list[Any] | None:
    import tensorflow as tf

    inputs = getattr(model, "inputs", None)
    if not inputs:
        return None
    return [tf.TensorSpec([batch, *[int(d) for d in list(t.shape)[1:]]], tf.as_dtype(t.dtype)) for t in inputs]


def _profiler_deprecation(record: logging.LogRecord) -> bool:
    """False for the one deprecation TensorFlow's graph profiler logs about itself
    (``tensor_shape_from_node_def_name ... is deprecated``): every run would print it, and the trainer
    can do nothing about it. Any other record passes."""
    text = record.getMessage()
    return not ("tensor_shape_from_node_def_name" in text and "deprecated" in text)


def count_flops(model: Any, batch: int) -> dict[str, Any]:
    """Forward + backward FLOPs of `model` on a batch of `batch` examples, as tf's graph profiler counts."""
    import tensorflow as tf

    out: dict[str, Any] = {"per_step": None, "per_example": None, "batch": batch, "ratio_to_6n": None,
                           "method": "tf.compat.v1.profiler float_operation over a traced forward+backward "
                                     "pass on one replica's batch (the loss and the optimizer update not counted)"}
    try:
        specs = _input_specs(model, batch)
        if specs is None:
            out["note"] = "cannot count: the model has no static input shape (give it a keras.Input)"
            return out

        @tf.function  # type: ignore[untyped-decorator]  # TensorFlow ships no types
        def forward_backward(*x: Any) -> Any:
            with tf.GradientTape() as tape:
                y = model(x[0] if len(x) == 1 else list(x), training=True)
                loss = tf.add_n([tf.reduce_sum(tf.cast(t, tf.float32)) for t in tf.nest.flatten(y)])
            return tape.gradient(loss, model.trainable_variables)

        strategy = getattr(model, "distribute_strategy", None) or tf.distribute.get_strategy()

        @tf.function  # type: ignore[untyped-decorator]  # TensorFlow ships no types
        def in_replica(*x: Any) -> Any:  # distributed variables are read in a replica context
            return strategy.run(forward_backward.python_function, args=x)

        try:
            graph = forward_backward.get_concrete_function(*specs).graph
        except (ValueError, TypeError, RuntimeError):  # MultiWorkerMirrored's variables want strategy.run
            graph = in_replica.get_concrete_function(*specs).graph
        options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        options["output"] = "none"
        tf_log = logging.getLogger("tensorflow")
        tf_log.addFilter(_profiler_deprecation)  # TF's own profiler calls a v1 API it deprecated: not the user's
        try:
            total = int(tf.compat.v1.profiler.profile(graph=graph, options=options).total_float_ops)
        finally:
            tf_log.removeFilter(_profiler_deprecation)
    except Exception as err:  # noqa: BLE001 - a profile never stops training; say why it has no FLOPs
        out["note"] = f"cannot count: {type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
        return out
    if total <= 0:
        out["note"] = "cannot count: TensorFlow registers no FLOPs for this model's ops"
        return out
    out["per_step"], out["per_example"] = total, total / batch
    params = parameters(model)["trainable"]
    if params:
        out["ratio_to_6n"] = round(total / batch / (6 * params), 4)
        out["note"] = ("6 × parameters per example assumes every layer's input gradient is computed; the first "
                       "layer's is not, so a model whose first layer holds most parameters counts fewer")
    return out


def activation_bytes_per_example(model: Any) -> int | None:
    """The layers' outputs for one example (what the backward pass keeps), or None if not knowable."""
    import tensorflow as tf

    total = 0
    try:
        for layer in model.layers:
            shape = list(layer.output.shape)[1:]
            dtype = tf.as_dtype(getattr(layer, "compute_dtype", None) or layer.output.dtype)
            total += int(math.prod(int(d) for d in shape)) * dtype.size
    except (AttributeError, ValueError, TypeError):
        return None
    return total


def _device() -> dict[str, Any]:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        return {"kind": "gpu", "name": details.get("device_name", "GPU"), "count": len(gpus)}
    if tf.config.list_logical_devices("TPU"):
        return {"kind": "tpu", "name": "TPU", "count": len(tf.config.list_logical_devices("TPU"))}
    return {"kind": "cpu", "name": os.uname().machine, "count": os.cpu_count() or 1}


def _memory(start: int, baseline: int | None, device: dict[str, Any]) -> dict[str, Any]:
    """The peak, and on CPU the RSS when the runtime started and when the model was attached (built: its
    weights are in it), so that peak − baseline is what training added to the model."""
    if device["kind"] == "gpu":
        import tensorflow as tf

        with contextlib.suppress(ValueError, RuntimeError):
            info = tf.config.experimental.get_memory_info("GPU:0")
            return {"kind": "device", "peak_bytes": int(info["peak"]), "rss_peak_bytes": _rss_peak()}
    return {"kind": "rss", "peak_bytes": _rss_peak(), "start_bytes": start, "baseline_bytes": baseline}


def _precision(model: Any) -> str:
    policy = getattr(model, "dtype_policy", None)
    return str(getattr(policy, "name", policy or "float32"))


def _exchange(strategy_name: str, replicas: int, grad: int) -> dict[str, Any]:
    from vtrain import strategies

    row = strategies.named(strategy_name)
    if row is not None and row.traffic == "parameter_server":
        return {"kind": "parameter_server", "bytes_per_step": grad,
                "note": "each worker pushes its gradients to the parameter servers and pulls the variables back"}
    ring = 2 * (replicas - 1) / replicas * grad if replicas > 1 else 0.0
    return {"kind": "all_reduce", "bytes_per_step": grad, "ring_bytes_sent_per_replica": ring,
            "note": "tf.distribute all-reduces every gradient once per step; packing (bytes_per_pack, num_packs) "
                    "changes how many collectives carry them, not the bytes"}


class Profile:
    """One process's measurements; :func:`current` is the one a trainer reports into."""

    def __init__(self) -> None:
        self.start_rss = _rss_now()
        self.baseline_rss: int | None = None  # when the model was attached
        self.model: Any = None
        self.optimizer: Any = None
        self.examples_per_step: int | None = None
        self.strategy_name = os.environ.get("VTRAIN_DISTRIBUTION_STRATEGY", "auto")
        self.replicas = 1
        self.durations: list[float] = []
        self.waits: list[float] = []
        self.input_probe_s: float | None = None
        self.written: str | None = None
        self._begun: float | None = None
        self._wait = 0.0
        self._exit_hook = False

    # ------------------------------------------------------------------ what the trainer calls
    def attach(self, model: Any, optimizer: Any = None, *, examples_per_step: int | None = None) -> Profile:
        self.model, self.optimizer = model, optimizer if optimizer is not None else getattr(model, "optimizer", None)
        if self.baseline_rss is None:
            self.baseline_rss = _rss_now()
        if examples_per_step is not None:
            self.examples_per_step = int(examples_per_step)
        self.write_at_exit()
        return self

    def write_at_exit(self) -> None:
        """Whatever is known gets written when the process exits, unless training wrote it first."""
        if not self._exit_hook:
            atexit.register(self._at_exit)
            self._exit_hook = True

    def step_begin(self) -> None:
        self._begun, self._wait = time.perf_counter(), 0.0

    def step_end(self) -> None:
        if self._begun is not None:
            self.durations.append(time.perf_counter() - self._begun)
            self.waits.append(self._wait)
            self._begun = None

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """Times one training step (make the step's result concrete inside it, e.g. float(loss))."""
        self.step_begin()
        yield
        self.step_end()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Inside a step: the time spent waiting for the next batch."""
        start = time.perf_counter()
        yield
        self._wait += time.perf_counter() - start

    def probe_input(self, dataset: Any, batches: int = INPUT_PROBE_BATCHES) -> None:
        """Time the input pipeline alone for a few batches (for model.fit, which reads inside its step)."""
        try:
            it = iter(dataset)
            next(it)
            start = time.perf_counter()
            for _ in range(batches):
                next(it)
            self.input_probe_s = (time.perf_counter() - start) / batches
        except Exception as err:  # noqa: BLE001 - a profile never stops training
            log.debug("vtrain: cannot time the input alone: %s", err)

    # ------------------------------------------------------------------ the record
    def record(self, complete: bool) -> dict[str, Any]:
        task_type, task_index = _role(os.environ)[:2]
        device = _device()
        stats = step_stats(self.durations, self.waits if any(self.waits) else None)
        if stats["input_wait_share"] is not None:
            stats["input_wait_method"] = "time in next() outside the step function, per step"
        elif self.input_probe_s is not None and stats["median_s"]:
            stats["input_wait_share"] = min(1.0, self.input_probe_s / stats["median_s"])
            stats["input_wait_method"] = ("the input pipeline timed alone per batch / step time: an upper bound "
                                          "(model.fit reads input inside its step, and prefetching overlaps it)")
        else:
            stats["input_wait_method"] = None
        out: dict[str, Any] = {
            "replica": f"{task_type}-{task_index}",
            "job_id": os.environ.get("CLOUD_ML_JOB_ID"),
            "config_hash": shape_hash(job_spec_from_env(os.environ)),
            "complete": complete,
            "written": time.time(),
            "strategy": self.strategy_name,
            "replicas_in_sync": self.replicas,
            "device": device,
            "examples_per_step": self.examples_per_step,
            "steps": stats,
            "memory": _memory(self.start_rss, self.baseline_rss, device),
        }
        if self.model is None:
            out["note"] = "no model attached: call runtime.profile(model, optimizer) or use profile_callback"
            return out
        params = parameters(self.model)
        grad = params.pop("gradient_bytes")
        per_replica = (self.examples_per_step or 0) // max(1, self.replicas) or None
        out.update({
            "precision": _precision(self.model),
            "parameters": params,
            "count_params": int(self.model.count_params()),
            "gradient_bytes": grad,
            "exchange": _exchange(self.strategy_name, self.replicas, grad),
            "optimizer": None if self.optimizer is None else optimizer_slots(self.optimizer, grad),
            "activation_bytes_per_example": activation_bytes_per_example(self.model),
            "flops": count_flops(self.model, per_replica) if per_replica else {
                "per_step": None, "note": "cannot count: examples per step not given"},
        })  # fmt: skip
        return out

    def write(self, complete: bool = True) -> str | None:
        """Write the profile (once complete; again over an incomplete one). Never raises."""
        directory = profile_dir()
        if directory is None or (self.written and not complete):
            return self.written
        try:
            record = self.record(complete)
            self.written = write_profile(directory, record["replica"], record)
            log.info("vtrain: profile written to %s", self.written)
        except Exception as err:  # noqa: BLE001 - a profile never stops training
            log.warning("vtrain: cannot write the profile to %s: %s", directory, err)
        return self.written

    def _at_exit(self) -> None:
        if self.written is None:
            self.write(complete=False)


_CURRENT: list[Profile] = []


def current() -> Profile:
    """This process's profile (made at its first use, e.g. by runtime.strategy())."""
    if not _CURRENT:
        _CURRENT.append(Profile())
    return _CURRENT[0]


def started(strategy_name: str, replicas: int) -> None:
    """runtime.strategy() says which strategy and how many replicas a step spans."""
    prof = current()
    prof.strategy_name, prof.replicas = strategy_name, int(replicas)
    prof.write_at_exit()  # a trainer that only calls strategy() still leaves its strategy and peak memory


def profile(model: Any, optimizer: Any = None, *, examples_per_step: int | None = None) -> Profile:
    """Measure `model` (and `optimizer`'s slots) into this replica's profile; time steps with ``.step()``."""
    return current().attach(model, optimizer, examples_per_step=examples_per_step)


def profile_callback(keras_module: ModuleType, examples_per_step: int | None = None, dataset: Any = None) -> Any:
    """A Keras callback that times every batch and writes the profile when fit ends.

    `dataset` (optional): timed alone for a few batches at the end, for an upper bound of the input
    wait (model.fit reads its input inside the step). Not for ParameterServerStrategy (no batch hooks).
    """
    prof = current()

    class ProfileCallback(keras_module.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
            prof.attach(self.model, getattr(self.model, "optimizer", None), examples_per_step=examples_per_step)

        def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
            prof.step_begin()

        def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
            prof.step_end()

        def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
            if dataset is not None:
                prof.probe_input(dataset)
            prof.write(complete=True)

    return ProfileCallback()


__all__ = ["Profile", "activation_bytes_per_example", "count_flops", "current", "optimizer_slots", "parameters",
           "profile", "profile_callback", "started"]
