"""The DiLoCo syncer: pool 0 of the CustomJob, a CPU process that merges what the learners send.

Run by Vertex AI (and `vtrain local`) as ``python -m vtrain.diloco``. Each learner holds one gRPC
stream (:mod:`.wire`). The rules, per fragment and round r:

* **Merge** when every learner expected for round r (alive, working from round r, not done)
  has sent its delta; or when at least ``min(min_quorum, those expected)`` fresh deltas are in
  and an adaptive grace window has passed: a quarter of the time the quorum took, never more
  than ``grace``, and not at all when no missing learner can make it by its pace (the moving
  average of its time from our answer to its next delta): a learner 2x slower than the rest
  would never arrive within the window, so the others do not wait for it every round. A learner
  still working from an older round is a straggler, not expected: its delta, when it comes, is
  answered at once with the updates it missed and joins the next merge (weighted by
  1/(1+staleness); dropped beyond ``max_staleness``).
* **Joining late**: a learner that (re)joins mid-round (restarted, or slow to start) is not waited
  for until the next round. Its first delta, late for the round it joined in, joins the next merge
  (stale) and is answered *with* that merge rather than at once, so it falls in step with the others
  instead of staying a round out of phase for the rest of the run.
* **Alive** means a frame (deltas, heartbeats: learners send them from a thread, even while
  waiting on us) within ``straggler_timeout``, and the stream open. A killed learner's stream
  ends (seen at once); a hung one falls silent: it stalls one merge by at most
  grace + straggler_timeout. Nobody is judged by the time since its last *delta*.
* **Registration deadline**: the first merge waits for every learner (``min_quorum`` learners,
  when set) to register, at most ``registration_timeout`` (after a resume, to re-register, at most
  ``straggler_timeout``); no learner at all by then fails the job; a learner that never starts (or
  left and never came back) is ignored after that long.
* **End**: once every learner is done or gone (or, with ``min_quorum``, that many are done: a
  straggler does not train on alone), pending deltas are merged, each connected learner gets the
  final global model (one still training stops at its next exchange), and the syncer exits 0 once
  the learners have exited (they save the model after the final exchange, and the chief's exit
  ends the job), or fell silent, at most registration_timeout later. A learner that registers after
  the end (slow to start, or restarted) is welcomed with the final model and stops at once.
* **Checkpoint** (global params, outer momentum, residuals, rounds) to
  ``$AIP_CHECKPOINT_DIR/diloco/syncer.npz`` after a merge, at most every ``checkpoint_every``
  seconds (0: after every merge), and at the end; a restarted syncer resumes from it, and
  reconnecting learners get its global model (a learner whose delta was in flight sends it again
  when the syncer resumed at that delta's round, so the round is not lost).
* **Progress**: the outer steps done (merges over all fragments) are reported once checkpointed
  when due (``on_progress``; ``python -m vtrain.diloco`` passes them to ``runtime.report_step``,
  so `vtrain local --fault chief-0:kill@step:N` can aim at the syncer and measures rounds redone).
"""

from __future__ import annotations

import hmac
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from vtrain.diloco import codec, wire
from vtrain.diloco.codec import TensorSpec
from vtrain.diloco.members import Conn, Learner
from vtrain.diloco.merge_rules import MergeRules
from vtrain.diloco.outer import Outer
from vtrain.diloco.settings import Settings
from vtrain.diloco.storage import Store
from vtrain.foreign import printable

log = logging.getLogger("vtrain.diloco")


