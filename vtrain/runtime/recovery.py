"""Surviving restarts inside the trainer: how often this replica was restarted, step reports for the
launcher, and custom-loop checkpoints that lose nothing on SIGTERM.

Vertex AI restarts a failed replica in place (and Spot VMs are preempted with a SIGTERM and 30 s of
notice), so a trainer must resume where it was. Keras trainers get that from BackupAndRestore
(:func:`vtrain.runtime.backup_and_restore`); custom loops from :class:`StepCheckpoints`, which
keeps step-level backups *and* TensorFlow's own PreemptionCheckpointHandler, so a SIGTERM saves the
step just finished before the process exits with :data:`~vtrain.constants.PREEMPTED_EXIT_CODE`.

Signals read (set by `vtrain local`; Vertex sets none of them):
  VTRAIN_RESTART_COUNT  times this replica was restarted in place in this attempt of the job. On
                        Vertex it is derived instead: each start is counted in a small ledger under
                        AIP_CHECKPOINT_DIR, keyed by CLOUD_ML_JOB_ID and the task (0 when neither is set).
  VTRAIN_JOB_ATTEMPT    1 for the first run of the job, 2 after one whole-job retry, ... (default 1).
  VTRAIN_STATUS_FILE    where :func:`report_step` writes ``{"step", "first", "epoch", "restarts", "time"}``
                        (``first``: the first step this process reported, where it resumed;
                        the format, writer and reader: :mod:`vtrain.runtime.status`), so the
                        launcher can inject faults at `step:N` and measure how many steps a restart redid.
  VTRAIN_FAULT_STEPS    the steps at which the launcher has a fault armed for this process (``4,200``):
                        :func:`report_step` pauses at the first report at or past each (at most
                        FAULT_STEP_WAIT, 3 s), so the launcher, which reads the status file every 0.1 s,
                        signals the replica at that step and not a few fast steps later.
  VTRAIN_STEP_LOG       on Vertex (no status file) :func:`report_step` also logs a short JSON line now and
                        then (:mod:`vtrain.runtime.steplog`); 1 forces it (the emulator), 0 turns it off.
Standard library only at import time; TensorFlow is imported where a checkpoint is touched.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from vtrain.constants import (
    FAULT_STEP_WAIT,
    FAULT_STEPS_ENV,
    PREEMPTED_EXIT_CODE,
    RESTART_COUNT_ENV,
    STATUS_FILE_ENV,
)
from vtrain.runtime import steplog
from vtrain.runtime.outputs import Checkpoints, _learner_dir, checkpoint_dir, join
from vtrain.runtime.restarts import _int_env, restart_count
from vtrain.runtime.status import Status, write_status

log = logging.getLogger("vtrain.runtime")
_first_step: list[int] = []  # the first step this process reported: where it resumed
_armed: list[int] = []  # the steps a launcher's fault waits for (VTRAIN_FAULT_STEPS), not yet reached


def _armed_steps() -> list[int]:
    """VTRAIN_FAULT_STEPS as sorted steps, read once per process; anything but whole numbers is ignored."""
    if not _armed and FAULT_STEPS_ENV in os.environ:
        text = os.environ.pop(FAULT_STEPS_ENV)[:200]  # this process's, not its children's
        _armed.extend(sorted({int(s) for s in text.split(",") if s.strip().isdigit()}))
    return _armed


def report_step(step: int, epoch: int | None = None) -> None:
    """Tell the launcher the step this replica just finished (VTRAIN_STATUS_FILE); on Vertex, tell
    Cloud Logging, now and then (:mod:`vtrain.runtime.steplog`)."""
    if not _first_step:
        _first_step.append(int(step))
    given = _int_env(os.environ, RESTART_COUNT_ENV)
    path = os.environ.get(STATUS_FILE_ENV)
    steplog.report(int(step), first=_first_step[0], epoch=epoch, restarts=given if given is not None else
                   restart_count() if restart_count.cache_info().currsize else None)  # fmt: skip
    if not path:
        return
    record = Status(int(step), given or 0, epoch, time.time(), _first_step[0])
    try:
        write_status(path, record)  # the format: vtrain.runtime.status
    except OSError as err:  # progress reports must never stop training
        log.debug("vtrain: cannot write %s: %s", path, err)
        return
    armed = _armed_steps()
    if armed and armed[0] <= step:  # a fault is armed here: let the launcher's signal land at this step
        del armed[: sum(1 for s in armed if s <= step)]
        time.sleep(FAULT_STEP_WAIT)


def step_reporter(keras_module: ModuleType) -> Any:
    """A Keras callback calling :func:`report_step` with the optimizer's step count after each batch.

    The optimizer's iterations are restored by BackupAndRestore, so the steps a launcher sees after a
    restart tell where training resumed. Not for ParameterServerStrategy (no batch-level callbacks).
    """

    class StepReporter(keras_module.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            self.epoch = epoch

        def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
            report_step(int(self.model.optimizer.iterations.numpy()), getattr(self, "epoch", None))

    return StepReporter()


# ---- custom loops ---------------------------------------------------------------------------------
class _Sigterm:
    """Our own SIGTERM flag: TF's handler only watches SIGTERM off Google Cloud (on GCE it polls the
    maintenance notice instead, which a Spot preemption or a launcher's stop does not set)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        log.warning("vtrain: SIGTERM: saving a checkpoint after this step, then exiting %d", PREEMPTED_EXIT_CODE)
        self.event.set()

    def __call__(self) -> bool:
        return self.event.is_set()

    def restore(self) -> None:
        """Put back the SIGTERM handler there was before (after the loop, SIGTERM ends the process again)."""
        signal.signal(signal.SIGTERM, self.previous)


