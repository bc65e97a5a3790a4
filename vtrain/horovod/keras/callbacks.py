"""Horovod's Keras callbacks (``hvd.callbacks``), subclasses of the ``tf.keras`` callback base.

* BroadcastGlobalVariablesCallback: after the first batch, every rank takes root_rank's model and
  optimizer variables (after, so that the optimizer's slots exist), then all ranks step alike.
* MetricAverageCallback: at each epoch's end, the numeric values in ``logs`` become their mean over the
  ranks (one packed all-reduce, keys in sorted order); put it before callbacks that read metrics.
* LearningRateScheduleCallback: initial_lr times a multiplier (a number, or a function of the epoch) over
  a range of epochs, per epoch or per batch.
* LearningRateWarmupCallback: Goyal et al.'s gradual warm-up, per batch, from initial_lr / size to
  initial_lr over warmup_epochs, with Horovod's formula (so the last warm-up batch reaches initial_lr);
  a schedule whose multiplier is that formula.

Both correct the momentum when the optimizer keeps it in a variable, as Horovod does.
"""

from __future__ import annotations

import logging
from typing import Any

import tensorflow as tf

from vtrain.horovod.collectives import allreduce, broadcast_variables, rank, size

log = logging.getLogger("vtrain.horovod")

_Callback: Any = tf.keras.callbacks.Callback


def _optimizer_variables(optimizer: Any) -> list[Any]:
    found = optimizer.variables
    return list(found() if callable(found) else found)


class BroadcastGlobalVariablesCallback(_Callback):  # type: ignore[misc]
    """Start every rank from root_rank's weights and optimizer state (but `local_variables`, which each rank
    keeps)."""

    def __init__(self, root_rank: int, device: str = "", local_variables: Any = None) -> None:
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.broadcast_done = False
        local = [] if local_variables is None else list(local_variables)
        self._local = {v.ref() if hasattr(v, "ref") else id(v) for v in local}

    def _shared(self, variables: list[Any]) -> list[Any]:
        return [v for v in variables if (v.ref() if hasattr(v, "ref") else id(v)) not in self._local]

    def on_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.broadcast_done:
            return
        with tf.device(self.device):
            broadcast_variables(self._shared(list(self.model.variables)), root_rank=self.root_rank)
            broadcast_variables(self._shared(_optimizer_variables(self.model.optimizer)), root_rank=self.root_rank)
        self.broadcast_done = True


class MetricAverageCallback(_Callback):  # type: ignore[misc]
    """Average the epoch's logged metrics over all ranks, in place."""

    def __init__(self, device: str = "") -> None:
        super().__init__()
        self.device = device

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if not logs:
            return
        keys = sorted(k for k, v in logs.items() if isinstance(v, (int, float)) or hasattr(v, "dtype"))
        if not keys:
            return
        with tf.device(self.device):
            values = tf.constant([float(logs[k]) for k in keys], tf.float64)
            averaged = allreduce(values, name="MetricAverageCallback").numpy()
        for key, value in zip(keys, averaged, strict=True):
            logs[key] = float(value)


def _get(value: Any) -> float:
    return float(value.numpy()) if hasattr(value, "numpy") else float(value)