class Syncer(MergeRules):
    def __init__(self, settings: Settings, expected: list[str], token: str, store: Store | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_progress: Callable[[int], None] | None = None) -> None:
        self.settings, self.expected, self._token, self.store, self.clock = settings, expected, token, store, clock
        self.on_progress = on_progress  # called with the outer steps done (merges, all fragments) once durable
        self.cv = threading.Condition()
        self.outer: Outer | None = None
        self.learners: dict[str, Learner] = {}
        self.pending: list[dict[str, tuple[list[np.ndarray], float, int]]] = []
        self.held: list[set[str]] = []  # stale first deltas of rejoined learners, answered at the next merge
        self.quorum_since: list[float | None] = []
        self.round_started: list[float] = []
        self.first_fresh: list[float | None] = []
        self.started = clock()
        self.stop_requested = False
        self.ended = False  # the final model went out: whoever (re)registers now gets it at once
        self.last_checkpoint = clock()
        self.written = 0  # outer steps in the last checkpoint written (or read)
        self.stats: dict[str, Any] = {"merges": 0, "stale_merged": 0, "stale_dropped": 0, "max_wait_after_quorum": 0.0,
                                      "max_stall": 0.0, "grace_skipped": 0,
                                      "rejected": 0, "resumed_from": None, "rounds_lost": 0, "rounds": [],
                                      "merge_log": []}
        if store is not None:
            data = store.read()
            if data is not None:
                self.outer, meta = Outer.from_bytes(data, settings)
                self._reset_rounds()
                self.stats["resumed_from"] = self.outer.rounds
                self.written = self._steps()
                log.info("vtrain.diloco: resumed from %s at rounds %s", store.path, self.outer.rounds)

    def _reset_rounds(self) -> None:
        assert self.outer is not None
        n = len(self.outer.fragments)
        self.pending = [{} for _ in range(n)]
        self.held = [set() for _ in range(n)]
        self.quorum_since = [None] * n
        self.first_fresh = [None] * n
        self.round_started = [self.clock()] * n

    # ------------------------------------------------------------------ streams

    def session(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        """The gRPC method: a reader thread handles what arrives; this generator is the only writer."""
        conn = Conn()
        context.add_callback(lambda: self._closed(conn))
        threading.Thread(target=self._read, args=(conn, requests), daemon=True).start()
        while True:
            try:
                frame = conn.out.get(timeout=self.settings.heartbeat)
            except queue.Empty:
                frame = wire.Frame(header=wire.header("heartbeat"))
            if frame is None:
                return
            yield frame

    def _read(self, conn: Conn, requests: Iterator[Any]) -> None:
        assembler = wire.Assembler()
        try:
            for frame in requests:
                message = assembler.feed(frame)
                if message is not None and not self._handle(conn, *message):
                    break
        except Exception as err:  # noqa: BLE001 - a broken stream is a learner leaving, whatever grpc raised
            log.debug("vtrain.diloco: stream of %s ended: %s", conn.learner, err)
        self._closed(conn)

    def _closed(self, conn: Conn) -> None:
        with self.cv:
            if not conn.closed:
                conn.close()
            learner = self.learners.get(conn.learner or "")
            if learner is not None and learner.conn is conn:
                learner.conn, learner.left_at = None, self.clock()
                if not learner.done:
                    log.warning("vtrain.diloco: %s disconnected; merging without it until it rejoins", learner.name)
            self.cv.notify_all()

    def _reject(self, conn: Conn, reason: str) -> bool:
        self.stats["rejected"] += 1
        log.error("vtrain.diloco: refused %s: %s", conn.learner or "a learner", reason)
        conn.send(wire.header("reject", reason=reason))
        conn.close()
        return False

    def _handle(self, conn: Conn, h: Any, payload: bytes) -> bool:
        """One message from a stream; False ends the stream."""
        now = self.clock()
        if h.kind == "hello":
            return self._hello(conn, h)
        if conn.learner is None:
            return self._reject(conn, f"'{h.kind}' before hello")
        if h.kind == "init":
            return self._init(conn, h, payload)
        with self.cv:
            learner = self.learners.get(conn.learner)
            if learner is None or learner.conn is not conn:
                return False  # superseded by a newer stream of the same learner
            learner.last_heard = now
            if h.kind == "done":
                learner.done = True
                log.info("vtrain.diloco: %s is done", learner.name)
                self.cv.notify_all()
                return True
            if h.kind != "delta":
                return True
        return self._delta(conn, learner, h, payload)

    def _hello(self, conn: Conn, h: Any) -> bool:
        if not hmac.compare_digest(h.token.encode(), self._token.encode()):
            return self._reject(conn, "wrong token: this learner belongs to another job (or VTRAIN_DILOCO_TOKEN "
                                      "differs between pools)")
        conn.learner = h.learner
        with self.cv:
            if self.outer is None:
                conn.send(wire.header("init_please"))
                return True
            if h.manifest_hash != self.outer.hash:
                return self._reject(conn, self._mismatch(h))
            self._count_lost(h.learner, list(h.rounds))
            self._welcome(conn, h.learner)
        return True

    def _count_lost(self, name: str, theirs: list[int]) -> None:
        """A learner ahead of us was sent merges our checkpoint lacks: those rounds are redone. Said,
        and counted in rounds_lost (the most any learner was ahead), so the summary does not claim
        nothing was lost."""
        assert self.outer is not None
        ahead = max((t - o for t, o in zip(theirs, self.outer.rounds, strict=False)), default=0)
        if ahead > 0:
            self.stats["rounds_lost"] = max(self.stats["rounds_lost"], ahead)
            log.warning("vtrain.diloco: %s was at rounds %s, the checkpoint at %s: %d round(s) lost with the "
                        "syncer are redone", name, theirs, self.outer.rounds, ahead)

    def _mismatch(self, h: Any) -> str:
        assert self.outer is not None
        ours = {t.name: (t.dtype, t.shape) for t in self.outer.manifest}
        theirs = {t.name: (t.dtype, tuple(t.shape)) for t in h.manifest}
        diff = sorted(set(ours.items()) ^ set(theirs.items()))[:3]
        return (f"model mismatch: manifest {h.manifest_hash} but the global model is {self.outer.hash} "
                f"({len(theirs)} vs {len(ours)} tensors; first differences: {diff})")

    def _init(self, conn: Conn, h: Any, payload: bytes) -> bool:
        manifest = [TensorSpec(t.name, t.dtype, tuple(t.shape), t.trainable) for t in h.manifest]
        if codec.manifest_hash(manifest) != h.manifest_hash:
            return self._reject(conn, "the manifest does not match its hash")
        values = codec.unpack(payload, "none", manifest)
        with self.cv:
            if self.outer is None:
                self.outer = Outer(manifest, values, self.settings)
                self._reset_rounds()
                log.info("vtrain.diloco: global model from %s: %d tensors, %d values, %d fragment(s), manifest %s",
                         conn.learner, len(manifest), sum(t.size for t in manifest), len(self.outer.fragments),
                         self.outer.hash)
            elif h.manifest_hash != self.outer.hash:
                return self._reject(conn, self._mismatch(h))
            self._welcome(conn, h.learner)
        return True

    def _welcome(self, conn: Conn, name: str) -> None:
        """Register (or re-register) a learner and send it the global model. Called under the lock."""
        assert self.outer is not None
        old = self.learners.get(name)
        if old is not None and old.conn is not None and old.conn is not conn:
            old.conn.close()
        rejoin = old is not None
        now = self.clock()
        self.learners[name] = Learner(name, conn, now, self.outer.rounds, deltas=old.deltas if old else 0,
                                      answered_at=now, work=old.work if old else None, joined=now,
                                      weight=old.weight if old else 0.0,
                                      just_joined=True)
        for f in range(len(self.outer.fragments)):
            self.pending[f].pop(name, None)
            self.held[f].discard(name)
        payload = b"".join(self.outer.snapshot(f) for f in range(len(self.outer.fragments)))
        conn.send(wire.header("welcome", rounds=self.outer.rounds, codec="none", snapshot=True, ended=self.ended),
                  payload)
        log.info("vtrain.diloco: %s %s at rounds %s", name, "rejoined" if rejoin else "registered", self.outer.rounds)
        if self.ended:
            # Training is over (a quorum finished, or every learner did): a learner that starts or comes
            # back now, while we wait for the others to exit or the server drains, must not train on alone
            # waiting for merges that will never come; it takes the final model and stops. (The welcome
            # says so too, so it stops before its first step; the final is for learners that ignore that.)
            conn.send(wire.header("final", rounds=self.outer.rounds))
            log.info("vtrain.diloco: %s came after the end: sent it the final model", name)
        self.cv.notify_all()

    def _delta(self, conn: Conn, learner: Learner, h: Any, payload: bytes) -> bool:
        assert self.outer is not None
        if h.manifest_hash != self.outer.hash:
            return self._reject(conn, self._mismatch(h))
        f = int(h.fragment)
        deltas = codec.unpack(payload, h.codec, self.outer.specs(f))
        weight = float(h.examples) if self.settings.token_weighting else 1.0
        with self.cv:
            learner.deltas += 1
            learner.heard_delta(self.clock())
            r, base = self.outer.fragments[f].round, int(h.base_round)
            if base == r:
                if self.first_fresh[f] is None:
                    self.first_fresh[f] = self.clock()
                self.pending[f][learner.name] = (deltas, max(weight, 1e-12), base)
                learner.base[f], learner.weight = r, max(weight, 1e-12)
            else:
                missed = self.outer.catch_up(f, base)
                if missed is not None and r - base <= self.settings.max_staleness:
                    self.pending[f][learner.name] = (deltas, max(weight, 1e-12) / (1 + r - base), base)
                    if learner.just_joined:  # out of phase, not slow: answer with this round's merge, in step
                        self.held[f].add(learner.name)
                else:
                    self.stats["stale_dropped"] += 1
                if learner.name not in self.held[f]:
                    self._send_catch_up(learner, f, base, missed)
            learner.just_joined = False
            self.cv.notify_all()
        return True

    def _send_catch_up(self, learner: Learner, f: int, base: int, missed: list[tuple[int, bytes]] | None) -> None:
        assert self.outer is not None and learner.conn is not None
        now = self.outer.fragments[f].round  # base_round on an update: the round this reply brings it to
        if missed is None:
            learner.conn.send(wire.header("update", fragment=f, round=now, base_round=now, codec="none",
                                          snapshot=True), self.outer.snapshot(f))
        else:
            for r, update in missed:
                learner.conn.send(wire.header("update", fragment=f, round=r, base_round=now,
                                              codec=self.settings.compression), update)
        learner.base[f] = self.outer.fragments[f].round
        learner.answered_at = self.clock()

    # ------------------------------------------------------------------ merging

    def _merge(self, f: int, now: float) -> None:
        assert self.outer is not None
        frag = self.outer.fragments[f]
        r = frag.round
        entries = self.pending[f]
        fresh = [n for n, (_, _, b) in entries.items() if b == r]
        # Learners that finished still count: a lagging learner's lone last rounds move the model by its
        # share, not as if it were the whole job.
        live = [lr.weight for n, lr in self.learners.items()
                if n in entries or lr.done or lr.alive(now, self.settings.straggler_timeout)]
        update = self.outer.merge(f, [(d, w) for d, w, _ in entries.values()], full_weight=sum(live))
        stale = len(entries) - len(fresh)
        waited = 0.0 if (since := self.quorum_since[f]) is None else now - since
        self.stats["merges"] += 1
        self.stats["stale_merged"] += stale
        self.stats["max_wait_after_quorum"] = max(self.stats["max_wait_after_quorum"], waited)
        # The stall: how long the first learner to deliver this round waited for the merge.
        stall = 0.0 if (first := self.first_fresh[f]) is None else now - first
        self.stats["max_stall"] = max(self.stats["max_stall"], stall)
        # [seconds since start, fragment, round, fresh, stale, stall seconds]: for benchmarks and post-mortems
        self.stats["merge_log"].append([round(now - self.started, 4), f, r + 1, len(fresh), stale, round(stall, 4)])
        log.info("vtrain.diloco: fragment %d round %d: %d fresh + %d stale delta(s), %.3f s after quorum",
                 f, r + 1, len(fresh), stale, waited)
        self._durable_if_due()  # before any learner hears of this merge
        for name in fresh:
            learner = self.learners.get(name)
            if learner is not None and learner.conn is not None:
                learner.conn.send(wire.header("update", fragment=f, round=frag.round, base_round=frag.round,
                                              codec=self.settings.compression), update)
                learner.base[f] = frag.round
                learner.answered_at = now
        for name in self.held[f]:  # rejoined learners whose first delta was late: now in step with the rest
            learner = self.learners.get(name)
            if learner is not None and learner.conn is not None and name in entries:
                base = entries[name][2]
                self._send_catch_up(learner, f, base, self.outer.catch_up(f, base))
        self.held[f].clear()
        entries.clear()
        self.quorum_since[f] = self.first_fresh[f] = None
        self.round_started[f] = now

    def _finish(self) -> None:
        """Merge what is pending, send every connected learner the final model. Under the lock."""
        assert self.outer is not None
        now = self.clock()
        for f in range(len(self.outer.fragments)):
            if self.pending[f]:
                self._merge(f, now)
        for lr in self.learners.values():
            if lr.conn is None or lr.conn.closed:
                continue
            for f in range(len(self.outer.fragments)):
                if lr.base[f] != self.outer.fragments[f].round:
                    self._send_catch_up(lr, f, lr.base[f], self.outer.catch_up(f, lr.base[f]))
            lr.conn.send(wire.header("final", rounds=self.outer.rounds))
        self.ended = True

    def coordinate(self, poll: float = 0.02, linger: float | None = None) -> dict[str, Any]:
        """Drive merges until the end; returns the run's statistics. Raises on the registration deadline."""
        from vtrain.errors import DilocoError

        steps = self._steps()  # outer steps done (reported)
        while True:
            with self.cv:
                now = self.clock()
                if self.outer is None and now - self.started >= self.settings.registration_timeout:
                    raise DilocoError(f"no learner registered within registration_timeout "
                                      f"({self.settings.registration_timeout:g} s)")
                if self.stop_requested:
                    break
                if self.outer is not None:
                    for f in range(len(self.outer.fragments)):
                        if self._ready(f, now):
                            self._merge(f, now)
                    if self._finished(now):
                        self._finish()
                        break
                done = self._steps()
                # Merges made before their checkpoint was due are written once it is (merges write
                # themselves when it is due at merge time: see _durable_if_due).
                due = done != self.written and now - self.last_checkpoint >= self.settings.checkpoint_every
                data = self._checkpoint_bytes() if due else None
                if data is None and done == steps:
                    self.cv.wait(poll)
            if data is not None:
                self._write(data)
                self.last_checkpoint, self.written = self.clock(), done
            if done != steps:  # what the learners were sent: with checkpoint_every 0 it is all durable
                steps = done
                if self.on_progress is not None:
                    self.on_progress(done)
        with self.cv:
            data = self._checkpoint_bytes()
            self.stats["rounds"] = self.outer.rounds if self.outer else []
            self.stats["learners"] = {n: lr.deltas for n, lr in self.learners.items()}
        if data is not None:
            self._write(data)  # first: a SIGTERM's grace (30 s on Spot) must not run out before it is saved
        if not self.stop_requested:
            # As the chief, our exit ends the job and Vertex stops the other replicas: wait until the
            # learners are gone (they hold their stream open until they exit, after saving the model),
            # or silent for straggler_timeout, at most `linger` (registration_timeout by default).
            with self.cv:
                end = self.clock() + (self.settings.registration_timeout if linger is None else linger)
                while self._still_working(self.clock()) and self.clock() < end:
                    self.cv.wait(0.1)
        return self.stats

    def _still_working(self, now: float) -> bool:
        return any(lr.conn is not None and now - lr.last_heard < self.settings.straggler_timeout
                   for lr in self.learners.values())

    def _steps(self) -> int:
        return sum(self.outer.rounds) if self.outer is not None else 0

    def _durable_if_due(self) -> None:
        """Write the checkpoint now, under the lock, when one is due (always with checkpoint_every 0):
        a syncer killed after sending a merge then never resumes behind the learners, whose work for
        that round would be dropped. Other merges are written at the next due time (up to
        checkpoint_every of rounds can be redone; rounds_lost counts them on resume)."""
        if self.store is None or self.clock() - self.last_checkpoint < self.settings.checkpoint_every:
            return
        data = self._checkpoint_bytes()
        if data is not None:
            self._write(data)
            self.last_checkpoint, self.written = self.clock(), self._steps()

    def _checkpoint_bytes(self) -> bytes | None:
        if self.outer is None or self.store is None:
            return None
        return self.outer.to_bytes({"learners": sorted(self.learners)})

    def _write(self, data: bytes) -> None:
        if self.store is not None:
            self.store.write(data)


def summary_json(stats: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in stats.items() if k != "merge_log"}, sort_keys=True)


def summary_line(stats: dict[str, Any]) -> str:
    """The run in one line, for the job's log (summary.json beside the checkpoint has everything)."""
    resumed = f", resumed at {stats['resumed_from']}" if stats.get("resumed_from") else ""
    if stats.get("rounds_lost"):
        resumed += f", {stats['rounds_lost']} round(s) lost with the syncer and redone"
    per = ", ".join(f"{printable(name)} {n}" for name, n in sorted(stats.get("learners", {}).items()))  # peers' names
    return (f"rounds {stats.get('rounds')} ({stats['merges']} merges{resumed}); stale deltas merged "
            f"{stats['stale_merged']}, dropped {stats['stale_dropped']}; grace skipped {stats['grace_skipped']}; "
            f"longest stall {stats['max_stall']:.2f} s; refused {stats['rejected']}; deltas per learner: {per}")