def preemption_handler(strategy: Any, checkpoint: Any, directory: str, watcher: _Sigterm | None = None) -> Any | None:
    """tf.distribute.experimental.PreemptionCheckpointHandler on `directory`, or None where TF cannot
    use one (parameter servers, TPUs, CPU machines on Google Cloud). It restores its latest checkpoint
    now; on SIGTERM it saves after the current step and the process exits PREEMPTED_EXIT_CODE."""
    import tensorflow as tf

    name = type(strategy).__name__
    if "ParameterServer" in name or "TPU" in name:
        return None
    watcher = watcher or _Sigterm()
    config = tf.distribute.experimental.TerminationConfig(
        termination_watcher_fn=watcher, exit_fn=lambda: sys.exit(PREEMPTED_EXIT_CODE), grace_period=0
    )
    resolver = getattr(strategy, "cluster_resolver", None)
    # On CPU machines on Google Cloud TF's handler neither restores nor saves (it says so in the log):
    # the step backups of StepCheckpoints still protect the replica there.
    return tf.distribute.experimental.PreemptionCheckpointHandler(resolver, checkpoint, directory, config)


class StepCheckpoints:
    """A custom loop's checkpoints: a backup every `every` steps, and one on SIGTERM.

        step = tf.Variable(0, dtype=tf.int64)          # under strategy.scope(), in `checkpoint`
        ckpt = runtime.StepCheckpoints(strategy, checkpoint, step, every=100)
        while int(step) < total_steps:
            loss = ckpt.run(train_step, iterator)      # one step; counts it; may save and exit
        ckpt.close()

    On construction it restores the newest of the two (every replica reads the chief's), so
    `int(step)` is where training resumes (`resumed_from`).
    """

    def __init__(self, strategy: Any, checkpoint: Any, step: Any, *, every: int = 100,
                 directory: str | None = None, max_to_keep: int = 2) -> None:  # fmt: skip
        import tensorflow as tf

        base = directory or checkpoint_dir()
        self.step = step
        self.every = max(1, every)
        self.backups = Checkpoints(checkpoint, join(base, "steps"), max_to_keep=max_to_keep)
        self._sigterm = _Sigterm()
        own = _learner_dir()  # a DiLoCo learner trains alone: its preemption saves are its own too
        preempt = join(base, "preempt", own) if own else join(base, "preempt")
        self.handler = preemption_handler(strategy, checkpoint, preempt, self._sigterm)
        if self.handler is None:
            self._sigterm.restore()
        latest = tf.train.latest_checkpoint(self.backups.directory)
        if latest and int(latest.rsplit("-", 1)[1]) > int(step.numpy()):
            checkpoint.restore(latest)
            log.info("vtrain: resumed from %s", latest)
        self.resumed_from = int(step.numpy())
        if self.resumed_from:
            log.info("vtrain: resuming at step %d (restart %d of this replica)", self.resumed_from, restart_count())

    def run(self, train_step: Callable[..., Any], *args: Any) -> Any:
        """One training step through the preemption handler; counts it, reports it, backs up."""

        def one_step(*inner: Any) -> Any:
            result = train_step(*inner)
            self.step.assign_add(1)  # before the handler's check, so a SIGTERM save includes this step
            return result

        result = self.handler.run(one_step, *args) if self.handler is not None else one_step(*args)
        done = int(self.step.numpy())
        report_step(done)
        if done % self.every == 0:
            self.backups.save(done)
        return result

    def close(self) -> None:
        """A final backup, so a restart after the loop (e.g. while saving the model) redoes nothing;
        SIGTERM ends the process again from here on (and if one came meanwhile, it does now)."""
        done = int(self.step.numpy())
        if done % self.every:
            self.backups.save(done)
        self._sigterm.restore()
        if self._sigterm():
            sys.exit(PREEMPTED_EXIT_CODE)


__all__ = [
    "StepCheckpoints",
    "preemption_handler",
    "report_step",
    "step_reporter",
]
