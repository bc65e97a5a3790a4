"""DiLoCo inside a trainer: a Keras callback and a custom-loop helper around :class:`vtrain.diloco.learner.Client`.

Under `distribution_strategy: diloco` each learner trains on its own (runtime.strategy() gives it
MirroredStrategy over its GPUs, or the default strategy) and, every ``inner_steps`` steps, sends
the change of its parameters to the syncer and continues from the merged global model:

    sync = runtime.diloco(model, examples_per_step=global_batch)   # custom loop: joins now
    for step in range(steps):
        train_step(...)
        sync.step()                     # every H steps (H/fragments with fragments): exchange
        if sync.stopped:                # with min_quorum: a quorum finished, stragglers stop
            break
    sync.finish()                       # last delta, then the final global model

    model.fit(..., callbacks=[..., runtime.diloco_callback(keras, examples_per_step=global_batch)])

What is exchanged: every floating-point variable of the model. Trainable ones get the outer
optimizer; non-trainable ones (BatchNorm statistics) are averaged across learners. Integer
variables and the inner optimizer's state (Adam moments, its step counter) stay local, as in
DiLoCo. Joining (and rejoining after a restart) replaces the local weights with the current
global model, so every learner starts from the same point; put the callback *after*
BackupAndRestore so the global model wins over a stale local checkpoint.
`examples_per_step` weights each learner by the examples it processed (give it when learner
pools differ in batch size); without it each step counts as one.

With ``overlap: true`` a learner does not wait for the merge: it sends its delta and trains on.
When the merged update arrives (looked for after every step; at the latest it is waited for at
that fragment's next exchange) the fragment becomes the new global value *plus the change made
since the send*, so no step is lost and the next delta carries exactly the steps not yet sent.
The cost is that those steps were taken from the pre-merge model.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("vtrain.runtime")
FLOATS = ("float16", "bfloat16", "float32", "float64")


def _dtype(v: Any) -> str:
    return str(getattr(v.dtype, "name", v.dtype))


def exchanged_variables(model_or_variables: Any) -> list[Any]:
    """The model's floating-point variables, in the model's own (deterministic) order."""
    found = getattr(model_or_variables, "weights", None)
    variables = list(model_or_variables if found is None else found)
    seen: set[int] = set()
    out = []
    for v in variables:
        if id(v) not in seen and _dtype(v) in FLOATS:
            seen.add(id(v))
            out.append(v)
    return out


class Diloco:
    """Keeps the anchor, counts steps, exchanges a fragment when due, applies what comes back."""

    def __init__(self, model_or_variables: Any, examples_per_step: float | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        import numpy as np

        from vtrain.diloco import settings as envsettings
        from vtrain.diloco.codec import TensorSpec
        from vtrain.diloco.learner import Client

        self._np = np
        env = os.environ if env is None else env
        self.settings = envsettings.settings(env)
        self.variables = exchanged_variables(model_or_variables)
        if not self.variables:
            raise ValueError("runtime.diloco() found no floating-point variables: build the model first")
        manifest = [TensorSpec(f"{i}:{getattr(v, 'path', None) or v.name}", _dtype(v), tuple(int(d) for d in v.shape),
                               bool(v.trainable)) for i, v in enumerate(self.variables)]
        self.name = envsettings.this_replica(env)
        self.client = Client(envsettings.syncer_address(env), envsettings.token(env), self.name, manifest,
                             self.settings, self._values)
        self.examples_per_step = float(examples_per_step) if examples_per_step else 1.0
        self.every = self.settings.inner_steps // self.settings.fragments
        self.steps = 0
        self._since = [0.0] * len(self.client.fragments)
        self.overlap = self.settings.overlap
        self._at_send: dict[int, list[Any]] = {}  # with overlap: each fragment in flight as it was sent
        self._started = time.monotonic()
        self._assign(range(len(self.variables)), self.client.connect())
        self.finished = False

    def _values(self) -> list[Any]:
        return self._read(range(len(self.variables)))

    def _read(self, indices: Any) -> list[Any]:
        """The variables at `indices` as float32 numpy arrays (the wire's and the anchor's type)."""
        return [self._np.asarray(self.variables[i].numpy(), self._np.float32) for i in indices]

    def _assign(self, indices: Any, values: Any) -> None:
        for i, value in zip(indices, values, strict=True):
            v = self.variables[i]
            if _dtype(v) == "float32":
                v.assign(value)
            else:
                import tensorflow as tf

                v.assign(tf.cast(value, _dtype(v)))

    @property
    def rounds(self) -> list[int]:
        """Rounds merged so far, per fragment."""
        return list(self.client.rounds)

    @property
    def stopped(self) -> bool:
        """True once the syncer has ended training (a quorum of learners finished): leave the loop."""
        return self.client.stopped

    def step(self, examples: float | None = None) -> bool:
        """Call after every optimizer step; True when this step exchanged a fragment."""
        if self.client.stopped:
            return False
        self.steps += 1
        add = self.examples_per_step if examples is None else float(examples)
        self._since = [s + add for s in self._since]
        if self._at_send:
            self._absorb(wait=False)  # a merge that came in while we trained
        if self.steps % self.every or self.client.stopped:
            return False
        f = self._next_fragment()
        if self.client.stopped:
            return False
        local = self._read(self.client.fragments[f])
        if self.overlap:
            self.client.send(f, local, self._since[f])
            self._at_send[f], self._since[f] = local, 0.0
            return True
        for g, values in self.client.sync(f, local, self._since[f]).items():
            self._assign(self.client.fragments[g], values)
            self._since[g] = 0.0
        return True

    def _next_fragment(self) -> int:
        """The fragment to exchange: the one with the fewest merged rounds among those not in flight
        (with overlap, when every one is, wait for their merges: a round took longer than H steps).

        Chosen from the global rounds rather than the local step, so a learner that joins or rejoins
        mid-run falls into the same phase as the others."""
        rounds = self.client.rounds
        free = [g for g in range(len(rounds)) if g not in self._at_send]
        if not free:
            self._absorb(wait=True)
            free = list(range(len(rounds)))
        return min(free, key=lambda g: (self.client.rounds[g], g))

    def _absorb(self, wait: bool) -> None:
        """Apply the merges of deltas in flight: the new global values plus what changed since the send."""
        merged, reset = self.client.collect(wait)
        if reset:  # training ended, or a rejoin lost our deltas: the global model as it is
            self._take_global()
            self._at_send.clear()
            self._since = [0.0] * len(self._since)
            return
        if not wait and merged:  # arrived while we trained: the wait overlap saved
            extra = self.client.traffic.extra
            extra["merged_while_training"] = extra.get("merged_while_training", 0) + len(merged)
        anchor = self.client.anchor
        for g in merged:
            ix = self.client.fragments[g]
            sent = self._at_send.pop(g)
            self._assign(ix, [anchor[i] + (cur - old) for i, cur, old in zip(ix, self._read(ix), sent, strict=True)])

    def _take_global(self) -> None:
        """Every variable becomes the global model this learner last received."""
        self._assign(range(len(self.variables)), [a.copy() for a in self.client.anchor])

    def finish(self) -> None:
        """Send what is left, say done, and end with the syncer's final global model (idempotent)."""
        if self.finished:
            return
        self.finished = True
        if self._at_send:
            from vtrain.errors import DilocoError

            try:
                self._absorb(wait=True)
            except DilocoError as err:  # as Client.finish does when the syncer is gone for good
                log.warning("vtrain.diloco: %s: %s; keeping the last global model received", self.name, err)
                self._take_global()
                return
        pending = {}
        for f, ix in enumerate(self.client.fragments):
            if self._since[f] > 0:
                pending[f] = (self._read(ix), self._since[f])
        self._assign(range(len(self.variables)), self.client.finish(pending))
        t = self.client.traffic
        elapsed = max(time.monotonic() - self._started, 1e-9)
        overlapped = (f", {int(t.extra.get('merged_while_training', 0))} merge(s) applied while training"
                      if self.overlap else "")
        log.info("vtrain.diloco: %s: %d steps, rounds %s, sent %d bytes (%.0f per step), received %d, waited "
                 "%.1f s of %.1f s (utilisation %.1f%%), %d rejoin(s)%s", self.name, self.steps, self.rounds, t.sent,
                 t.sent / max(self.steps, 1), t.received, t.wait_seconds, elapsed,
                 100 * (1 - t.wait_seconds / elapsed), t.reconnects, overlapped)

    def close(self) -> None:
        """Let the syncer end the job now. Without it the stream stays open after :meth:`finish` until
        this process exits, so the syncer (the chief, whose exit ends the job) waits for the model save."""
        self.client.close()

    def summary(self) -> dict[str, Any]:
        t = self.client.traffic
        return {"learner": self.name, "steps": self.steps, "rounds": self.rounds, "sent": t.sent,
                "received": t.received, "delta_payload": t.delta_payload, "update_payload": t.update_payload,
                "syncs": t.syncs, "wait_seconds": t.wait_seconds, "reconnects": t.reconnects,
                "first_sync_wait": t.extra.get("first_sync_wait", 0.0),
                "merged_while_training": int(t.extra.get("merged_while_training", 0)),
                "seconds": time.monotonic() - self._started}