class LearningRateScheduleCallback(_Callback):  # type: ignore[misc]
    """Set the learning rate to initial_lr * multiplier from start_epoch up to (not including) end_epoch.

    A number as multiplier applies from the first batch of each epoch; a function of the epoch too with
    staircase=True (it gets the epoch number), or at every batch with staircase=False (it gets the epoch
    plus the fraction of it done). With momentum_correction, an optimizer that keeps its momentum in a
    variable has it scaled by new_lr / old_lr for the batch the rate changes in (Goyal et al.)."""

    def __init__(self, initial_lr: float, multiplier: Any, start_epoch: int = 0, end_epoch: int | None = None,
                 staircase: bool = True, momentum_correction: bool = True, steps_per_epoch: int | None = None,
                 verbose: int = 0) -> None:
        super().__init__()
        if initial_lr is None:
            raise ValueError(f"{type(self).__name__} needs initial_lr")
        self.initial_lr = float(initial_lr)
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase if callable(multiplier) else True
        self.multiplier: Any = multiplier if callable(multiplier) else (lambda epoch: float(multiplier))
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.current_epoch = 0
        self._restore_momentum: float | None = None
        self._warned = False

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        if not self.staircase and not self.steps_per_epoch:
            steps = (self.params or {}).get("steps")
            if not steps:
                raise ValueError(f"{type(self).__name__} cannot tell the steps per epoch; pass steps_per_epoch "
                                 "to it (or to model.fit)")
            self.steps_per_epoch = int(steps)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.current_epoch = epoch

    def _active(self) -> bool:
        return self.current_epoch >= self.start_epoch and (self.end_epoch is None
                                                           or self.current_epoch < self.end_epoch)

    def on_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if not self._active():
            return
        if self.staircase:
            if batch == 0:
                self._set(self.initial_lr * self.multiplier(self.current_epoch))
            return
        assert self.steps_per_epoch
        self._set(self.initial_lr * self.multiplier(self.current_epoch + batch / self.steps_per_epoch))

    def _set(self, new: float) -> None:
        optimizer = self.model.optimizer
        old = _get(optimizer.learning_rate)
        if hasattr(optimizer.learning_rate, "assign"):
            optimizer.learning_rate.assign(new)
        else:
            optimizer.learning_rate = new
        momentum = getattr(optimizer, "momentum", None)
        if not (self.momentum_correction and momentum is not None and old):
            return
        if hasattr(momentum, "assign"):
            self._restore_momentum = _get(momentum)
            momentum.assign(self._restore_momentum * new / old)
        elif not self._warned and float(momentum):
            self._warned = True
            log.warning("vtrain.horovod: %s cannot correct momentum: %s keeps it as a constant in the compiled "
                        "step; the learning rate still changes (pass momentum_correction=False to silence this)",
                        type(self).__name__, type(optimizer).__name__)

    def on_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._restore_momentum is not None:
            self.model.optimizer.momentum.assign(self._restore_momentum)
            self._restore_momentum = None

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if logs is not None:
            logs["lr"] = _get(self.model.optimizer.learning_rate)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Ramp the learning rate from initial_lr / size() to initial_lr over warmup_epochs epochs, per batch."""

    def __init__(self, initial_lr: float, warmup_epochs: int = 5, momentum_correction: bool = True,
                 steps_per_epoch: int | None = None, verbose: int = 0) -> None:
        if warmup_epochs <= 0:
            raise ValueError(f"LearningRateWarmupCallback: warmup_epochs must be > 0, not {warmup_epochs}")
        self.warmup_epochs = warmup_epochs
        super().__init__(initial_lr, self.multiplier_at, start_epoch=0, end_epoch=warmup_epochs, staircase=False,
                         momentum_correction=momentum_correction, steps_per_epoch=steps_per_epoch, verbose=verbose)

    def multiplier_at(self, epoch: float) -> float:
        """Horovod's: 1/size at the start, 1 after the last warm-up batch."""
        assert self.steps_per_epoch
        epoch += 1.0 / self.steps_per_epoch
        n = size()
        return 1.0 / n * (epoch * (n - 1) / self.warmup_epochs + 1)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        if epoch == self.warmup_epochs - 1 and self.verbose > 0 and rank() == 0:
            lr = _get(self.model.optimizer.learning_rate)
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to {lr:g}.")


def __getattr__(name: str) -> Any:
    from vtrain.horovod.unsupported import lookup

    return lookup(__name__, name)


__all__ = ["BroadcastGlobalVariablesCallback", "LearningRateScheduleCallback", "LearningRateWarmupCallback",
           "MetricAverageCallback"]
