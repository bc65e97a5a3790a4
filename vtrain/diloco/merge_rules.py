"""When the syncer merges and when it ends: the rules of :mod:`.syncer`, on its state, with no I/O.

A mixin so the rules read on their own (and stay testable on a driven clock); the state they read
(learners, pending deltas, round start times, settings) is the :class:`~.syncer.Syncer`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vtrain.diloco.members import Learner
from vtrain.diloco.outer import Outer
from vtrain.diloco.settings import Settings

GRACE_FRACTION = 0.25  # the grace window: this share of the time the quorum took, at most `grace`


class MergeRules:
    settings: Settings
    expected: list[str]
    outer: Outer | None
    learners: dict[str, Learner]
    pending: list[dict[str, tuple[list[np.ndarray], float, int]]]
    quorum_since: list[float | None]
    round_started: list[float]
    started: float
    stats: dict[str, Any]

    def _expected(self, f: int, now: float) -> tuple[list[str], list[str]]:
        """(fresh senders, alive learners the round still waits for)."""
        assert self.outer is not None
        r = self.outer.fragments[f].round
        fresh = [n for n, (_, _, b) in self.pending[f].items() if b == r]
        # A learner that (re)joined after this round began is not waited for in it: it would hold the
        # others back by most of a round plus its start-up (its delta, if late, joins the next merge).
        first = self._first_round(f)
        missing = [n for n, lr in self.learners.items() if n not in self.pending[f] and lr.base[f] == r
                   and lr.alive(now, self.settings.straggler_timeout) and not self._blocked(n, f)
                   and (first or lr.joined <= self.round_started[f])]
        return fresh, missing

    def _first_round(self, f: int) -> bool:
        """The first round this syncer process merges (every learner registers during it)."""
        assert self.outer is not None
        resumed = self.stats["resumed_from"]
        return self.outer.fragments[f].round == (resumed[f] if resumed else 0)

    def _blocked(self, name: str, f: int) -> bool:
        """Waiting on another fragment's merge, so it cannot deliver f now: never wait for it (a learner that
        joined out of phase would otherwise wait on us while we wait on it)."""
        assert self.outer is not None
        return any(name in self.pending[g] and self.pending[g][name][2] == self.outer.fragments[g].round
                   for g in range(len(self.pending)) if g != f)

    def _registering(self, f: int, now: float) -> bool:
        """The first merge waits for every learner (``min_quorum`` of them, when set) to (re)register: at
        start (Vertex starts replicas in any order) up to registration_timeout; after a resume up to
        straggler_timeout, as learners reconnect with backoff, so the first one back does not merge alone
        with the whole round's weight. Later learners join at the current round with the global model."""
        if not self._first_round(f):
            return False
        resumed = self.stats["resumed_from"]
        limit = self.settings.straggler_timeout if resumed else self.settings.registration_timeout
        need = min(self.settings.min_quorum or len(self.expected), len(self.expected))
        return now - self.started < limit and sum(n in self.learners for n in self.expected) < need

    def _ready(self, f: int, now: float) -> bool:
        assert self.outer is not None
        if self._registering(f, now):
            return False
        fresh, missing = self._expected(f, now)
        if not fresh:
            self.quorum_since[f] = None
            return False
        if not missing:
            return True
        quorum = min(self.settings.min_quorum or len(fresh) + len(missing), len(fresh) + len(missing))
        if len(fresh) < quorum:
            self.quorum_since[f] = None
            return False
        since = self.quorum_since[f]
        if since is None:
            since = self.quorum_since[f] = now
        window = min(self.settings.grace, GRACE_FRACTION * max(0.0, since - self.round_started[f]))
        if now - since >= window:
            return True
        if not any(self.learners[n].due_by(since + window) for n in missing):
            self.stats["grace_skipped"] += 1  # by their pace, nobody missing can make it: waiting buys nothing
            return True
        return False

    def _finished(self, now: float) -> bool:
        if self.outer is None or not any(lr.done for lr in self.learners.values()):
            return False
        quorum = self.settings.min_quorum
        if quorum is not None and sum(lr.done for lr in self.learners.values()) >= quorum:
            return True  # a quorum has done its work: stragglers stop at their next exchange, not run on alone
        deadline = self.settings.registration_timeout
        for lr in self.learners.values():
            gone = lr.conn is None and lr.left_at is not None and now - lr.left_at >= deadline
            if not (lr.done or gone):
                return False
        unseen = [n for n in self.expected if n not in self.learners]
        return not unseen or now - self.started >= deadline