def learner_shard(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(number of learners, this learner's position): shard the input so learners see different data."""
    from vtrain.diloco import settings as envsettings

    env = os.environ if env is None else env
    names = envsettings.expected_learners(env)
    me = envsettings.this_replica(env)
    return (len(names), names.index(me)) if me in names else (1, 0)


def diloco(model_or_variables: Any, examples_per_step: float | None = None) -> Diloco:
    """Join the syncer now (the model must be built) and return the helper for a custom loop."""
    return Diloco(model_or_variables, examples_per_step)


def diloco_callback(keras: Any, examples_per_step: float | None = None) -> Any:
    """A Keras callback doing what :func:`diloco` does inside model.fit (joins in on_train_begin).

    With steps_per_execution > 1 Keras calls batch hooks once per execution: each call counts
    as that many steps.
    """

    class DilocoCallback(keras.callbacks.Callback):  # type: ignore[misc]  # Keras ships no types
        def __init__(self) -> None:
            super().__init__()
            self.sync: Diloco | None = None

        def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
            if self.sync is None:
                self.sync = Diloco(self.model, examples_per_step)

        def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
            assert self.sync is not None
            try:
                per_call = max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))
            except (TypeError, ValueError):
                per_call = 1
            for _ in range(per_call):
                self.sync.step()
            if self.sync.stopped:
                self.model.stop_training = True  # a quorum finished: this straggler stops too

        def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
            if self.sync is not None:
                self.sync.finish()

    return DilocoCallback()
